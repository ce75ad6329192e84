/** Label names (Teleport-compatible) and the conversion of cloud tags into kube_server labels. */
import {builtInClouds} from '../clouds/index.ts';
import type {Clouds} from '../clouds/cloud.ts';
import {LABEL} from '../core/label-names.ts';
import type {DiscoveredCluster} from '../core/types.ts';

/** Label names, built once so producers and readers never disagree on spelling (kept in a leaf module the cloud modules import too). */
export {LABEL};

/** Teleport's label key rule: letters, digits and `/ . _ : * -`. */
const LABEL_KEY = /^[a-zA-Z/.0-9_:*-]+$/;

/** Whether a tag key can be a label key. */
export function isValidLabelKey(key: string): boolean {
  return key.length > 0 && key.length <= 256 && LABEL_KEY.test(key);
}

/** Tag keys found valid (the same few recur on every cluster), bounded: cleared past 1,024. */
const validTagKeys = new Set<string>();

/** Whether `key` is a valid label key, remembering it when it is. */
function rememberValid(key: string): boolean {
  if (!isValidLabelKey(key)) return false;
  if (validTagKeys.size >= 1_024) validTagKeys.clear();
  validTagKeys.add(key);
  return true;
}

/**
 * Labels of a discovered cluster, the keys and values Teleport puts on its kube_cluster: valid
 * tags, then the derived labels (which win over a tag of the same key, as in Teleport). The
 * cloud name is recorded in `teleport.internal/discovered-name` only when `renamed` (a suffix
 * was appended), as Teleport does. Also returns the keys of tags that were dropped. Where the
 * cluster lives (account, subscription, resource group) is its cloud module's say.
 */
export function clusterLabels(cluster: DiscoveredCluster, discoveryGroup: string, renamed = true, clouds: Clouds = builtInClouds): {labels: Record<string, string>; dropped: string[]} {
  const labels: Record<string, string> = {};
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(cluster.tags)) {
    if (validTagKeys.has(key) || rememberValid(key)) labels[key] = value;
    else dropped.push(key);
  }
  labels[LABEL.origin] = 'cloud';
  labels[LABEL.cloud] = cluster.cloud;
  labels[LABEL.discoveryType] = cluster.type;
  labels[LABEL.region] = cluster.region;
  // Assigned one by one, as tags are, so a tag of the same key keeps its place and loses its value.
  for (const [key, value] of Object.entries(clouds.get(cluster.cloud).locationLabels(cluster))) labels[key] = value;
  labels[LABEL.discoveryGroup] = discoveryGroup;
  if (renamed) labels[LABEL.discoveredName] = cluster.name;
  return {labels, dropped};
}
