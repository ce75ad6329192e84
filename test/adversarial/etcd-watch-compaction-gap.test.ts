/**
 * Adversarial: a replica's etcd connection drops for a while (a network blip, an etcd member
 * restart) and etcd compacts its history meanwhile (`--auto-compaction-retention`, or an
 * operator's `etcdctl compact`). On reconnecting, the registry watch cannot resume where it
 * stopped: etcd cancels it, and the watch starts again from "now" (src/registry/etcd-watch.ts),
 * so the writes in between are never delivered. The inventory that follows the watch is not told
 * and keeps the view from before the gap until its next periodic re-list: a cluster the leader
 * registered meanwhile is missing from /v1/kube_servers and /v1/watch on that replica, although the
 * registry (and every listing) has it. The Kubernetes watch re-lists and diffs after `410 Gone`;
 * the etcd one does not. The heartbeat asks the same stale view which lease each entry hangs on
 * (`storedOnLease`): an entry another writer re-put on its own lease during the gap still looks like
 * ours, the next cycle writes nothing, and the entry leaves the registry with the other lease
 * although every listing still has the cluster (until a cycle after that re-creates it).
 */
import {expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import type {KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {compact, describeOnEtcd} from '../helpers/etcd.ts';
import {startTcpProxy} from '../helpers/tcp-proxy.ts';

const GROUP = 'gap';

function draft(cluster: string): KubeServerDraft {
  const name = `${cluster}-eks-us-east-1-111111111111`;
  const labels = {'teleport.dev/cloud': 'AWS', region: 'us-east-1', 'account-id': '111111111111'};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: `EKS cluster ${cluster}`, labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name: cluster}}},
      proxy_ids: [],
    },
  };
}

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describeOnEtcd('a replica whose etcd watch was restarted after a compaction', (etcd) => {
  it('serves the clusters registered while its watch was away, not the view from before the gap', async () => {
    const prefix = '/compaction-gap/';
    // The leader writes directly; the follower's registry client goes through a link the test can cut.
    const leader = await openEtcdBackend({endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 2_000});
    const proxy = await startTcpProxy(etcd.endpoint);
    const follower = await openEtcdBackend({endpoints: [proxy.endpoint], prefix, requestTimeoutMs: 2_000});
    const heartbeat = new Heartbeat({backend: leader, clock: systemClock, group: GROUP, ttlMs: 600_000, hostId: 'leader', hostname: 'n', version: 't'});
    // The follower's inventory as the service builds it (its re-list every 30 s by default; long here, so only the watch counts).
    const inventory = new Inventory({backend: follower, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
    try {
      await heartbeat.start();
      await heartbeat.announce(draft('first'));
      await inventory.start();
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['first-eks-us-east-1-111111111111']);

      proxy.cut();
      // While the follower is cut off the leader registers a new cluster, and etcd compacts its history.
      await heartbeat.announce(draft('joined'));
      const after = await leader.put('unrelated/marker', 'x');
      await compact(etcd.endpoint, after.revision);
      proxy.restore();

      // The watch comes back (from "now"): a later registration reaches the follower.
      await (async () => {
        for (let i = 0; i < 300 && inventory.get('later-eks-us-east-1-111111111111') === undefined; i++) {
          await heartbeat.announce({...draft('later'), metadata: {...draft('later').metadata, labels: {...draft('later').metadata.labels, n: String(i)}}});
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      await until('the restarted watch to deliver a later registration', () => inventory.get('later-eks-us-east-1-111111111111') !== undefined);

      expect((await leader.list(`kube_servers/${GROUP}/`)).map((i) => i.key.split('/').pop())).toContain('joined-eks-us-east-1-111111111111');
      // The re-list the gap calls for runs beside the restarted watch: wait for it, far short of the periodic one (an hour here).
      await until('the follower to list again after the gap', () => inventory.get('joined-eks-us-east-1-111111111111') !== undefined).catch(() => undefined);
      expect(
        inventory.list().map((s) => s.metadata.name),
        'the registry has the cluster registered during the gap, the follower does not serve it (until its next re-list)',
      ).toContain('joined-eks-us-east-1-111111111111');
    } finally {
      await inventory.stop();
      await heartbeat.stop({deregister: true}).catch(() => undefined);
      await follower.close();
      await leader.close();
      await proxy.close();
    }
  }, 60_000);

  it('moves an entry re-put on a foreign lease during the gap back onto its own lease, so it does not leave with that lease', async () => {
    const prefix = '/compaction-gap-lease/';
    // The service's registry client (heartbeat and inventory share it, as in the service) goes through a link the test can cut.
    const proxy = await startTcpProxy(etcd.endpoint);
    const service = await openEtcdBackend({endpoints: [proxy.endpoint], prefix, requestTimeoutMs: 2_000});
    const other = await openEtcdBackend({endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 2_000});
    const inventory = new Inventory({backend: service, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
    await inventory.start();
    // Wired as src/service/service.ts wires it: the inventory's copies and leases.
    const heartbeat = new Heartbeat({
      backend: service,
      clock: systemClock,
      group: GROUP,
      ttlMs: 600_000,
      hostId: 'h',
      hostname: 'n',
      version: 't',
      stored: (name, revision) => inventory.stored(name, revision),
      storedOnLease: (name, lease) => inventory.storedOnLease(name, lease),
    });
    const name = 'kept-eks-us-east-1-111111111111';
    const key = `kube_servers/${GROUP}/${name}`;
    try {
      await heartbeat.start();
      const ours = heartbeat.lease?.id as string;
      // A steady cycle announces the same draft every time (reconcile hands on the same object).
      const steady = draft('kept');
      await heartbeat.announce(steady);
      await until('the inventory to hold the entry on our lease', () => inventory.storedOnLease(name, ours) === true);

      proxy.cut();
      // Another writer (a second replica during a rollout, a restore) re-puts the same document on a lease of its own, and etcd compacts.
      const foreign = await other.grantLease(60_000);
      await other.put(key, (await other.get(key))?.value ?? '', {lease: foreign});
      await compact(etcd.endpoint, (await other.put('unrelated/marker', 'x')).revision);
      proxy.restore();
      // The restarted watch delivers what happens from now on.
      for (let i = 0; i < 300 && inventory.get('sentinel-eks-us-east-1-111111111111') === undefined; i++) {
        await other.put(`kube_servers/${GROUP}/sentinel-eks-us-east-1-111111111111`, JSON.stringify({...draft('sentinel'), metadata: {...draft('sentinel').metadata, labels: {n: String(i)}}}));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await until('the restarted watch to deliver a later write', () => inventory.get('sentinel-eks-us-east-1-111111111111') !== undefined);

      // The re-list the gap calls for runs beside the restarted watch: wait for it (the periodic one is an hour away here).
      await until('the inventory to see the entry on the other lease', () => inventory.storedOnLease(name, ours) === false).catch(() => undefined);
      // The next cycle: the cluster is still listed, unchanged.
      await heartbeat.announce(steady);
      await other.revokeLease(foreign);
      expect(await other.get(key), 'the entry left with the other writer\'s lease: the heartbeat trusted the inventory\'s view from before the gap').toBeDefined();
    } finally {
      await heartbeat.stop({deregister: true}).catch(() => undefined);
      await inventory.stop();
      await other.close();
      await service.close();
      await proxy.close();
    }
  }, 60_000);
});
