import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {RegistryBackend, WatchEvent} from '../../src/registry/backend.ts';
import {FencedError} from '../../src/core/errors.ts';
import {fencedView} from '../../src/registry/fenced-view.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import type {HeartbeatFailureKind, HeartbeatOptions} from '../../heartbeats/heartbeat.ts';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {loadOrCreateHostId} from '../../heartbeats/host-id.ts';
import {kubeServerFromItem, kubeServerKey, type KubeServerDraft} from '../../heartbeats/kube-server.ts';

const TTL = 60_000;
const KEY = kubeServerKey('mgmt', 'prod-eks-us-east-1-111111111111');

function draft(labels: Record<string, string> = {env: 'prod', team: 'platform'}): KubeServerDraft {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name: 'prod-eks-us-east-1-111111111111', labels},
    spec: {
      cluster: {
        kind: 'kube_cluster',
        version: 'v3',
        metadata: {name: 'prod-eks-us-east-1-111111111111', description: 'EKS cluster prod', labels},
        spec: {aws: {region: 'us-east-1', account_id: '111111111111', name: 'prod'}},
      },
      proxy_ids: [],
    },
  };
}

/** The memory backend with injectable failures, standing in for a flaky store or a restarted one. */
function flaky(inner: RegistryBackend) {
  const faults = {put: 0, keepAlive: 0};
  const backend = new Proxy(inner, {
    get(target, prop: keyof RegistryBackend) {
      if (prop === 'put' && faults.put > 0) {
        return () => (faults.put--, Promise.reject(new Error('database is locked')));
      }
      if (prop === 'keepAlive' && faults.keepAlive > 0) {
        return () => (faults.keepAlive--, Promise.reject(new Error('connection reset')));
      }
      const value = target[prop];
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {backend, faults};
}

describe('Heartbeat', () => {
  let clock: FakeClock;
  let store: MemoryBackend;
  let failures: HeartbeatFailureKind[];
  let events: WatchEvent[];
  const heartbeats: Heartbeat[] = [];

  function heartbeat(overrides: Partial<HeartbeatOptions> = {}): Heartbeat {
    const hb = new Heartbeat({
      backend: store,
      clock,
      group: 'mgmt',
      ttlMs: TTL,
      hostId: 'host-a',
      hostname: 'discovery-0',
      version: '0.1.0',
      retry: {attempts: 3, baseMs: 100},
      onFailure: (kind) => failures.push(kind),
      ...overrides,
    });
    heartbeats.push(hb);
    return hb;
  }

  beforeEach(async () => {
    clock = new FakeClock();
    store = new MemoryBackend({clock, purgeIntervalMs: 5_000});
    failures = [];
    events = [];
    await store.watch('kube_servers/', (e) => events.push(e));
  });

  afterEach(async () => {
    for (const hb of heartbeats.splice(0)) await hb.stop({deregister: false});
    await store.close();
  });

  it('keeps an announced entry alive for 10× the TTL with keepalives only, no rewrites', async () => {
    const hb = heartbeat();
    await hb.start();
    const announced = await hb.announce(draft());
    expect(announced.spec).toMatchObject({host_id: 'host-a', hostname: 'discovery-0', version: '0.1.0'});
    expect(announced.metadata.revision).toBe((await store.get(KEY))?.revision);
    for (let t = 0; t < 10 * TTL; t += TTL / 6) {
      await clock.advance(TTL / 6);
      expect(await store.get(KEY), `at ${t + TTL / 6} ms`).toMatchObject({revision: announced.metadata.revision});
    }
    expect(events.filter((e) => e.type === 'delete')).toEqual([]);
    expect(failures).toEqual([]);
  });

  it('leaves entries to expire after the TTL when stopped without deregister', async () => {
    const hb = heartbeat();
    await hb.start();
    await hb.announce(draft());
    await clock.advance(TTL / 2);
    await hb.stop({deregister: false});
    await clock.advance(TTL / 3);
    expect(await store.get(KEY)).toBeDefined();
    await clock.advance(TTL);
    expect(await store.get(KEY)).toBeUndefined();
    expect(events.at(-1)).toMatchObject({type: 'delete', key: KEY});
  });

  it('deletes its entries at once when stopped with deregister', async () => {
    const hb = heartbeat();
    await hb.start();
    await hb.announce(draft());
    await hb.announce({...draft(), metadata: {name: 'other'}});
    await hb.stop({deregister: true});
    expect(await store.list('kube_servers/mgmt/')).toEqual([]);
    expect(await store.get('host_ids/x')).toBeUndefined();
  });

  it('does not write an unchanged announce, whatever the label order, but writes a change', async () => {
    const hb = heartbeat();
    await hb.start();
    const first = await hb.announce(draft({env: 'prod', team: 'platform'}));
    await clock.advance(TTL / 2);
    const again = await hb.announce(draft({team: 'platform', env: 'prod'}));
    expect(again.metadata.revision).toBe(first.metadata.revision);
    expect(events.filter((e) => e.type === 'put')).toHaveLength(1);

    const changed = await hb.announce(draft({env: 'prod', team: 'sre'}));
    expect(BigInt(changed.metadata.revision)).toBeGreaterThan(BigInt(first.metadata.revision));
    const stored = await store.get(KEY);
    expect(stored && kubeServerFromItem(stored).metadata.labels).toEqual({env: 'prod', team: 'sre'});
  });

  it('keeps the newer of two overlapping announces of a name when the older write is acknowledged last', async () => {
    // Writes are applied in the order they are issued; only the first one's answer is held back.
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let puts = 0;
    const slowFirstAnswer = new Proxy<RegistryBackend>(store, {
      get(target, prop: keyof RegistryBackend) {
        if (prop === 'put') {
          return async (...args: Parameters<RegistryBackend['put']>) => {
            const item = await target.put(...args);
            if (++puts === 1) await held;
            return item;
          };
        }
        const value = target[prop];
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const hb = heartbeat({backend: slowFirstAnswer});
    await hb.start();
    const older = hb.announce(draft({env: 'prod', team: 'a'}));
    const newer = await hb.announce(draft({env: 'prod', team: 'b'}));
    release();
    await older;
    expect(events.filter((e) => e.type === 'put')).toHaveLength(2);
    // The heartbeat knows the registry holds the newer document: announcing it again writes nothing,
    // announcing the older one again is a change.
    const again = await hb.announce(draft({env: 'prod', team: 'b'}));
    expect(again.metadata.revision).toBe(newer.metadata.revision);
    expect(events.filter((e) => e.type === 'put')).toHaveLength(2);
    await hb.announce(draft({env: 'prod', team: 'a'}));
    expect(events.filter((e) => e.type === 'put')).toHaveLength(3);
    const stored = await store.get(KEY);
    expect(stored && kubeServerFromItem(stored).metadata.labels).toEqual({env: 'prod', team: 'a'});
  });

  it('retries a failing write with backoff on the clock and counts each failure', async () => {
    const {backend, faults} = flaky(store);
    const hb = heartbeat({backend});
    await hb.start();
    faults.put = 2;
    let done = false;
    const announced = hb.announce(draft()).finally(() => (done = true));
    await clock.advance(99);
    expect(done).toBe(false);
    await clock.advance(1 + 200);
    expect((await announced).metadata.name).toBe('prod-eks-us-east-1-111111111111');
    expect(await store.get(KEY)).toBeDefined();
    expect(failures).toEqual(['announce', 'announce']);
  });

  it('gives up after the last attempt with an error naming the key, never the value', async () => {
    const {backend, faults} = flaky(store);
    const hb = heartbeat({backend});
    await hb.start();
    faults.put = 3;
    const settled = hb.announce(draft({secretish: 'do-not-print'})).then(
      () => new Error('expected the announce to fail'),
      (err: unknown) => err as Error,
    );
    await clock.advance(1_000);
    const err = await settled;
    expect(err.message).toContain(KEY);
    expect(err.message).toContain('database is locked');
    expect(err.message).not.toContain('do-not-print');
    expect(failures).toEqual(['announce', 'announce', 'announce']);
  });

  it('does not retry a write the fence refused, nor report it as a registry failure', async () => {
    // A leader that stepped down (a normal handover) has its writes refused by the fence. The store
    // is fine: retrying cannot help, and reporting it would log `registry_degraded` and raise
    // `kube_discovery_registry_degraded` on a replica whose registry works.
    let leading = true;
    let puts = 0;
    const view = fencedView(store, () => leading, 'the test leadership');
    const backend: RegistryBackend = {...view, put: (...args) => (puts++, view.put(...args))};
    const hb = heartbeat({backend});
    await hb.start();
    await hb.announce(draft());
    leading = false;
    puts = 0;
    const settled = hb.announce(draft({env: 'staging'})).then(() => undefined, (err: unknown) => err);
    await clock.advance(1_000);
    expect(await settled).toBeInstanceOf(FencedError);
    expect(puts).toBe(1);
    expect(failures).toEqual([]);
    expect((await store.get(KEY))?.value).toContain('"env":"prod"');
  });

  it('grants a new lease and re-announces everything when its lease is lost', async () => {
    const hb = heartbeat();
    await hb.start();
    await hb.announce(draft());
    await hb.announce({...draft(), metadata: {name: 'second'}});
    const lost = hb.lease;
    // The store forgets the lease (a restarted backend, an etcd lease that lapsed): entries vanish.
    if (lost) await store.revokeLease(lost);
    expect(await store.list('kube_servers/mgmt/')).toEqual([]);

    await clock.advance(TTL / 3);
    const items = await store.list('kube_servers/mgmt/');
    expect(items.map((i) => i.key)).toEqual([KEY, kubeServerKey('mgmt', 'second')]);
    expect(hb.lease?.id).not.toBe(lost?.id);
    expect(items.every((i) => i.lease === hb.lease?.id)).toBe(true);
    expect(failures).toContain('keepalive');
    await clock.advance(5 * TTL);
    expect(await store.list('kube_servers/mgmt/')).toHaveLength(2);
  });

  it('recovers when an announce finds the lease gone, restoring the other entries too', async () => {
    const hb = heartbeat();
    await hb.start();
    await hb.announce(draft());
    const lost = hb.lease;
    if (lost) await store.revokeLease(lost);
    const announced = hb.announce({...draft(), metadata: {name: 'new-cluster'}});
    await clock.advance(100);
    expect((await announced).metadata.name).toBe('new-cluster');
    const items = await store.list('kube_servers/mgmt/');
    expect(items.map((i) => i.key)).toEqual([kubeServerKey('mgmt', 'new-cluster'), KEY]);
    expect(items.every((i) => i.lease === hb.lease?.id && i.lease !== lost?.id)).toBe(true);
  });

  it('rides out a failed keepalive on the same lease when the next one succeeds', async () => {
    const {backend, faults} = flaky(store);
    const hb = heartbeat({backend});
    await hb.start();
    const lease = hb.lease;
    await hb.announce(draft());
    faults.keepAlive = 1;
    await clock.advance(3 * TTL);
    expect(await store.get(KEY)).toMatchObject({lease: lease?.id});
    expect(hb.lease).toBe(lease);
    expect(failures).toEqual(['keepalive']);
  });

  it('after a restart resumes its own lease and skips unchanged entries; a failover replica re-puts them', async () => {
    const first = heartbeat();
    await first.start();
    const announced = await first.announce(draft());
    await first.stop({deregister: false});

    await clock.advance(TTL / 2);
    const restarted = heartbeat();
    await restarted.start();
    expect(restarted.lease?.id).toBe(first.lease?.id);
    expect((await restarted.announce(draft())).metadata.revision).toBe(announced.metadata.revision);
    await restarted.stop({deregister: false});

    const failover = heartbeat({hostId: 'host-b', hostname: 'discovery-1'});
    await failover.start();
    const taken = await failover.announce(draft());
    expect(taken.spec.host_id).toBe('host-b');
    expect(await store.get(KEY)).toMatchObject({lease: failover.lease?.id, revision: taken.metadata.revision});
    // The old lease lapses; the entry lives on under the new replica's lease.
    await clock.advance(3 * TTL);
    expect(await store.get(KEY)).toBeDefined();
  });

  it('reports the live expiry to readers although keepalives never rewrite the document', async () => {
    const hb = heartbeat();
    await hb.start();
    await hb.announce(draft());
    await clock.advance(2 * TTL);
    const item = await store.get(KEY);
    expect(item && kubeServerFromItem(item).metadata.expires).toBe(new Date(item?.expires ?? 0).toISOString());
    expect(Date.parse(item ? kubeServerFromItem(item).metadata.expires : '')).toBeGreaterThan(clock.now());
  });
});

describe('loadOrCreateHostId', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kd-host-id-'));
  });
  afterEach(() => rmSync(dir, {recursive: true, force: true}));

  it('keeps the same id per replica across a reopen of the sqlite file', async () => {
    const clock = new FakeClock();
    const path = join(dir, 'registry.db');
    const first = await SqliteBackend.open({path, clock});
    const id = await loadOrCreateHostId(first, 'discovery-0');
    const other = await loadOrCreateHostId(first, 'discovery-1');
    await first.close();
    await clock.advance(100 * TTL);

    const second = await SqliteBackend.open({path, clock});
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(other).not.toBe(id);
    expect(await loadOrCreateHostId(second, 'discovery-0')).toBe(id);
    await second.close();
  });
});
