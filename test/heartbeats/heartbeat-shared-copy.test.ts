// One copy of each document: a local registry hands the announced document to the inventory with
// its put event (no parsed copy), and a heartbeat given the inventory's stored copies (`stored`)
// keeps a reference to them instead of a document of its own — yet restores every entry after a lost lease.
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {RegistryBackend, RegistryItem} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey, type KubeServerDraft} from '../../heartbeats/kube-server.ts';

const TTL = 60_000;
const GROUP = 'mgmt';

function draft(name: string, env = 'prod'): KubeServerDraft {
  const labels = {env, 'teleport.dev/cloud': 'AWS'};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels},
    spec: {
      cluster: {
        kind: 'kube_cluster',
        version: 'v3',
        metadata: {name, description: 'EKS cluster', labels},
        spec: {aws: {region: 'us-east-1', account_id: '111111111111', name}},
      },
      proxy_ids: [],
    },
    status: {endpoint: 'https://example.eks.amazonaws.com', ca_data: 'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t'},
  };
}

/** The store, counting how many stored documents a reader of `list()` actually read. */
function countingReads(inner: RegistryBackend): {backend: RegistryBackend; reads: () => number} {
  let reads = 0;
  const withCountedValue = (item: RegistryItem): RegistryItem => {
    const {value, ...rest} = item;
    return Object.defineProperty({...rest} as RegistryItem, 'value', {enumerable: true, get: () => (reads++, value)});
  };
  const backend = new Proxy(inner, {
    get(target, prop: keyof RegistryBackend) {
      if (prop === 'list') return async (prefix: string) => (await target.list(prefix)).map(withCountedValue);
      const value = target[prop];
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {backend, reads: () => reads};
}

const backends = {
  memory: (clock: FakeClock): Promise<RegistryBackend> => Promise.resolve(new MemoryBackend({clock, purgeIntervalMs: 5_000})),
  sqlite: (clock: FakeClock): Promise<RegistryBackend> => SqliteBackend.open({path: ':memory:', clock, purgeIntervalMs: 5_000}),
};

describe.each(Object.keys(backends) as (keyof typeof backends)[])('Heartbeat and inventory on %s: one copy of each document', (kind) => {
  let clock: FakeClock;
  let store: RegistryBackend;
  let inventory: Inventory;
  const heartbeats: Heartbeat[] = [];

  function heartbeat(backend: RegistryBackend = store, hostId = 'host-a'): Heartbeat {
    const hb = new Heartbeat({
      backend,
      clock,
      group: GROUP,
      ttlMs: TTL,
      hostId,
      hostname: 'discovery-0',
      version: '0.1.0',
      retry: {attempts: 2, baseMs: 10},
      stored: (name, revision) => inventory.stored(name, revision),
    });
    heartbeats.push(hb);
    return hb;
  }

  beforeEach(async () => {
    clock = new FakeClock();
    store = await backends[kind](clock);
    inventory = new Inventory({backend: store, group: GROUP, clock, resyncMs: 10 * TTL});
    await inventory.start();
  });

  afterEach(async () => {
    for (const hb of heartbeats.splice(0)) await hb.stop({deregister: false});
    await inventory.stop();
    await store.close();
  });

  it('the inventory holds the announced document itself, and the heartbeat answers an unchanged announce with that copy', async () => {
    const hb = heartbeat();
    await hb.start();
    const written = draft('a');
    const first = await hb.announce(written);
    const held = inventory.get('a');
    // Not a parse of the stored text: the very objects announced.
    expect(held?.spec.cluster).toBe(written.spec.cluster);
    expect(held?.status).toBe(written.status);
    expect(held?.metadata.revision).toBe(first.metadata.revision);
    // The same content in new objects writes nothing and is answered with the one held copy.
    const again = await hb.announce(draft('a'));
    expect(again.metadata.revision).toBe(first.metadata.revision);
    expect(again.spec.cluster).toBe(held?.spec.cluster);
    expect(again.status).toBe(held?.status);
  });

  it('takes over the entries of a previous run from the inventory without reading their documents again', async () => {
    const previous = heartbeat(store, 'host-old');
    await previous.start();
    for (const name of ['a', 'b', 'c']) await previous.announce(draft(name));
    await previous.stop({deregister: false});
    const revisions = (await store.list(`kube_servers/${GROUP}/`)).map((i) => i.revision);

    const {backend, reads} = countingReads(store);
    const hb = heartbeat(backend, 'host-old');
    await hb.start();
    expect(reads()).toBe(0);
    // Its baseline is the shared copy: announcing the same documents writes nothing.
    for (const name of ['a', 'b', 'c']) await hb.announce(draft(name));
    expect((await store.list(`kube_servers/${GROUP}/`)).map((i) => i.revision)).toEqual(revisions);
  });

  it('a re-list after keepalives shows the later expiry and keeps the held copy instead of making another', async () => {
    const hb = heartbeat();
    await hb.start();
    const first = await hb.announce(draft('a'));
    const held = inventory.stored('a', first.metadata.revision);
    expect(held).toBeDefined();
    // Keepalives move the lease's expiry; the document is not rewritten.
    await clock.advance(TTL / 3);
    await clock.advance(TTL / 3);
    const [item] = await store.list(`kube_servers/${GROUP}/`);
    expect(item?.revision).toBe(first.metadata.revision);
    expect(item?.expires).toBeGreaterThan(Date.parse(first.metadata.expires));
    await inventory.resync();
    expect(inventory.stored('a', first.metadata.revision)).toBe(held);
    expect(inventory.get('a')?.metadata.expires).toBe(new Date(item?.expires ?? 0).toISOString());
    expect(inventory.list().map((s) => s.metadata.expires)).toEqual([new Date(item?.expires ?? 0).toISOString()]);
  });

  it('re-puts every entry after a lost lease although the inventory saw them deleted', async () => {
    const hb = heartbeat();
    await hb.start();
    await hb.announce(draft('a'));
    await hb.announce(draft('b', 'staging'));
    const lost = hb.lease;
    if (lost) await store.revokeLease(lost);
    expect(inventory.list()).toEqual([]);

    await clock.advance(TTL / 3);
    expect(inventory.list().map((s) => [s.metadata.name, s.spec.cluster.metadata.labels['env']])).toEqual([
      ['a', 'prod'],
      ['b', 'staging'],
    ]);
    const items = await store.list(`kube_servers/${GROUP}/`);
    expect(items.map((i) => i.key)).toEqual([kubeServerKey(GROUP, 'a'), kubeServerKey(GROUP, 'b')]);
    expect(items.every((i) => i.lease === hb.lease?.id && i.lease !== lost?.id)).toBe(true);
    // What was re-put is the document itself, without the old copy's registry fields.
    expect((JSON.parse(items[0]?.value ?? '{}') as {metadata: {revision?: string}}).metadata.revision).toBeUndefined();
  });
});
