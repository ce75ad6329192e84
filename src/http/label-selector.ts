/** Label selectors (`env=prod,team=a`): of `/v1/clusters?labels=`, `/v1/watch`, the CLI and allow-list entries. */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {InputError} from '../core/errors.ts';

/** Parses `env=prod,team=a` into pairs; an item without `=` is a usage error. */
export function parseLabelSelector(text: string | null): [string, string][] {
  if (!text) return [];
  return text.split(',').filter((p) => p.trim() !== '').map((pair) => {
    const i = pair.indexOf('=');
    if (i <= 0) throw new InputError(`labels: expected key=value pairs separated by commas, found ${JSON.stringify(pair)}`);
    return [pair.slice(0, i).trim(), pair.slice(i + 1).trim()];
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
