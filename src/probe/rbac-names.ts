/** Names the probe's advice uses in every cloud's suggested commands; a leaf module, so the cloud modules can import it. */

/** Kubernetes group the suggested access entry / aws-auth mapping puts the identity in. */
export const DISCOVERY_GROUP = 'kube-discovery';
/** Name of the suggested ClusterRole and ClusterRoleBinding. */
export const DISCOVERY_CLUSTER_ROLE = 'kube-discovery';
/** What a Teleport-style kube agent must be allowed to impersonate. */
export const IMPERSONATED_RESOURCES = ['users', 'groups', 'serviceaccounts'] as const;
