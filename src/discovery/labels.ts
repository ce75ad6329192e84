/** Label names (Teleport-compatible) and the conversion of cloud tags into kube_server labels. */
import type {DiscoveredCluster} from '../core/types.ts';

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

/** Teleport's label key rule: letters, digits and `/ . _ : * -`. */
const LABEL_KEY = /^[a-zA-Z/.0-9_:*-]+$/;

/** Whether a tag key can be a label key. */
export function isValidLabelKey(key: string): boolean {
  return key.length > 0 && key.length <= 256 && LABEL_KEY.test(key);
}

/**
 * Labels of a discovered cluster, the keys and values Teleport puts on its kube_cluster: valid
 * tags, then the derived labels (which win over a tag of the same key, as in Teleport). The
 * cloud name is recorded in `teleport.internal/discovered-name` only when `renamed` (a suffix
 * was appended), as Teleport does. Also returns the keys of tags that were dropped.
 */
export function clusterLabels(cluster: DiscoveredCluster, discoveryGroup: string, renamed = true): {labels: Record<string, string>; dropped: string[]} {
  const labels: Record<string, string> = {};
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(cluster.tags)) {
    if (isValidLabelKey(key)) labels[key] = value;
    else dropped.push(key);
  }
  labels[LABEL.origin] = 'cloud';
  labels[LABEL.cloud] = cluster.cloud;
  labels[LABEL.discoveryType] = cluster.type;
  labels[LABEL.region] = cluster.region;
  if (cluster.cloud === 'AWS') {
    labels[LABEL.accountId] = cluster.account;
  } else {
    labels[LABEL.subscriptionId] = cluster.account;
    if (cluster.resourceGroup) labels[LABEL.resourceGroup] = cluster.resourceGroup;
  }
  labels[LABEL.discoveryGroup] = discoveryGroup;
  if (renamed) labels[LABEL.discoveredName] = cluster.name;
  return {labels, dropped};
}
