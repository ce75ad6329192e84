/**
 * The operator-facing text of a probe result: each message says what is wrong and what to
 * run to fix it, tailored to the cloud and the cluster's authentication mode. Messages name
 * identities and clusters, never a token.
 */
import type {CloudName} from '../core/types.ts';

/** What the messages need to know about the probed cluster. */
export interface MessageTarget {
  /** The cluster's name in its cloud (what `aws eks` / `az aks` take). */
  readonly clusterName: string;
  readonly cloud: CloudName;
  /** EKS: API, API_AND_CONFIG_MAP or CONFIG_MAP. AKS: azure-rbac, kubernetes-rbac or local-accounts. */
  readonly authMode?: string;
  /** The identity the probe authenticated as (IAM role/user ARN, Entra object or client id). */
  readonly principal?: string;
  /** Region of the cluster, added to the suggested commands when known. */
  readonly region?: string;
}

/** Kubernetes group the suggested access entry / aws-auth mapping puts the identity in. */
export const DISCOVERY_GROUP = 'kube-discovery';
/** Name of the suggested ClusterRole and ClusterRoleBinding. */
export const DISCOVERY_CLUSTER_ROLE = 'kube-discovery';
/** What a Teleport-style kube agent must be allowed to impersonate. */
export const IMPERSONATED_RESOURCES = ['users', 'groups', 'serviceaccounts'] as const;

const UNKNOWN_AWS_PRINCIPAL = '<principal ARN>';

/** The cluster API could not be reached at all. */
export function unreachableMessage(t: MessageTarget, endpoint: string, detail: string): string {
  const network =
    t.cloud === 'AWS'
      ? 'if the endpoint is private, run the service in (or peered with) the cluster VPC and allow it in the cluster security group on 443; if public, check the cluster\'s public access CIDRs'
      : 'if the cluster is private, run the service in a network that can resolve and reach its private endpoint; if public, check the authorized IP ranges';
  return `cannot reach the API of cluster ${t.clusterName} at ${endpoint}: ${detail}; ${network}`;
}

/** TLS verification failed; `detail` is Node's reason. */
export function tlsMessage(t: MessageTarget, endpoint: string, detail: string): string {
  return (
    `the API server of cluster ${t.clusterName} at ${endpoint} failed TLS verification (${detail}): ` +
    `the cluster CA reported by the ${t.cloud === 'AWS' ? 'EKS' : 'AKS'} API does not verify the server certificate; ` +
    'check that the endpoint is the cluster\'s own (no TLS-intercepting proxy in between) and that its CA was not just rotated'
  );
}

/** The API refused our token (HTTP 401). */
export function unauthorizedMessage(t: MessageTarget): string {
  return t.cloud === 'AWS' ? eksUnauthorized(t) : aksUnauthorized(t);
}

/** The identity authenticated but may not do what discovery needs (HTTP 403, or impersonation denied). */
export function forbiddenMessage(t: MessageTarget, missing: string, apiMessage?: string): string {
  const who = t.principal ? `the identity ${t.principal}` : 'the discovery identity';
  const said = apiMessage ? ` (API server: ${apiMessage})` : '';
  return `${who} is authenticated in cluster ${t.clusterName} but lacks ${missing}${said}; grant it: ${rbacFix(t)}`;
}

/** Minting a token failed before any request was sent. */
export function noCredentialsMessage(t: MessageTarget, detail: string): string {
  const hint =
    t.cloud === 'AWS'
      ? 'check the service\'s AWS credentials and, for a matcher with assume_role_arn, that the role trusts them (and the external_id matches)'
      : 'check the service\'s Azure identity (workload identity, managed identity or environment credentials)';
  return `cannot get a token for cluster ${t.clusterName}: ${detail}; ${hint}`;
}

/** The cloud reported no endpoint or CA. */
export function noEndpointMessage(t: MessageTarget, missing: string): string {
  return `the ${t.cloud === 'AWS' ? 'EKS' : 'AKS'} API reported no ${missing} for cluster ${t.clusterName} (still creating, or a private-only cluster); it is probed once it does`;
}

/** The API server answered, but not as a Kubernetes API should. */
export function apiErrorMessage(t: MessageTarget, endpoint: string, detail: string): string {
  return `the API server of cluster ${t.clusterName} at ${endpoint} answered unexpectedly: ${detail}`;
}

