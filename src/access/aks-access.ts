/**
 * What `configure aks` prints: the Azure role assignments that let the discovery identity
 * read an AKS cluster's user kubeconfig (and pass Azure RBAC where the cluster uses it), and
 * the Kubernetes RBAC binding its object id to the discovery ClusterRole. Pure: no I/O.
 */
import {InputError} from '../core/errors.ts';
import {shellCommand} from './eks-access.ts';
import {discoveryClusterRole, discoveryClusterRoleBinding, rbacYaml} from './rbac.ts';

/** The cluster and the identity `configure aks` is about. */
export interface AksAccessRequest {
  readonly subscription: string;
  readonly resourceGroup: string;
  readonly name: string;
  /** Object (principal) id of the managed identity or service principal kube-discovery runs as. */
  readonly principalId: string;
  readonly rbacName: string;
}

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Checks a flag holds a GUID (subscription id, object id). */
export function checkGuid(flag: string, value: string): string {
  if (!GUID.test(value)) throw new InputError(`expected ${flag} to be a GUID such as 00000000-0000-0000-0000-000000000000, got ${JSON.stringify(value)}`);
  return value.toLowerCase();
}

/** ARM id of the managed cluster, the scope of its role assignments. */
export function aksClusterScope(r: Pick<AksAccessRequest, 'subscription' | 'resourceGroup' | 'name'>): string {
  return `/subscriptions/${r.subscription}/resourceGroups/${r.resourceGroup}/providers/Microsoft.ContainerService/managedClusters/${r.name}`;
}

function roleAssignment(r: AksAccessRequest, role: string): string {
  return shellCommand([
    'az', 'role', 'assignment', 'create', '--assignee-object-id', r.principalId, '--assignee-principal-type', 'ServicePrincipal',
    '--role', role, '--scope', aksClusterScope(r),
  ]);
}

/** The whole text `configure aks` prints. */
export function aksAccessInstructions(r: AksAccessRequest): string {
  // AKS with Entra ID names a service principal or managed identity by its object id.
  const objects = [discoveryClusterRole(r.rbacName), discoveryClusterRoleBinding({kind: 'User', name: r.principalId}, r.rbacName)];
  return [
    `# kube-discovery access to AKS cluster ${r.name} (resource group ${r.resourceGroup}, subscription ${r.subscription}).`,
    '',
    '# 1. Let the identity read the cluster\'s user kubeconfig (API server and CA). Not needed where the',
    '#    kube-discovery role (deploy/azure/discovery-role.json) is already assigned on a scope holding the cluster.',
    roleAssignment(r, 'Azure Kubernetes Service Cluster User Role'),
    '',
    '# 2. Only if the cluster uses Azure RBAC for Kubernetes authorization: read access through Azure RBAC.',
    '#    Impersonation still comes from the ClusterRoleBinding below, which AKS honours alongside Azure RBAC.',
    roleAssignment(r, 'Azure Kubernetes Service RBAC Reader'),
    '',
    '# 3. Kubernetes RBAC for the identity; apply as a cluster admin (kubectl apply -f -):',
    rbacYaml(objects).trimEnd(),
    '',
  ].join('\n');
}
