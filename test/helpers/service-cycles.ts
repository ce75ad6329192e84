/** Driving an in-process service from a test: one more cycle, and what it serves afterwards. */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {RunningService} from '../../src/service/service.ts';

/** Triggers a cycle and waits until it completed (subscribed first, so it cannot be missed). */
export async function runCycle(svc: Pick<RunningService, 'nextCycle' | 'trigger'>): Promise<void> {
  const done = svc.nextCycle();
  svc.trigger();
  await done;
}

/** The kube_servers the service serves over HTTP, by `keyOf` (e.g. the cloud's cluster name). */
export async function servedBy(svc: Pick<RunningService, 'url'>, keyOf: (server: KubeServer) => string): Promise<Record<string, KubeServer>> {
  const body = (await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: KubeServer[]};
  return Object.fromEntries(body.items.map((s) => [keyOf(s), s]));
}
