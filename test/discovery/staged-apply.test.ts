// A cycle decides and writes its listed clusters a bounded number at a time, and its report keeps
// the registered documents (the inventory's copies) instead of a second draft of each cluster —
// without changing what is created, kept, marked stale or deleted.
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {compileTagMatcher} from '../../matchers/index.ts';
import {builtInClouds} from '../../src/clouds/index.ts';
import type {DiscoveredCluster, SourceRef, SourceResult} from '../../src/core/types.ts';
import {runCycle, type CycleReport, type Registrar, type SourcePlanner} from '../../src/discovery/cycle.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const GROUP = 'staged';
const ACCOUNT = '111111111111';
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');

function source(region: string): SourceRef {
  return {id: `eks:${region}:${ACCOUNT}`, cloud: 'AWS', type: 'eks', region, account: ACCOUNT, matcherIndex: 0};
}

function cluster(region: string, name: string): DiscoveredCluster {
  return {
    cloud: 'AWS',
    type: 'eks',
    name,
    region,
    account: ACCOUNT,
    tags: {env: 'prod'},
    status: 'ACTIVE',
    statusOk: true,
    endpoint: `https://${name}.${region}.eks.amazonaws.com`,
    caData: CA,
    access: {kind: 'eks', clusterName: name, region},
    sourceId: source(region).id,
  };
}

type Listing = Record<string, readonly string[] | 'fails'>;

/** One planner whose sources answer as `listing` says: the cluster names of each region, or a failure. */
function planner(listing: () => Listing): SourcePlanner {
  return {
    plan: async () => ({
      failed: [],
      fetchers: Object.entries(listing()).map(([region, names]) => ({
        source: source(region),
        fetch: async (): Promise<SourceResult> =>
          names === 'fails'
            ? {source: source(region), ok: false, clusters: [], malformed: [], error: {reason: 'other', code: 'InternalFailure', message: 'boom', operation: 'ListClusters'}}
            : {source: source(region), ok: true, clusters: names.map((n) => cluster(region, n)), malformed: []},
      })),
    }),
  };
}

