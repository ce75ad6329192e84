/** Stored `status` documents of kube_servers, for tests of the functions that rewrite them. */
import type {KubeServer} from '../../heartbeats/kube-server.ts';

/** A kube_server's status. */
export type KubeServerStatus = NonNullable<KubeServer['status']>;

/**
 * The status a cycle stores for a reachable EKS cluster `a` in us-east-1 before its first probe,
 * with `extra` fields after the usual ones (key order is part of what some tests compare).
 */
export function unprobedEksStatus(extra: Partial<KubeServerStatus> = {}): KubeServerStatus {
  return {
    target_health: {status: 'unknown', reason: 'not_probed', message: 'not probed yet'},
    endpoint: 'https://a.example',
    ca_data: 'Y2E=',
    auth_mode: 'API',
    access: {kind: 'eks', cluster_name: 'a', region: 'us-east-1'},
    ...extra,
  };
}
