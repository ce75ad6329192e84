// What keeps the sqlite registry's memory bounded at 50,000 entries: a re-list that reads no
// documents when the reader holds them all, and write groups of at most MAX_PUT_BATCH puts.
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import type {RegistryBackend, WatchEvent} from '../../src/registry/backend.ts';
import {MAX_PUT_BATCH, SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const GROUP = 'bounded';
const TTL = 60_000;

function draft(name: string, env = 'prod'): KubeServerDraft {
  const labels = {env};
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: 'EKS cluster', labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name}}},
      proxy_ids: [],
    },
    status: {endpoint: 'https://example.eks.amazonaws.com'},
  };
}

describe('sqlite registry, bounded', () => {
  let clock: FakeClock;
  let store: SqliteBackend;

  beforeEach(async () => {
    clock = new FakeClock();
    store = await SqliteBackend.open({path: ':memory:', clock, purgeIntervalMs: 5_000});
  });
  afterEach(async () => {
    await store.close();
  });

  it('listMeta lists what list lists, without the documents, and leaves out expired entries', async () => {
    const lease = await store.grantLease(TTL);
    await store.put('kube_servers/g/a', '{"n":1}', {lease});
    await store.put('kube_servers/g/b', '{"n":2}');
    await store.put('kube_servers/h/c', '{"n":3}');
    const full = await store.list('kube_servers/g/');
    expect(await store.listMeta('kube_servers/g/')).toEqual(full.map((item) => ({...item, value: ''})));
    expect((await store.listMeta('')).map((i) => i.key)).toEqual(['kube_servers/g/a', 'kube_servers/g/b', 'kube_servers/h/c']);
    await clock.advance(TTL);
    expect((await store.listMeta('kube_servers/g/')).map((i) => i.key)).toEqual(['kube_servers/g/b']);
  });

  it(`commits a group as soon as it holds ${MAX_PUT_BATCH} puts, not every put of the turn at once`, async () => {
    const seen: WatchEvent[] = [];
    await store.watch('k/', (event) => seen.push(event));
    const writes = Array.from({length: MAX_PUT_BATCH + 44}, (_, i) => store.put(`k/${String(i).padStart(4, '0')}`, `{"i":${i}}`));
    // Still the same turn: the first full group is written and delivered, the rest waits for its own.
    expect(seen).toHaveLength(MAX_PUT_BATCH);
    const items = await Promise.all(writes);
    expect(seen).toHaveLength(MAX_PUT_BATCH + 44);
    expect(new Set(items.map((i) => i.revision)).size).toBe(MAX_PUT_BATCH + 44);
    expect(await store.list('k/')).toHaveLength(MAX_PUT_BATCH + 44);
  });

  it('gives the puts of a group consecutive revisions in order, none to a put on a lost lease, and goes on from there', async () => {
    const lease = await store.grantLease(TTL);
    const first = await store.put('r/first', '{}');
    const lost = {id: 'no-such-lease', ttlMs: TTL};
    const group = [store.put('r/a', '{}', {lease}), store.put('r/b', '{}', {lease: lost}), store.put('r/c', '{}'), store.put('r/d', '{}', {lease})];
    const outcomes = await Promise.allSettled(group);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    const revisions = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [Number(o.value.revision)] : []));
    const base = Number(first.revision);
    expect(revisions).toEqual([base + 1, base + 2, base + 3]);
    // Stored as answered, and the counter goes on after the group.
    expect((await store.get('r/d'))?.revision).toBe(String(base + 3));
    expect(await store.delete('r/a')).toBe(true);
    expect(Number((await store.put('r/e', '{}')).revision)).toBe(base + 5);
  });

  it("an inventory's re-list reads no document when it holds every revision, and reads them all when one changed", async () => {
    // The inventory reads through this view; its watch can be cut, so a write reaches it only by a re-list.
    let listed = 0;
    let metaListed = 0;
    let watching = true;
    const view = new Proxy(store, {
      get(target, prop: keyof SqliteBackend) {
        if (prop === 'list') return async (prefix: string) => (listed++, target.list(prefix));
        if (prop === 'listMeta') return async (prefix: string) => (metaListed++, target.listMeta(prefix));
        if (prop === 'watch')
          return (prefix: string, onEvent: (e: WatchEvent) => void) => target.watch(prefix, (e) => (watching ? onEvent(e) : undefined));
        const value = target[prop];
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as RegistryBackend;
    const inventory = new Inventory({backend: view, group: GROUP, clock, resyncMs: 10 * TTL});
    await inventory.start();
    const heartbeat = new Heartbeat({backend: store, clock, group: GROUP, ttlMs: TTL, hostId: 'h', hostname: 'n', version: 't', stored: (n, r) => inventory.stored(n, r)});
    await heartbeat.start();
    for (const name of ['a', 'b', 'c']) await heartbeat.announce(draft(name));
    listed = 0;

    await inventory.resync();
    expect([listed, metaListed]).toEqual([0, 1]);
    expect(inventory.list().map((s) => s.metadata.name)).toEqual(['a', 'b', 'c']);

    // A write the inventory did not see (its watch cut): the re-list notices the new revision and reads the documents.
    watching = false;
    await heartbeat.announce(draft('b', 'staging'));
    await store.delete(kubeServerKey(GROUP, 'c'));
    expect(inventory.get('b')?.spec.cluster.metadata.labels['env']).toBe('prod');
    await inventory.resync();
    expect(listed).toBe(1);
    expect(inventory.list().map((s) => [s.metadata.name, s.spec.cluster.metadata.labels['env']])).toEqual([
      ['a', 'prod'],
      ['b', 'staging'],
    ]);
    await heartbeat.stop({deregister: false});
    await inventory.stop();
  });
});

describe('a heartbeat replacing a lost lease', () => {
  it('re-puts its entries at most 64 at a time', async () => {
    const clock = new FakeClock();
    const store = await SqliteBackend.open({path: ':memory:', clock, purgeIntervalMs: 5_000});
    let inFlight = 0;
    let most = 0;
    const counting = new Proxy(store, {
      get(target, prop: keyof SqliteBackend) {
        if (prop === 'put')
          return async (...args: Parameters<SqliteBackend['put']>) => {
            inFlight++;
            most = Math.max(most, inFlight);
            try {
              return await target.put(...args);
            } finally {
              inFlight--;
            }
          };
        const value = target[prop];
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }) as RegistryBackend;
    const heartbeat = new Heartbeat({backend: counting, clock, group: GROUP, ttlMs: TTL, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    await Promise.all(Array.from({length: 300}, (_, i) => heartbeat.announce(draft(`c${i}`))));
    const lost = heartbeat.lease;
    if (lost) await store.revokeLease(lost);
    expect(await store.list(`kube_servers/${GROUP}/`)).toEqual([]);
    most = 0;
    // The next keepalive finds the lease gone, grants another and re-puts every entry.
    await clock.advance(TTL / 3);
    for (let i = 0; i < 50 && (await store.list(`kube_servers/${GROUP}/`)).length < 300; i++) await new Promise((r) => setImmediate(r));
    expect(await store.list(`kube_servers/${GROUP}/`)).toHaveLength(300);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(64);
    await heartbeat.stop({deregister: false});
    await store.close();
  });
});
