/**
 * Adversarial: etcd is down for longer than the TTL of the writing replica's lease, then comes back.
 * etcd renews every lease by its full TTL when it starts (its lessor counts from the restart), so the
 * lease and its entries are alive; the replica's keepalives failed meanwhile, so the expiry it last
 * recorded for its own lease has passed. Its own listing (the inventory's re-list once the registry
 * answers again, a cycle's read) must still have the entries — not drop them as "known expired",
 * which told every /v1/watch reader `delete` and served an empty /v1/kube_servers although etcd
 * held every cluster, until the next keepalive.
 */
import {Etcd3} from 'etcd3';
import {expect, it} from 'vitest';
import {kubeServerKey, kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const GROUP = 'restart';
const TTL = 60_000;
const PREFIX = '/restart-renewed/';

function doc(name: string): string {
  return JSON.stringify({
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, expires: new Date(Date.now() + TTL).toISOString()},
    spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}},
  });
}

describeOnEtcd('etcd restarted after being down longer than the lease TTL', (etcd) => {
  it('the writing replica keeps serving the entries etcd renewed with their lease', async () => {
    // The replica's clock: it moves by the time etcd was away (etcd's own restart renews leases
    // whatever the time it was down, so the real seconds the test takes do not matter).
    const clock = new FakeClock(Date.now());
    const backend = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: PREFIX, requestTimeoutMs: 2_000, clock});
    const inventory = new Inventory({backend, group: GROUP, clock, resyncMs: 3_600_000});
    const plain = new Etcd3({hosts: [etcd.endpoint]});
    try {
      const lease = await backend.grantLease(TTL);
      for (const name of ['a', 'b']) await backend.put(kubeServerKey(GROUP, name), doc(name), {lease});
      await inventory.start();
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      const deletes: string[] = [];
      inventory.subscribe((event) => {
        if (event.type === 'delete') deletes.push(event.name);
      });

      etcd.kill();
      // The heartbeat's keepalives fail while etcd is away ...
      await expect(backend.keepAlive(lease)).rejects.toThrow();
      await clock.advance(2 * TTL);
      await etcd.restart();

      // ... yet etcd holds the lease and both entries, as any other client sees.
      const ttl = Number((await plain.leaseClient.leaseTimeToLive({ID: lease.id})).TTL);
      expect(ttl).toBeGreaterThan(0);
      expect(await plain.getAll().prefix(`${PREFIX}${kubeServerPrefix(GROUP)}`).keys()).toHaveLength(2);

      // The replica's own listing, and the inventory re-listing once the registry answers again.
      expect((await backend.list(kubeServerPrefix(GROUP))).map((item) => item.key)).toEqual([kubeServerKey(GROUP, 'a'), kubeServerKey(GROUP, 'b')]);
      await inventory.resync();
      expect(deletes).toEqual([]);
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      // The next keepalive finds the lease alive: nothing was lost.
      await backend.keepAlive(lease);
      await backend.revokeLease(lease);
    } finally {
      plain.close();
      await inventory.stop();
      await backend.close();
    }
  }, 60_000);
});
