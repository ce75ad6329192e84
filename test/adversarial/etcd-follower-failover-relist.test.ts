/**
 * Adversarial: a follower replica on etcd re-lists while the leader fails over. The old leader
 * dies (its entries hang on its lease until that lapses), the new leader moves every entry onto its
 * own lease (a burst of puts), then the old lease lapses; meanwhile the follower's connection to
 * etcd flaps or is slow (a follower in another zone; thousands of entries).
 *
 * A listing is read at one revision, page after page, but the leases it finds were judged by
 * asking etcd afterwards, "now": a listing pinned before the take-over found the old lease gone and
 * left out every entry on it, although each had been moved onto the new leader's lease meanwhile.
 * The follower's watch normally covers those names (its put arrives before the listing ends), but
 * over a slow link etcd sends the small TimeToLive answer ahead of the watch's backlog of moves: the
 * follower dropped hundreds of clusters and told its /v1/watch clients they were deleted, while the
 * leader and the registry held every one (they came back as the backlog arrived).
 */
import net from 'node:net';
import {expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import type {KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {startTcpProxy} from '../helpers/tcp-proxy.ts';

/** A loopback proxy whose answers (etcd to client) trickle at `bytesPerSecond`, in order: a slow link to a remote etcd. */
async function startSlowLink(target: string, bytesPerSecond: number): Promise<{endpoint: string; close(): Promise<void>}> {
  const {hostname, port} = new URL(target);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({host: hostname, port: Number(port)});
    sockets.add(client).add(upstream);
    const queue: Buffer[] = [];
    const perTick = Math.max(1, Math.floor(bytesPerSecond / 100));
    const timer = setInterval(() => {
      let budget = perTick;
      while (budget > 0 && queue.length > 0) {
        const head = queue[0] as Buffer;
        const part = head.subarray(0, budget);
        client.write(part);
        budget -= part.length;
        if (part.length === head.length) queue.shift();
        else queue[0] = head.subarray(part.length);
      }
    }, 10);
    const drop = (): void => {
      clearInterval(timer);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => queue.push(chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as net.AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const GROUP = 'failover';
// More than one listing page (500 keys), so a listing spans several calls.
const CLUSTERS = 700;

function draft(i: number): KubeServerDraft {
  const name = `c${String(i).padStart(4, '0')}-eks-us-east-1-111111111111`;
  const labels = {'teleport.dev/cloud': 'AWS', region: 'us-east-1', 'account-id': '111111111111'};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: `EKS cluster c${i}`, labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name: `c${i}`}}},
      proxy_ids: [],
    },
  };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describeOnEtcd('a follower re-listing while the leader fails over', (etcd) => {
  it('keeps every cluster the new leader moved onto its lease, and tells no watcher one was deleted', async () => {
    const prefix = '/follower-failover/';
    const oldLeader = await openEtcdBackend({endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 2_000});
    const newLeader = await openEtcdBackend({endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 2_000});
    const proxy = await startTcpProxy(etcd.endpoint);
    const follower = await openEtcdBackend({endpoints: [proxy.endpoint], prefix, requestTimeoutMs: 2_000});
    // A short heartbeat TTL: the old leader's lease lapses a few seconds after the take-over.
    const identity = {clock: systemClock, group: GROUP, hostname: 'n', version: 't'};
    const first = new Heartbeat({...identity, backend: oldLeader, ttlMs: 12_000, hostId: 'old'});
    const second = new Heartbeat({...identity, backend: newLeader, ttlMs: 600_000, hostId: 'new'});
    const inventory = new Inventory({backend: follower, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
    const deleted: string[] = [];
    inventory.subscribe((event) => {
      if (event.type === 'delete') deleted.push(event.name);
    });
    let relisting = true;
    try {
      await first.start();
      const drafts = Array.from({length: CLUSTERS}, (_, i) => draft(i));
      for (let i = 0; i < drafts.length; i += 50) await Promise.all(drafts.slice(i, i + 50).map((d) => first.announce(d)));
      await inventory.start();
      expect(inventory.list()).toHaveLength(CLUSTERS);

      // The old leader dies: no more keepalives, its lease runs out on its own.
      await first.stop({deregister: false});
      const oldLease = first.lease?.id as string;

      // The follower re-lists over and over, its link cut now and then, while the take-over runs.
      const relists = (async () => {
        for (let round = 0; relisting; round++) {
          if (round % 7 === 3) {
            proxy.cut();
            proxy.restore();
          }
          await inventory.resync();
        }
      })();
      await second.start();
      for (let i = 0; i < drafts.length; i += 50) await Promise.all(drafts.slice(i, i + 50).map((d) => second.announce(d)));
      const newLease = second.lease?.id as string;
      // Keep re-listing until etcd no longer knows the old lease, and a little after.
      await until('the old leader\'s lease to lapse', async () => (await newLeader.resumeLease(oldLease)) === undefined);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      relisting = false;
      await relists;
      await inventory.resync();

      expect((await newLeader.list(`kube_servers/${GROUP}/`)).length, 'the registry holds every cluster on the new leader\'s lease').toBe(CLUSTERS);
      expect(deleted, 'clusters the follower told its watchers were deleted').toEqual([]);
      expect(inventory.list()).toHaveLength(CLUSTERS);
      expect(drafts.every((d) => inventory.storedOnLease(d.metadata.name, newLease) === true)).toBe(true);
    } finally {
      relisting = false;
      await inventory.stop();
      await second.stop({deregister: true}).catch(() => undefined);
      await first.stop({deregister: true}).catch(() => undefined);
      await follower.close();
      await newLeader.close();
      await oldLeader.close();
      await proxy.close();
    }
  }, 120_000);
  it('over a slow link, keeps the clusters a listing from before the take-over finds on the lapsed lease', async () => {
    const prefix = '/follower-failover-slow/';
    const oldLeader = await openEtcdBackend({endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 5_000});
    const newLeader = await openEtcdBackend({endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 5_000});
    const link = await startSlowLink(etcd.endpoint, 150_000);
    const follower = await openEtcdBackend({endpoints: [link.endpoint], prefix, requestTimeoutMs: 60_000});
    const identity = {clock: systemClock, group: GROUP, hostname: 'n', version: 't'};
    const first = new Heartbeat({...identity, backend: oldLeader, ttlMs: 600_000, hostId: 'old'});
    const second = new Heartbeat({...identity, backend: newLeader, ttlMs: 600_000, hostId: 'new'});
    const inventory = new Inventory({backend: follower, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
    const deleted: string[] = [];
    inventory.subscribe((event) => {
      if (event.type === 'delete') deleted.push(event.name);
    });
    try {
      await first.start();
      const drafts = Array.from({length: CLUSTERS}, (_, i) => draft(i));
      for (let i = 0; i < drafts.length; i += 50) await Promise.all(drafts.slice(i, i + 50).map((d) => first.announce(d)));
      await inventory.start();
      expect(inventory.list()).toHaveLength(CLUSTERS);
      await first.stop({deregister: false});
      const oldLease = first.lease;

      // The follower's periodic re-list starts; its answers take seconds over the slow link.
      const relist = inventory.resync();
      await second.start();
      for (let i = 0; i < drafts.length; i += 50) await Promise.all(drafts.slice(i, i + 50).map((d) => second.announce(d)));
      // Every entry is on the new leader's lease: the old one lapses (revoked here rather than waited for).
      if (oldLease) await oldLeader.revokeLease(oldLease);
      await relist;

      expect((await newLeader.list(`kube_servers/${GROUP}/`)).length, 'the registry holds every cluster').toBe(CLUSTERS);
      expect(deleted.length, 'clusters the follower told its watchers were deleted').toBe(0);
    } finally {
      await inventory.stop();
      await second.stop({deregister: true}).catch(() => undefined);
      await follower.close();
      await newLeader.close();
      await oldLeader.close();
      await link.close();
    }
  }, 180_000);
});
