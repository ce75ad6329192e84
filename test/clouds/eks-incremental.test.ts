/**
 * Incremental EKS discovery against the wire-level fake: the real EKS and Resource Groups
 * Tagging API clients, reached through AWS_ENDPOINT_URL_*; the clock that decides periodic
 * refreshes is a FakeClock.
 */
import fc from 'fast-check';
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import type {TagReadFallback} from '../../src/clouds/aws/tag-reader.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {DiscoveredCluster, SourceResult} from '../../src/core/types.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAINCREMENTAL00001', secretAccessKey: 'incremental-secret'};
const REGIONS = ['us-east-1', 'eu-west-1'];
const HOUR = 3_600_000;

let fake: FakeAws;
let world: FakeAwsWorld;
let restoreEnv: () => void;

beforeAll(async () => {
  world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  fake = await startFakeAws({world, pageSize: 100});
  restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '2'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

afterEach(() => {
  fake.fault = undefined;
  fake.stats.reset();
  for (const region of REGIONS) for (const c of world.clusters(ACCOUNT, region)) world.removeCluster(ACCOUNT, region, c.name);
});

function populate(perRegion: number): void {
  for (const region of REGIONS) {
    for (let i = 0; i < perRegion; i++) world.addCluster(ACCOUNT, region, {name: `c${String(i).padStart(4, '0')}`, tags: {env: i % 2 ? 'prod' : 'dev', n: String(i)}});
  }
}

/** One cycle of every source; returns their results by source id. */
async function cycle(sources: AwsSources): Promise<SourceResult[]> {
  const {fetchers, failed} = await sources.plan([{types: ['eks'], regions: REGIONS}]);
  expect(failed).toEqual([]);
  const signal = new AbortController().signal;
  return Promise.all(fetchers.map((f) => f.fetch(signal)));
}

/** What the inventory is built from: every cluster of every source, comparable across runs. */
function inventory(results: readonly SourceResult[]): {ok: boolean[]; clusters: DiscoveredCluster[]; malformed: string[]} {
  return {
    ok: results.map((r) => r.ok),
    clusters: results.flatMap((r) => r.clusters).sort((a, b) => (a.id ?? '').localeCompare(b.id ?? '')),
    malformed: results.flatMap((r) => r.malformed.map((m) => `${m.sourceId}/${m.name}`)).sort(),
  };
}

/**
 * What users see of the inventory: `status` (ACTIVE vs UPDATING, both kept) and the Kubernetes
 * version reach no registration, so an UPDATING cluster reused until its settle refresh shows
 * the same as one described this cycle.
 */
function visible(inv: ReturnType<typeof inventory>): unknown {
  return {...inv, clusters: inv.clusters.map(({status: _status, kubernetesVersion: _version, ...rest}) => rest)};
}

function calls(operation: string): number {
  return fake.stats.count({operation});
}

describe('incremental EKS discovery', () => {
  it('a steady-state cycle reads tags in pages of 100 and describes nothing that did not change', async () => {
    populate(250);
    const clock = new FakeClock();
    const sources = new AwsSources({clock});
    const first = inventory(await cycle(sources));
    expect(first.clusters).toHaveLength(500);
    expect(calls('DescribeCluster')).toBe(500);
    expect(calls('GetResources')).toBe(0); // nothing known yet: nothing to save

    fake.stats.reset();
    // Within the first 5 % of the refresh period after a full describe nothing is due.
    await clock.advance(2 * 60_000);
    const second = inventory(await cycle(sources));
    expect(second).toEqual(first);
    expect(calls('DescribeCluster')).toBe(0);
    expect(calls('ListClusters')).toBe(6); // 3 pages × 2 regions
    expect(calls('GetResources')).toBe(6);
  });

  it("a steady source's tag read goes out beside its listing, not after it; a first cycle reads no tags", async () => {
    populate(3);
    const clock = new FakeClock();
    const sources = new AwsSources({clock});
    fake.latencyMs = (c) => (c.operation === 'ListClusters' || c.operation === 'GetResources' ? 50 : 0);
    try {
      await cycle(sources);
      expect(calls('GetResources')).toBe(0);
      fake.stats.reset();
      await clock.advance(2 * 60_000);
      await cycle(sources);
      expect(calls('GetResources')).toBe(2);
      expect(fake.stats.overlapped({operation: 'ListClusters'}, {operation: 'GetResources'})).toBe(true);
    } finally {
      fake.latencyMs = undefined;
    }
  });

  it('a listing that fails while its tag read answered fails the source: the tags are not used, no cluster is dropped', async () => {
    populate(3);
    const clock = new FakeClock();
    const sources = new AwsSources({clock});
    const first = inventory(await cycle(sources));
    fake.fault = (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {code: 'InternalFailure', status: 500} : undefined);
    fake.stats.reset();
    await clock.advance(2 * 60_000);
    const results = await cycle(sources);
    const byRegion = new Map(results.map((r) => [r.source.region, r]));
    expect(byRegion.get('eu-west-1')?.ok).toBe(false);
    expect(byRegion.get('eu-west-1')?.clusters).toEqual([]);
    expect(byRegion.get('us-east-1')?.ok).toBe(true);
    expect(calls('DescribeCluster')).toBe(0);
    // The next good listing finds everything, and what the source remembered is intact.
    fake.fault = undefined;
    fake.stats.reset();
    await clock.advance(2 * 60_000);
    expect(inventory(await cycle(sources))).toEqual(first);
    expect(calls('DescribeCluster')).toBe(0);
  });

  it('a source whose listing keeps failing stops reading tags ahead: at most the first failed cycle reads', async () => {
    populate(3);
    const clock = new FakeClock();
    const sources = new AwsSources({clock});
    await cycle(sources);
    fake.fault = (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {code: 'AccessDeniedException'} : undefined);
    fake.stats.reset();
    for (let i = 0; i < 4; i++) {
      await clock.advance(2 * 60_000);
      const results = await cycle(sources);
      expect(results.find((r) => r.source.region === 'eu-west-1')?.ok).toBe(false);
    }
    // The first failed cycle's read went out beside its listing (it may even be cut off before it
    // reached the fake); the source's later cycles read no tags while its listing fails.
    expect(fake.stats.find({operation: 'GetResources', region: 'eu-west-1'}).length).toBeLessThanOrEqual(1);
    expect(fake.stats.find({operation: 'GetResources', region: 'us-east-1'})).toHaveLength(4);
    fake.fault = undefined;
  });

  it('describes exactly the new, retagged and not-yet-active clusters, and drops none', async () => {
    populate(5);
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'creating', status: 'CREATING', tags: {env: 'prod'}});
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'untagged'});
    const clock = new FakeClock();
    const sources = new AwsSources({clock});
    await cycle(sources);

    world.retagCluster(ACCOUNT, 'us-east-1', 'c0001', {env: 'staging'});
    world.addCluster(ACCOUNT, 'eu-west-1', {name: 'fresh', tags: {env: 'prod'}});
    world.removeCluster(ACCOUNT, 'eu-west-1', 'c0002');
    world.updateCluster(ACCOUNT, 'us-east-1', 'creating', {status: 'ACTIVE', endpoint: 'https://creating.example', caData: world.cluster(ACCOUNT, 'us-east-1', 'c0000')!.caData!});
    fake.stats.reset();
    await clock.advance(2 * 60_000);
    const incremental = inventory(await cycle(sources));

    const described = fake.stats.find({operation: 'DescribeCluster'}).map((c) => `${c.region}`).length;
    // c0001 (retagged), fresh (new), creating (was not ACTIVE); not `untagged`: described with no
    // tags, its absence from the tag read is what AWS answers for it.
    expect(described).toBe(3);
    const full = inventory(await cycle(new AwsSources({clock, refreshMs: 0})));
    expect(incremental).toEqual(full);
    const byName = new Map(incremental.clusters.map((c) => [`${c.region}/${c.name}`, c]));
    expect(byName.get('us-east-1/c0001')?.tags).toEqual({env: 'staging'});
    expect(byName.get('us-east-1/creating')?.status).toBe('ACTIVE');
    expect(byName.has('us-east-1/untagged')).toBe(true);
    expect(byName.has('eu-west-1/c0002')).toBe(false);
  });

  it('refreshes every cluster within the refresh period, spread across cycles', async () => {
    populate(100);
    const clock = new FakeClock();
    const sources = new AwsSources({clock, refreshMs: HOUR});
    await cycle(sources);
    const perCycle: number[] = [];
    for (let i = 0; i < 12; i++) {
      fake.stats.reset();
      await clock.advance(5 * 60_000);
      await cycle(sources);
      perCycle.push(calls('DescribeCluster'));
    }
    // Each of the 200 clusters is re-described once in the hour (12 cycles of 5 minutes) ...
    expect(perCycle.reduce((a, b) => a + b, 0)).toBe(200);
    // ... and no cycle takes a large share of them.
    expect(Math.max(...perCycle)).toBeLessThan(60);
  });

  it('a periodic refresh that finds nothing new hands on the description held before (its strings stay held once), a change a new one', async () => {
    populate(10);
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'moved', tags: {env: 'prod'}});
    const clock = new FakeClock();
    const sources = new AwsSources({clock, refreshMs: HOUR});
    const byName = (results: readonly SourceResult[]): Map<string, DiscoveredCluster> => new Map(results.flatMap((r) => r.clusters).map((c) => [`${c.region}/${c.name}`, c]));
    const first = byName(await cycle(sources));
    // An endpoint change does not show in tags: only the periodic refresh sees it.
    world.updateCluster(ACCOUNT, 'us-east-1', 'moved', {endpoint: 'https://moved.example.eks.amazonaws.com'});
    let refreshed = new Map<string, DiscoveredCluster>();
    // Twelve 5-minute cycles: every cluster is re-described once in the hour.
    for (let i = 0; i <= 12; i++) {
      await clock.advance(5 * 60_000);
      refreshed = byName(await cycle(sources));
    }
    expect(calls('DescribeCluster')).toBeGreaterThanOrEqual(first.size);
    expect(refreshed.size).toBe(first.size);
    for (const [key, cluster] of refreshed) {
      if (key === 'us-east-1/moved') {
        expect(cluster.endpoint).toBe('https://moved.example.eks.amazonaws.com');
        expect(cluster).not.toBe(first.get(key));
      } else {
        expect(cluster, key).toBe(first.get(key));
      }
    }
  });

  it('an UPDATING cluster stays registered and is re-described on its settle period, not every cycle', async () => {
    populate(50);
    for (let i = 0; i < 5; i++) world.updateCluster(ACCOUNT, 'us-east-1', `c${String(i).padStart(4, '0')}`, {status: 'UPDATING'});
    const clock = new FakeClock();
    // A long full-refresh period: no ACTIVE cluster is due in these ten minutes, only the updating ones.
    const sources = new AwsSources({clock, refreshMs: 10 * HOUR, settleMs: 10 * 60_000});
    await cycle(sources);

    // The first half of the settle period: the five updating clusters are reused, still registered.
    fake.stats.reset();
    await clock.advance(4 * 60_000);
    const steady = inventory(await cycle(sources));
    expect(calls('DescribeCluster')).toBe(0);
    expect(steady.clusters.filter((c) => c.status === 'UPDATING' && c.statusOk)).toHaveLength(5);

    // The updates end (new version); within one settle period every one of them is described again.
    for (let i = 0; i < 5; i++) world.updateCluster(ACCOUNT, 'us-east-1', `c${String(i).padStart(4, '0')}`, {status: 'ACTIVE', version: '1.32'});
    fake.stats.reset();
    await clock.advance(6 * 60_000);
    const settled = inventory(await cycle(sources));
    expect(calls('DescribeCluster')).toBe(5);
    expect(settled.clusters.filter((c) => c.status === 'UPDATING')).toEqual([]);
    expect(visible(settled)).toEqual(visible(steady));
  });

  const fallbacks: [string, () => void, string][] = [
    ['denied', () => (fake.fault = (ctx) => (ctx.operation === 'GetResources' ? {code: 'AccessDeniedException'} : undefined)), 'access_denied'],
    ['a 5xx', () => (fake.fault = (ctx) => (ctx.operation === 'GetResources' ? {code: 'InternalServiceException', status: 500} : undefined)), 'other'],
    ['invalid JSON', () => (fake.fault = (ctx) => (ctx.operation === 'GetResources' ? {malformed: 'invalid-json'} : undefined)), 'invalid_response'],
    ['an empty 2xx body', () => (fake.fault = (ctx) => (ctx.operation === 'GetResources' ? {malformed: 'missing-fields'} : undefined)), 'other'],
    ['a hang', () => (fake.fault = (ctx) => (ctx.operation === 'GetResources' ? {hang: true} : undefined)), 'timeout'],
  ];
  for (const [what, inject, reason] of fallbacks) {
    it(`a tag read that fails with ${what} describes every cluster: the source succeeds and nothing is dropped`, async () => {
      populate(3);
      const clock = new FakeClock();
      const seen: TagReadFallback[] = [];
      // The deadline runs in real time and bounds every tag read, the first cycle's good ones too:
      // short only for the hang, and not so short that a slow answer on a loaded machine is one.
      const sources = new AwsSources({clock, tagReadTimeoutMs: reason === 'timeout' ? 2_000 : 30_000, onTagFallback: (_s, f) => seen.push(f)});
      const first = inventory(await cycle(sources));
      world.retagCluster(ACCOUNT, 'eu-west-1', 'c0000', {env: 'changed'});
      inject();
      fake.stats.reset();
      await clock.advance(5 * 60_000);
      const second = inventory(await cycle(sources));
      expect(second.ok).toEqual([true, true]);
      expect(second.clusters).toHaveLength(first.clusters.length);
      expect(second.clusters.find((c) => c.region === 'eu-west-1' && c.name === 'c0000')?.tags).toEqual({env: 'changed'});
      expect(calls('DescribeCluster')).toBe(6);
      expect(seen).toHaveLength(2);
      if (reason !== 'other') expect(seen.map((f) => f.reason)).toEqual([reason, reason]);
      if (what === 'denied') {
        expect(seen.every((f) => f.firstDenial)).toBe(true); // one per source
        await clock.advance(5 * 60_000);
        await cycle(sources);
        expect(seen.slice(2).map((f) => f.firstDenial)).toEqual([false, false]); // warned once, counted always
      }
    });
  }

  it('property: under random churn the incremental and the full-describe paths give the same inventory', async () => {
    type Step = {kind: 'add' | 'remove' | 'retag' | 'activate' | 'create' | 'update' | 'settle'; region: number; index: number; value: number};
    const step = fc.record({
      kind: fc.constantFrom<Step['kind']>('add', 'remove', 'retag', 'activate', 'create', 'update', 'settle'),
      region: fc.integer({min: 0, max: REGIONS.length - 1}),
      index: fc.integer({min: 0, max: 11}),
      value: fc.integer({min: 0, max: 3}),
    });
    const ca = (): string => world.cluster(ACCOUNT, 'us-east-1', 'seed')!.caData!;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(step, {maxLength: 6}), {minLength: 1, maxLength: 5}), async (cycles) => {
        for (const region of REGIONS) for (const c of world.clusters(ACCOUNT, region)) world.removeCluster(ACCOUNT, region, c.name);
        world.addCluster(ACCOUNT, 'us-east-1', {name: 'seed', tags: {env: 'prod'}});
        for (let i = 0; i < 6; i++) world.addCluster(ACCOUNT, REGIONS[i % 2]!, {name: `k${i}`, tags: {env: String(i % 3)}});
        const clock = new FakeClock();
        const incremental = new AwsSources({clock});
        await cycle(incremental);
        for (const steps of cycles) {
          for (const s of steps) {
            const region = REGIONS[s.region]!;
            const name = `k${s.index}`;
            const existing = world.cluster(ACCOUNT, region, name);
            if (s.kind === 'add' && !existing) world.addCluster(ACCOUNT, region, {name, tags: s.value === 0 ? {} : {env: String(s.value)}});
            else if (s.kind === 'create' && !existing) world.addCluster(ACCOUNT, region, {name, status: 'CREATING', tags: {env: String(s.value)}});
            else if (s.kind === 'remove' && existing) world.removeCluster(ACCOUNT, region, name);
            else if (s.kind === 'retag' && existing) world.retagCluster(ACCOUNT, region, name, s.value === 0 ? {} : {env: String(s.value), v: String(s.index)});
            else if (s.kind === 'activate' && existing?.status === 'CREATING') world.updateCluster(ACCOUNT, region, name, {status: 'ACTIVE', endpoint: `https://${name}.example`, caData: ca()});
            else if (s.kind === 'update' && existing?.status === 'ACTIVE') world.updateCluster(ACCOUNT, region, name, {status: 'UPDATING'});
            else if (s.kind === 'settle' && existing?.status === 'UPDATING') world.updateCluster(ACCOUNT, region, name, {status: 'ACTIVE', version: `1.3${s.value}`});
          }
          await clock.advance(5 * 60_000);
          const got = inventory(await cycle(incremental));
          const want = inventory(await cycle(new AwsSources({clock, refreshMs: 0})));
          // Identical but for the status/version of updates still inside their settle period.
          expect(visible(got)).toEqual(visible(want));
        }
      }),
      {numRuns: 15},
    );
  });
});
