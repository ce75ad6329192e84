/** Teleport's label names, in a leaf module: the core and every cloud module (src/clouds/<cloud>/cloud.ts) read them. */

/** Label names, built once so producers and readers never disagree on spelling. */
export const LABEL = {
  origin: 'teleport.dev/origin',
  cloud: 'teleport.dev/cloud',
  discoveryType: 'teleport.dev/discovery-type',
  region: 'region',
  accountId: 'account-id',
  subscriptionId: 'subscription-id',
  resourceGroup: 'resource-group',
  discoveryGroup: 'teleport.internal/discovery-group-name',
  discoveredName: 'teleport.internal/discovered-name',
  /** Tag that overrides the registered name (EKS and AKS). */
  nameOverride: 'TeleportKubernetesName',
  /** Teleport's original EKS override tag, still honoured for EKS. */
  legacyNameOverride: 'teleport.dev/kubernetes-name',
} as const;
