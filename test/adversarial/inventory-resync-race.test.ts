/**
 * Adversarial: the inventory re-lists the registry every 30 s while the backend's watch keeps
 * delivering writes. A listing answers with the registry as it was when it was read; a write the
 * watch delivers while that answer is on its way (a cycle registering clusters; on etcd the list
 * is a round trip) is newer than the listing. Replacing the view with the listing then dropped a
 * cluster just registered — `/v1/kube_servers` lost it and `/v1/watch` clients were sent a
 * `delete` for a cluster nobody deleted — and brought back one just deregistered.
 */
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {Inventory, type InventoryEvent} from '../../src/inventory/inventory.ts';
import type {RegistryBackend, RegistryItem} from '../../src/registry/backend.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';

const ACCOUNT = '111111111111';
const name = (cluster: string): string => `${cluster}-eks-us-east-1-${ACCOUNT}`;

/**
 * The real backend, whose listings are read at once but answered only when the test says so: the
 * time a listing's answer spends on its way (a network round trip, a busy disk).
 */
function slowListings(backend: RegistryBackend): {backend: RegistryBackend; hold(): void; release(): void} {
  let gate: {promise: Promise<void>; open: () => void} | undefined;
  const delayed = (read: Promise<RegistryItem[]>): Promise<RegistryItem[]> => {
    const waiting = gate?.promise;
    return waiting ? read.then(async (items) => (await waiting, items)) : read;
  };
  const view = new Proxy(backend, {
    get(target, key) {
      if (key === 'list') return (prefix: string) => delayed(target.list(prefix));
      if (key === 'listMeta' && target.listMeta) return (prefix: string) => delayed((target.listMeta as (p: string) => Promise<RegistryItem[]>).call(target, prefix));
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    backend: view,
    hold() {
      let open = (): void => undefined;
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = {promise, open};
    },
    release() {
      gate?.open();
      gate = undefined;
    },
  };
}

/** Waits (bounded) until `check` holds: the etcd watch delivers writes asynchronously. */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`expected ${what} within 5 s`);
}

/** The scenarios, against one kind of registry backend. */
function scenarios(open: () => Promise<RegistryBackend>): void {
  let backend: RegistryBackend;
  let heartbeat: Heartbeat;
  let inventory: Inventory | undefined;

  beforeEach(async () => {
    backend = await open();
    heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
  });

  afterEach(async () => {
    await inventory?.stop();
    inventory = undefined;
    await heartbeat.stop({deregister: false});
    await backend.close();
  });

  /** Announces clusters as a cycle would (tags per cluster name). */
  async function announce(clusters: Record<string, Record<string, string>>): Promise<void> {
    const found = Object.entries(clusters).map(([cluster, tags]) => eksCluster(cluster, 'us-east-1', ACCOUNT, {tags}));
    for (const c of evaluate([okResult('us-east-1', ACCOUNT, found)], context('g1')).candidates.values()) await heartbeat.announce(c.server);
  }

  async function startInventory(view: RegistryBackend): Promise<{inventory: Inventory; events: InventoryEvent[]}> {
    const started = new Inventory({backend: view, group: 'g1', clock: systemClock, resyncMs: 3_600_000});
    inventory = started;
    await started.start();
    const events: InventoryEvent[] = [];
    started.subscribe((e) => events.push(e));
    return {inventory: started, events};
  }

  it('a cluster registered meanwhile stays in the inventory, and no watcher is told it was deleted', async () => {
    await announce({old: {env: 'prod'}});
    const slow = slowListings(backend);
    const {inventory, events} = await startInventory(slow.backend);
    await until(() => inventory.get(name('old')) !== undefined, 'the first entry in the inventory');

    slow.hold();
    const resync = inventory.resync();
    await announce({fresh: {env: 'prod'}});
    await until(() => inventory.get(name('fresh')) !== undefined, 'the watch to deliver the new entry');
    slow.release();
    await resync;

    expect(inventory.get(name('fresh')), 'the cluster registered during the re-list left the inventory').toBeDefined();
    expect(events.filter((e) => e.type === 'delete').map((e) => (e.type === 'delete' ? e.name : ''))).toEqual([]);
    expect(inventory.list().map((s) => s.metadata.name).sort()).toEqual([name('fresh'), name('old')]);
  });

  it('a cluster updated meanwhile keeps its new document (the listing\'s older one is not put back)', async () => {
    await announce({c: {env: 'prod'}});
    const slow = slowListings(backend);
    const {inventory} = await startInventory(slow.backend);
    await until(() => inventory.get(name('c')) !== undefined, 'the entry in the inventory');

    slow.hold();
    const resync = inventory.resync();
    await announce({c: {env: 'staging'}});
    await until(() => inventory.get(name('c'))?.spec.cluster.metadata.labels['env'] === 'staging', 'the watch to deliver the update');
    slow.release();
    await resync;

    expect(inventory.get(name('c'))?.spec.cluster.metadata.labels['env']).toBe('staging');
  });

  it('a cluster deregistered meanwhile is not brought back', async () => {
    await announce({gone: {env: 'prod'}, stays: {env: 'prod'}});
    const slow = slowListings(backend);
    const {inventory, events} = await startInventory(slow.backend);
    await until(() => inventory.get(name('gone')) !== undefined && inventory.get(name('stays')) !== undefined, 'both entries in the inventory');

    slow.hold();
    const resync = inventory.resync();
    await heartbeat.remove(name('gone'));
    await until(() => inventory.get(name('gone')) === undefined, 'the watch to deliver the delete');
    slow.release();
    await resync;

    expect(inventory.get(name('gone'))).toBeUndefined();
    expect(events.map((e) => e.type)).toEqual(['delete']);
  });
}

describe('a write the watch delivers while a re-list is answered (sqlite)', () => {
  let dir: string;
  let files = 0;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kd-resync-race-'));
  });
  afterAll(async () => {
    await rm(dir, {recursive: true, force: true});
  });
  scenarios(() => SqliteBackend.open({path: path.join(dir, `registry-${files++}.db`), clock: systemClock}));
});

describeWithEtcd('a write the watch delivers while a re-list is answered (etcd)', () => {
  let etcd: TestEtcd;
  let prefixes = 0;
  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterAll(async () => {
    await etcd?.stop();
  });
  scenarios(() => openEtcdBackend({endpoints: [etcd.endpoint], prefix: `/resync-race-${prefixes++}/`, requestTimeoutMs: 2_000}));
});
