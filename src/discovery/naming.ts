/** Unique kube_server names across accounts, regions and subscriptions (design §5). */
import type {DiscoveredCluster} from '../core/types.ts';
import {LABEL} from './labels.ts';

/** Teleport's rule for kube cluster names: DNS-label-like, dots and underscores allowed. */
const KUBE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,252}$/;

/** Whether a name can be used as a kube_server name (and registry key part). */
export function isValidKubeName(name: string): boolean {
  return KUBE_NAME.test(name);
}

/**
 * `<name>-eks-<region>-<account>` or `<name>-aks-<region>-<resource-group>-<subscription>`;
 * a part the cloud name already contains is left out; the `TeleportKubernetesName` tag wins.
 */
export function kubeServerName(cluster: DiscoveredCluster): {name: string; overridden: boolean} {
  const override = cluster.tags[LABEL.nameOverride];
  if (override !== undefined && override !== '') return {name: override, overridden: true};
  const parts =
    cluster.cloud === 'AWS'
      ? [cluster.type, cluster.region, cluster.account]
      : [cluster.type, cluster.region, cluster.resourceGroup ?? '', cluster.account];
  const suffix = parts.filter((p) => p !== '' && !containsPart(cluster.name, p));
  return {name: [cluster.name, ...suffix].join('-'), overridden: false};
}

/** Whether `part` appears in `name` as a whole `-`/`_`/`.`-delimited piece (so `aks1` does not contain `aks`). */
function containsPart(name: string, part: string): boolean {
  const lower = name.toLowerCase();
  const p = part.toLowerCase();
  for (let i = lower.indexOf(p); i !== -1; i = lower.indexOf(p, i + 1)) {
    const before = i === 0 || '-_.'.includes(lower[i - 1] ?? '');
    const end = i + p.length;
    const after = end === lower.length || '-_.'.includes(lower[end] ?? '');
    if (before && after) return true;
  }
  return false;
}