/** Everything discovery needs is allowed. */
export function healthyMessage(t: MessageTarget, gitVersion: string | undefined): string {
  const version = gitVersion ? ` (Kubernetes ${gitVersion})` : '';
  return `cluster ${t.clusterName} is reachable${version}; ${t.principal ?? 'the discovery identity'} may impersonate ${IMPERSONATED_RESOURCES.join(', ')}`;
}

function eksUnauthorized(t: MessageTarget): string {
  const principal = t.principal ?? UNKNOWN_AWS_PRINCIPAL;
  const who = t.principal ? `the identity ${t.principal}` : 'the discovery identity (`aws sts get-caller-identity` with the service\'s credentials shows its ARN)';
  const region = t.region ? ` --region ${t.region}` : '';
  const accessEntry = `\`aws eks create-access-entry --cluster-name ${t.clusterName} --principal-arn ${principal} --kubernetes-groups ${DISCOVERY_GROUP}${region}\``;
  const isUser = /:user\//.test(principal);
  const awsAuth =
    `an aws-auth ${isUser ? 'mapUsers' : 'mapRoles'} entry ` +
    `(\`${isUser ? 'userarn' : 'rolearn'}: ${principal}, username: ${DISCOVERY_GROUP}, groups: [${DISCOVERY_GROUP}]\`; ` +
    `or \`eksctl create iamidentitymapping --cluster ${t.clusterName}${region} --arn ${principal} --username ${DISCOVERY_GROUP} --group ${DISCOVERY_GROUP}\`)`;
  const base = `${who} is not mapped in EKS cluster ${t.clusterName}`;
  switch (t.authMode) {
    case 'API':
      return `${base} (authentication mode API): add an access entry ${accessEntry}`;
    case 'CONFIG_MAP':
      return (
        `${base} (authentication mode CONFIG_MAP, so access entries are not read): add ${awsAuth} to the aws-auth ConfigMap in kube-system, ` +
        `or switch the cluster to API_AND_CONFIG_MAP and add an access entry ${accessEntry}`
      );
    default: {
      const mode = t.authMode ? ` (authentication mode ${t.authMode})` : '';
      return `${base}${mode}: add an access entry ${accessEntry} or, for CONFIG_MAP auth mode, ${awsAuth}`;
    }
  }
}

type AksMode = 'azure-rbac' | 'kubernetes-rbac' | 'local-accounts' | 'unknown';

/** Reads the AKS flavour loosely: `azure-rbac`, `AzureRBAC`, `aad-kubernetes-rbac`, `local` ... */
function aksMode(authMode: string | undefined): AksMode {
  const m = (authMode ?? '').toLowerCase().replace(/[^a-z]/g, '');
  if (m.includes('azurerbac')) return 'azure-rbac';
  if (m.includes('local')) return 'local-accounts';
  if (m.includes('kubernetes') || m.includes('aad') || m.includes('entra')) return 'kubernetes-rbac';
  return 'unknown';
}

function aksUnauthorized(t: MessageTarget): string {
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
        `with Kubernetes RBAC, bind its object id with a ClusterRoleBinding (${rbacFix(t)})`
      );
  }
}

/** The ClusterRole and binding that grant impersonation, as kubectl commands. */
function rbacFix(t: MessageTarget): string {
  const role =
    `\`kubectl create clusterrole ${DISCOVERY_CLUSTER_ROLE} --verb=impersonate --resource=${IMPERSONATED_RESOURCES.join(',')}\``;
  // EKS access entries and aws-auth put the identity in a group; AKS identities bind by object id.
  const subject = t.cloud === 'AWS' ? `--group=${DISCOVERY_GROUP}` : `--user=${t.principal ?? '<object id>'}`;
  const binding = `\`kubectl create clusterrolebinding ${DISCOVERY_CLUSTER_ROLE} --clusterrole=${DISCOVERY_CLUSTER_ROLE} ${subject}\``;
  const mapped = t.cloud === 'AWS' ? ` (bound to the group ${DISCOVERY_GROUP} that the suggested access entry or aws-auth mapping gives the identity)` : '';
  return `a ClusterRole allowing impersonate on ${IMPERSONATED_RESOURCES.join(', ')} and a ClusterRoleBinding to it${mapped}: ${role} and ${binding}`;
}