describe('a cycle applies its plan in bounded stages', () => {
  let clock: FakeClock;
  let backend: MemoryBackend;
  let inventory: Inventory;
  let heartbeat: Heartbeat;
  let registrar: Registrar;
  let listing: Listing;

  const cycle = (over: Registrar = registrar): Promise<CycleReport> =>
    runCycle({
      planners: [planner(() => listing)],
      registrar: over,
      clock,
      discoveryGroup: GROUP,
      evaluateContext: {staticLabels: {team: 'platform'}, clouds: builtInClouds},
      matcherFor: () => compileTagMatcher({'*': '*'}),
      sourceConcurrency: 4,
    });
  // Registered names carry Teleport's suffix (`a-eks-us-east-1-111111111111`); the tests speak of `a`.
  const short = (name: string): string => name.replace(/-eks-.*$/, '');
  const full = (name: string, region = 'us-east-1'): string => `${name}-eks-${region}-${ACCOUNT}`;
  const actions = (report: CycleReport): [string, string][] => report.items.map((i) => [short(i.name), i.action]);

  beforeEach(async () => {
    clock = new FakeClock();
    backend = new MemoryBackend({clock});
    inventory = new Inventory({backend, group: GROUP, clock, resyncMs: 3_600_000});
    await inventory.start();
    heartbeat = new Heartbeat({backend, clock, group: GROUP, ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't', stored: (name, revision) => inventory.stored(name, revision)});
    await heartbeat.start();
    registrar = createRegistrar(backend, heartbeat, GROUP);
  });

  afterEach(async () => {
    await heartbeat.stop({deregister: false});
    await inventory.stop();
    await backend.close();
  });

  it("keeps the registered documents in its report, not a second draft of each cluster", async () => {
    listing = {'us-east-1': ['a', 'b'], 'us-west-2': ['c']};
    const first = await cycle();
    expect(actions(first)).toEqual([['a', 'create'], ['b', 'create'], ['c', 'create']]);
    const second = await cycle();
    expect(actions(second)).toEqual([['a', 'unchanged'], ['b', 'unchanged'], ['c', 'unchanged']]);
    for (const report of [first, second]) {
      for (const item of report.items) {
        // The very objects the inventory holds: one copy of each document, however many cycles ran.
        expect(item.server?.spec.cluster).toBe(inventory.get(item.name)?.spec.cluster);
        expect(item.server?.status).toBe(inventory.get(item.name)?.status);
      }
    }
    // What a new entry remembers (its first registration) is there, and kept by later cycles.
    expect(inventory.get(full('a'))?.status?.discovered_at).toBe(new Date(first.startedAt).toISOString());
    expect(inventory.get(full('a'))?.spec.cluster.metadata.labels).toMatchObject({team: 'platform', env: 'prod'});
  });

  it('writes nothing over steady cycles of the same cluster objects, and still writes a change or a lost health', async () => {
    // The same objects every cycle, as a source that reuses its descriptions hands on: decisions are
    // reused then, and an unchanged one announces the registered entry itself.
    const clusters = {a: cluster('us-east-1', 'a'), b: cluster('us-east-1', 'b')};
    const steady: SourcePlanner = {
      plan: async () => ({
        failed: [],
        fetchers: [{source: source('us-east-1'), fetch: async (): Promise<SourceResult> => ({source: source('us-east-1'), ok: true, clusters: Object.values(clusters), malformed: []})}],
      }),
    };
    const puts: string[] = [];
    await backend.watch(`kube_servers/${GROUP}/`, (e) => {
      if (e.type === 'put') puts.push(e.item.key);
    });
    const run = (): Promise<CycleReport> =>
      runCycle({planners: [steady], registrar, clock, discoveryGroup: GROUP, evaluateContext: {staticLabels: {}, clouds: builtInClouds}, matcherFor: () => compileTagMatcher({'*': '*'}), sourceConcurrency: 2});
    await run();
    expect(puts).toHaveLength(2);
    for (let i = 0; i < 3; i++) {
      const report = await run();
      expect(actions(report)).toEqual([['a', 'unchanged'], ['b', 'unchanged']]);
      for (const item of report.items) expect(item.server?.status).toBe(inventory.get(item.name)?.status);
    }
    expect(puts).toHaveLength(2);

    // Someone else's write (a health the probe did not make, an older document) is decided afresh: kept health, nothing lost.
    const before = inventory.get(full('b'));
    if (!before) throw new Error('b is not registered');
    await registrar.announce({...before, status: {...before.status, target_health: {status: 'healthy', reason: 'ok', message: 'reachable'}}});
    expect(puts).toHaveLength(3);
    const afterProbe = await run();
    expect(actions(afterProbe)).toEqual([['a', 'unchanged'], ['b', 'unchanged']]);
    expect(puts).toHaveLength(3);
    expect(inventory.get(full('b'))?.status?.target_health).toEqual({status: 'healthy', reason: 'ok', message: 'reachable'});
    expect(inventory.get(full('b'))?.status?.discovered_at).toBe(before.status?.discovered_at);

    // A changed cluster (a new object) is written, the other one still not.
    clusters.a = {...cluster('us-east-1', 'a'), tags: {env: 'staging'}};
    const changed = await run();
    expect(actions(changed)).toEqual([['a', 'update'], ['b', 'unchanged']]);
    expect(puts.slice(3)).toEqual([`kube_servers/${GROUP}/${full('a')}`]);
    expect(inventory.get(full('a'))?.spec.cluster.metadata.labels).toMatchObject({env: 'staging'});
  });

  it('has at most 64 writes in flight, also when a first cycle registers 500 clusters', async () => {
    listing = {'us-east-1': Array.from({length: 300}, (_, i) => `east-${i}`), 'us-west-2': Array.from({length: 200}, (_, i) => `west-${i}`)};
    let inFlight = 0;
    let most = 0;
    const counting: Registrar = {
      ...registrar,
      announce: async (server) => {
        inFlight++;
        most = Math.max(most, inFlight);
        // A write that takes a turn of the event loop, as a real registry's does.
        await new Promise((resolve) => setImmediate(resolve));
        try {
          return await registrar.announce(server);
        } finally {
          inFlight--;
        }
      },
    };
    const report = await cycle(counting);
    expect(report.counts.create).toBe(500);
    expect(inventory.list()).toHaveLength(500);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(64);
  });

  it("deletes what a successful source no longer lists, and keeps a failed source's entries (stale)", async () => {
    listing = {'us-east-1': ['a', 'b'], 'us-west-2': ['c']};
    await cycle();
    listing = {'us-east-1': ['a'], 'us-west-2': 'fails'};
    const report = await cycle();
    expect(actions(report)).toEqual([['a', 'unchanged'], ['b', 'delete'], ['c', 'stale']]);
    expect(inventory.list().map((s) => [short(s.metadata.name), s.status?.stale ?? false])).toEqual([
      ['a', false],
      ['c', true],
    ]);
  });

  it('a failed write keeps its entry and is reported; the rest of the plan is applied', async () => {
    listing = {'us-east-1': ['a', 'b', 'c']};
    await cycle();
    listing = {'us-east-1': ['b', 'c', 'd']};
    const failing: Registrar = {
      ...registrar,
      remove: async (name) => {
        throw new Error(`registry refused the delete of ${name}`);
      },
    };
    const report = await cycle(failing);
    expect(report.applyErrors).toEqual([{name: full('a'), action: 'delete', message: `registry refused the delete of ${full('a')}`}]);
    expect(report.result).toBe('partial');
    expect(inventory.list().map((s) => short(s.metadata.name))).toEqual(['a', 'b', 'c', 'd']);
  });
});
