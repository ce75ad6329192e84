/** Label selectors (`env=prod,team=a`): of `/v1/clusters?labels=`, `/v1/watch`, the CLI and allow-list entries. */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {InputError} from '../core/errors.ts';
import {isValidLabelKey} from '../discovery/labels.ts';

/**
 * Parses `env=prod,team=a` into pairs; `env==prod` is the same pair, as in Kubernetes. An item
 * without `=`, or whose key no label can have (`env!=prod` reads as the key `env!`), is a usage
 * error: taken as written it would match nothing, and a reader would be told every cluster is gone.
 */
export function parseLabelSelector(text: string | null): [string, string][] {
  if (!text) return [];
  return text.split(',').filter((p) => p.trim() !== '').map((pair) => {
    const i = pair.indexOf('=');
    const key = pair.slice(0, Math.max(i, 0)).trim();
    if (i <= 0 || !isValidLabelKey(key)) {
      throw new InputError(`labels: expected key=value pairs separated by commas (only equality: = or ==), found ${JSON.stringify(pair)}`);
    }
    const value = pair[i + 1] === '=' ? pair.slice(i + 2) : pair.slice(i + 1);
    return [key, value.trim()];
  });
}

/** Whether a kube_server has every selected label (cluster labels, server labels or dynamic label results). */
export function matchesSelector(server: KubeServer, selector: readonly [string, string][]): boolean {
  const cluster = server.spec.cluster;
  return selector.every(([k, v]) => {
    const value = cluster.metadata.labels[k] ?? server.metadata.labels?.[k] ?? cluster.spec.dynamic_labels?.[k]?.result;
    return value === v;
  });
}
