/**
 * Adversarial: the wall clock of the replica that writes on etcd steps forward past the time left
 * on its lease (an NTP step, a clock set by hand). etcd keeps the lease alive on its own clock, and
 * the replica's keepalives go on as scheduled: every entry is alive. The replica's own listing (its
 * inventory's periodic re-list, a cycle's read of the registry) must still have them — not drop them
 * as "known expired" on an expiry it computed from the wall clock before the step, which told every
 * /v1/watch reader `delete` and served an empty /v1/kube_servers until the next keepalive.
 * The same step on SQLite, memory and Kubernetes: clock-step.test.ts, kube-clock-step.test.ts.
 */
import {expect, it} from 'vitest';
import {kubeServerKey, kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {SteppedClock} from '../helpers/stepped-clock.ts';

const GROUP = 'step';
const TTL = 60_000;

function doc(name: string): string {
  return JSON.stringify({
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, expires: new Date(Date.now() + TTL).toISOString()},
    spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}},
  });
}

describeOnEtcd('a forward step of the wall clock on etcd', (etcd) => {
  it('keeps serving the entries on the replica\'s own live lease', async () => {
    const clock = new SteppedClock();
    const backend = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/clock-step/', requestTimeoutMs: 2_000, clock});
    const inventory = new Inventory({backend, group: GROUP, clock, resyncMs: 3_600_000});
    try {
      const lease = await backend.grantLease(TTL);
      for (const name of ['a', 'b']) await backend.put(kubeServerKey(GROUP, name), doc(name), {lease});
      await inventory.start();
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      const deletes: string[] = [];
      inventory.subscribe((event) => {
        if (event.type === 'delete') deletes.push(event.name);
      });

      // Two TTLs ahead, in an instant: no time passed for etcd or for the lease.
      clock.offsetMs = 2 * TTL;
      await inventory.resync();
      expect(deletes).toEqual([]);
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      // What a cycle reads of the registry, too.
      expect((await backend.list(kubeServerPrefix(GROUP))).map((item) => item.key)).toEqual([kubeServerKey(GROUP, 'a'), kubeServerKey(GROUP, 'b')]);
      // The keepalives go on, on the stepped clock, and the entries stay.
      await backend.keepAlive(lease);
      await inventory.resync();
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      await backend.revokeLease(lease);
    } finally {
      await inventory.stop();
      await backend.close();
    }
  }, 60_000);
});
