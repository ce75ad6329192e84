/**
 * Adversarial: `heartbeat.ttl` changed between two runs (10m → 1h, say, or the 1m of a test
 * deployment raised). On start the heartbeat finds its previous run's lease but, its TTL being
 * another, neither resumes it nor keeps it alive: the entries on it live only as long as that
 * lease has left, and are re-put on the new lease only when something announces them. Here
 * nothing does for two old TTLs (the service re-announces the group when a term begins, so there
 * this takes a term that cannot write: etcd-nospace-ttl-change.test.ts): every entry expired, the
 * registry deleted them and readers saw them gone. With the TTL unchanged the lease is resumed and
 * kept alive, and nothing expires.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {eksDraft} from '../helpers/eks-draft.ts';

const GROUP = 'mgmt';
const OLD_TTL = 60_000;
const NEW_TTL = 600_000;

const backends = {
  memory: (clock: FakeClock): Promise<RegistryBackend> => Promise.resolve(new MemoryBackend({clock, purgeIntervalMs: 5_000})),
  sqlite: (clock: FakeClock): Promise<RegistryBackend> => SqliteBackend.open({path: ':memory:', clock, purgeIntervalMs: 5_000}),
};

describe.each(Object.keys(backends) as (keyof typeof backends)[])('a restart with another heartbeat.ttl on %s', (kind) => {
  let clock: FakeClock;
  let store: RegistryBackend;
  let inventory: Inventory;
  const deleted: string[] = [];
  const heartbeats: Heartbeat[] = [];

  function heartbeat(ttlMs: number): Heartbeat {
    const hb = new Heartbeat({backend: store, clock, group: GROUP, ttlMs, hostId: 'host-a', hostname: 'discovery-0', version: '0.1.0', retry: {attempts: 2, baseMs: 10}});
    heartbeats.push(hb);
    return hb;
  }

  beforeEach(async () => {
    clock = new FakeClock();
    store = await backends[kind](clock);
    inventory = new Inventory({backend: store, group: GROUP, clock, resyncMs: 10 * NEW_TTL});
    await inventory.start();
    deleted.length = 0;
    await store.watch(`kube_servers/${GROUP}/`, (event) => {
      if (event.type === 'delete') deleted.push(event.key);
    });
  });

  afterEach(async () => {
    for (const hb of heartbeats.splice(0)) await hb.stop({deregister: false});
    await inventory.stop();
    await store.close();
  });

  for (const ttl of [OLD_TTL, NEW_TTL]) {
    it(`keeps the previous run's entries while the first cycle runs longer than the old TTL (new TTL ${ttl / 1000} s)`, async () => {
      const previous = heartbeat(OLD_TTL);
      await previous.start();
      for (const name of ['a', 'b']) await previous.announce(eksDraft(name));
      await previous.stop({deregister: false});

      // The new run starts; its first cycle is still listing (nothing announced yet) two old TTLs later.
      const hb = heartbeat(ttl);
      await hb.start();
      for (let t = 0; t < 2 * OLD_TTL; t += 5_000) await clock.advance(5_000);

      expect((await store.list(`kube_servers/${GROUP}/`)).map((i) => i.key).sort()).toEqual([`kube_servers/${GROUP}/a`, `kube_servers/${GROUP}/b`]);
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      expect(deleted).toEqual([]);

      // The first cycle then announces them: they live on the new run's lease from then on.
      for (const name of ['a', 'b']) await hb.announce(eksDraft(name));
      for (let t = 0; t < 2 * OLD_TTL; t += 5_000) await clock.advance(5_000);
      expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b']);
      expect(deleted).toEqual([]);
      expect((await store.list(`kube_servers/${GROUP}/`)).map((i) => i.lease)).toEqual([hb.lease?.id, hb.lease?.id]);
    });
  }
});
