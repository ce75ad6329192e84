/**
 * The operator-facing text of a probe result: each message says what is wrong and what to
 * run to fix it, tailored to the cloud and the cluster's authentication mode (the cloud's part is
 * its module's `probe` advice, src/clouds/<cloud>/probe-advice.ts). Messages name identities and
 * clusters, never a token.
 */
import type {CloudProbeAdvice} from '../clouds/cloud.ts';
import {builtInClouds} from '../clouds/index.ts';
import type {CloudName} from '../core/types.ts';
import {DISCOVERY_CLUSTER_ROLE, IMPERSONATED_RESOURCES} from './rbac-names.ts';

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

/** Names used in the suggested commands. */
export {DISCOVERY_CLUSTER_ROLE, DISCOVERY_GROUP, IMPERSONATED_RESOURCES} from './rbac-names.ts';

function advice(t: MessageTarget): CloudProbeAdvice {
  return builtInClouds.get(t.cloud).probe;
}

/** The cluster API could not be reached at all. */
export function unreachableMessage(t: MessageTarget, endpoint: string, detail: string): string {
  return `cannot reach the API of cluster ${t.clusterName} at ${endpoint}: ${detail}; ${advice(t).networkHint}`;
}

/** TLS verification failed; `detail` is Node's reason. */
export function tlsMessage(t: MessageTarget, endpoint: string, detail: string): string {
  return (
    `the API server of cluster ${t.clusterName} at ${endpoint} failed TLS verification (${detail}): ` +
    `the cluster CA reported by the ${advice(t).apiName} API does not verify the server certificate; ` +
    'check that the endpoint is the cluster\'s own (no TLS-intercepting proxy in between) and that its CA was not just rotated'
  );
}

/** The API refused our token (HTTP 401). */
export function unauthorizedMessage(t: MessageTarget): string {
  return advice(t).unauthorized(t, rbacFix(t));
}

/** The identity authenticated but may not do what discovery needs (HTTP 403, or impersonation denied). */
export function forbiddenMessage(t: MessageTarget, missing: string, apiMessage?: string): string {
  const who = t.principal ? `the identity ${t.principal}` : 'the discovery identity';
  const said = apiMessage ? ` (API server: ${apiMessage})` : '';
  return `${who} is authenticated in cluster ${t.clusterName} but lacks ${missing}${said}; grant it: ${rbacFix(t)}`;
}

/** Minting a token failed before any request was sent. */
export function noCredentialsMessage(t: MessageTarget, detail: string): string {
  return `cannot get a token for cluster ${t.clusterName}: ${detail}; ${advice(t).credentialsHint}`;
}

/** The cloud reported no endpoint or CA. */
export function noEndpointMessage(t: MessageTarget, missing: string): string {
  return `the ${advice(t).apiName} API reported no ${missing} for cluster ${t.clusterName} (still creating, or a private-only cluster); it is probed once it does`;
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

/** The ClusterRole and binding that grant impersonation, as kubectl commands. */
function rbacFix(t: MessageTarget): string {
  const role =
    `\`kubectl create clusterrole ${DISCOVERY_CLUSTER_ROLE} --verb=impersonate --resource=${IMPERSONATED_RESOURCES.join(',')}\``;
  // Who the binding names is the cloud's say: a group EKS maps the identity into, an AKS object id.
  const {subject, note} = advice(t).rbacSubject(t);
  const binding = `\`kubectl create clusterrolebinding ${DISCOVERY_CLUSTER_ROLE} --clusterrole=${DISCOVERY_CLUSTER_ROLE} ${subject}\``;
  return `a ClusterRole allowing impersonate on ${IMPERSONATED_RESOURCES.join(', ')} and a ClusterRoleBinding to it${note}: ${role} and ${binding}`;
}
