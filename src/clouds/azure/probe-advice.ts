/** What the access probe tells an operator about an AKS cluster: Azure roles, Entra ID, local accounts. */
import type {CloudProbeAdvice} from '../cloud.ts';

type AksMode = 'azure-rbac' | 'kubernetes-rbac' | 'local-accounts' | 'unknown';

/** Reads the AKS flavour loosely: `azure-rbac`, `AzureRBAC`, `aad-kubernetes-rbac`, `local` ... */
function aksMode(authMode: string | undefined): AksMode {
  const m = (authMode ?? '').toLowerCase().replace(/[^a-z]/g, '');
  if (m.includes('azurerbac')) return 'azure-rbac';
  if (m.includes('local')) return 'local-accounts';
  if (m.includes('kubernetes') || m.includes('aad') || m.includes('entra')) return 'kubernetes-rbac';
  return 'unknown';
}

/** AKS advice. */
export const aksProbeAdvice: CloudProbeAdvice = {
  accessKind: 'aks',
  clusterName: (access) => (access.kind === 'aks' ? access.resource_name : undefined),
  principal: () => undefined,
  apiName: 'AKS',
  networkHint: 'if the cluster is private, run the service in a network that can resolve and reach its private endpoint; if public, check the authorized IP ranges',
  credentialsHint: 'check the service\'s Azure identity (workload identity, managed identity or environment credentials)',
  unauthorized(t, rbacFix) {
    const principal = t.principal ?? '<object id>';
    const who = t.principal ? `the identity ${t.principal}` : 'the discovery identity';
    const assign = (role: string): string =>
      `\`az role assignment create --assignee ${principal} --role "${role}" --scope <resource id of ${t.clusterName}>\``;
    switch (aksMode(t.authMode)) {
      case 'local-accounts':
        return (
          `AKS cluster ${t.clusterName} refused the local-account credential from listClusterUserCredential: ` +
          `check that local accounts are still enabled, or enable Entra ID integration and give ${who} the "Azure Kubernetes Service Cluster User Role" (${assign('Azure Kubernetes Service Cluster User Role')})`
        );
      case 'azure-rbac':
        return (
          `${who} is not authorised in AKS cluster ${t.clusterName} (Azure RBAC): assign it "Azure Kubernetes Service RBAC Reader" ` +
          `(${assign('Azure Kubernetes Service RBAC Reader')}) and the "Azure Kubernetes Service Cluster User Role"`
        );
      default:
        return (
          `${who} is not authorised in AKS cluster ${t.clusterName}: assign it the "Azure Kubernetes Service Cluster User Role" ` +
          `(${assign('Azure Kubernetes Service Cluster User Role')}) and, with Azure RBAC, "Azure Kubernetes Service RBAC Reader"; ` +
          `with Kubernetes RBAC, bind its object id with a ClusterRoleBinding (${rbacFix})`
        );
    }
  },
  // AKS identities bind by object id.
  rbacSubject: (t) => ({subject: `--user=${t.principal ?? '<object id>'}`, note: ''}),
};
