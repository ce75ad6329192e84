/**
 * A first cycle lists EKS clusters while STS still looks up the caller's account (sources.ts):
 * the real EKS clients against the wire-level fake, the account lookup held open by the test.
 * The listings are used by the sources' fetchers, stay within the cycle's bound on sources in
 * flight, and every fault of them (error status, malformed page, hang) fails that source only;
 * an account lookup that fails still fails every source, whatever was listed.
 */
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import type {PlanContext} from '../../src/clouds/fetcher.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAEARLYLISTING0001', secretAccessKey: 'early-listing-secret'};
const REGIONS = ['us-east-1', 'eu-west-1', 'ap-south-1'];

let fake: FakeAws;
let world: FakeAwsWorld;
let restoreEnv: () => void;

beforeAll(async () => {
  world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const region of REGIONS) for (const name of ['a', 'b', 'c']) world.addCluster(ACCOUNT, region, {name, tags: {env: 'prod'}});
  // Two pages per region: the early listing follows a listing to its last page too.
  fake = await startFakeAws({world, pageSize: 2});
  restoreEnv = setEnv({...fake.env, AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '1'});
});
afterAll(async () => {
  restoreEnv();
  await fake.close();
});
afterEach(() => {
  fake.fault = undefined;
  fake.stats.reset();
});

function deferred<T>(): {promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void} {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return {promise, resolve, reject};
}

/** Sources whose account lookup waits for the test; the EKS clients are the real ones. */
function sources(account: Promise<string>, requestTimeoutMs = 2_000): AwsSources {
  return new AwsSources({callerAccount: () => account, credentialProvider: () => async () => KEY, refreshMs: 0, requestTimeoutMs});
}

function context(signal: AbortSignal, sourceConcurrency: number): PlanContext {
  return {registered: async () => [], signal, sourceConcurrency, now: Date.now};
}

/** Waits (bounded) until the fake has answered `n` ListClusters calls: the early listings, done before the account is known. */
async function listed(n: number): Promise<void> {
  for (let i = 0; i < 500 && fake.stats.find({operation: 'ListClusters'}).filter((c) => c.endOrder !== undefined).length < n; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(fake.stats.find({operation: 'ListClusters'}).filter((c) => c.endOrder !== undefined)).toHaveLength(n);
}

async function fetchAll(planned: Awaited<ReturnType<AwsSources['plan']>>, signal: AbortSignal): Promise<SourceResult[]> {
  return Promise.all(planned.fetchers.map((f) => f.fetch(signal)));
}

describe('EKS listings that start while STS answers', () => {
  it('are made before the account is known, followed to the last page, and used by the fetchers (no second listing)', async () => {
    const account = deferred<string>();
    const cycle = new AbortController();
    const planned = sources(account.promise).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
    // 3 regions × 2 pages, all answered while the lookup is still open.
    await listed(6);
    expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(0);
    account.resolve(ACCOUNT);
    const results = await fetchAll(await planned, cycle.signal);
    expect(results.map((r) => [r.source.id, r.ok, r.clusters.map((c) => c.name)])).toEqual(REGIONS.map((region) => [`eks:${region}:${ACCOUNT}`, true, ['a', 'b', 'c']]));
    expect(fake.stats.count({operation: 'ListClusters'})).toBe(6);
    expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(9);
  });

  it('start only as many as the cycle runs sources at once; the others list when their fetcher runs', async () => {
    const account = deferred<string>();
    const cycle = new AbortController();
    const planned = sources(account.promise).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 2));
    await listed(4);
    expect(new Set(fake.stats.find({operation: 'ListClusters'}).map((c) => c.region))).toEqual(new Set(REGIONS.slice(0, 2)));
    account.resolve(ACCOUNT);
    const results = await fetchAll(await planned, cycle.signal);
    expect(results.every((r) => r.ok && r.clusters.length === 3)).toBe(true);
    expect(fake.stats.count({operation: 'ListClusters'})).toBe(6);
  });

  it('are not made once the account is known (later cycles list in their fetchers)', async () => {
    const cycle = new AbortController();
    const known = sources(Promise.resolve(ACCOUNT));
    await fetchAll(await known.plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20)), cycle.signal);
    fake.stats.reset();
    const planned = await known.plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
    expect(fake.stats.count({operation: 'ListClusters'})).toBe(0);
    await fetchAll(planned, cycle.signal);
    expect(fake.stats.count({operation: 'ListClusters'})).toBe(6);
  });

  it('are dropped when the account lookup fails: every source of the matcher fails GetCallerIdentity, nothing left unhandled', async () => {
    const account = deferred<string>();
    const cycle = new AbortController();
    const planned = sources(account.promise).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
    await listed(6);
    account.reject(Object.assign(new Error('denied'), {name: 'AccessDenied', $metadata: {httpStatusCode: 403}}));
    const {fetchers, failed} = await planned;
    expect(fetchers).toEqual([]);
    expect(failed.map((f) => [f.source.region, f.ok, f.error?.operation])).toEqual(REGIONS.map((region) => [region, false, 'GetCallerIdentity']));
  });
  it('are stopped when the account lookup fails: a listing under way does not go on spending calls for sources already failed', async () => {
    // eu-west-1's listing hangs, and its request deadline is far beyond the test.
    fake.fault = (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {hang: true} : undefined);
    const account = deferred<string>();
    const cycle = new AbortController();
    const planned = sources(account.promise, 600_000).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
    await listed(4);
    account.reject(Object.assign(new Error('throttled'), {name: 'ThrottlingException', $metadata: {httpStatusCode: 400}}));
    expect((await planned).fetchers).toEqual([]);
    // The cycle goes on (its signal is not aborted): only the failed lookup can stop the listing.
    for (let i = 0; i < 500 && fake.stats.inFlight({operation: 'ListClusters'}) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(fake.stats.inFlight({operation: 'ListClusters'})).toBe(0);
    expect(cycle.signal.aborted).toBe(false);
  });
});

describe('a fault of an early listing fails its source only (nothing read as "no clusters")', () => {
  const cases: [string, NonNullable<FakeAws['fault']>, string][] = [
    ['503 ServiceUnavailableException', (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {code: 'ServiceUnavailableException'} : undefined), 'other'],
    ['403 AccessDeniedException', (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {code: 'AccessDeniedException'} : undefined), 'access_denied'],
    ['a page without a clusters list', (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {malformed: 'missing-fields'} : undefined), 'invalid_response'],
    ['broken JSON', (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {malformed: 'invalid-json'} : undefined), 'invalid_response'],
  ];
  for (const [label, fault, reason] of cases) {
    it(`${label}: eu-west-1 fails as ${reason}, the other regions are found`, async () => {
      fake.fault = fault;
      const account = deferred<string>();
      const cycle = new AbortController();
      const planned = sources(account.promise).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
      // us-east-1 and ap-south-1: 2 pages each; eu-west-1: its failing first page.
      await listed(5);
      account.resolve(ACCOUNT);
      const results = await fetchAll(await planned, cycle.signal);
      const byRegion = new Map(results.map((r) => [r.source.region, r]));
      expect(byRegion.get('eu-west-1')).toMatchObject({ok: false, clusters: [], error: {operation: 'ListClusters', reason}});
      expect(byRegion.get('us-east-1')?.clusters).toHaveLength(3);
      expect(byRegion.get('ap-south-1')?.clusters).toHaveLength(3);
    });
  }

  it('a hang: the source fails as timeout when the request deadline passes, the other regions are found', async () => {
    fake.fault = (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {hang: true} : undefined);
    const account = deferred<string>();
    const cycle = new AbortController();
    const planned = sources(account.promise).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
    await listed(4);
    account.resolve(ACCOUNT);
    const results = await fetchAll(await planned, cycle.signal);
    const byRegion = new Map(results.map((r) => [r.source.region, r]));
    expect(byRegion.get('eu-west-1')).toMatchObject({ok: false, clusters: [], error: {operation: 'ListClusters', reason: 'timeout'}});
    expect(byRegion.get('us-east-1')?.clusters).toHaveLength(3);
  });

  it('a hang cut by the cycle (deadline or shutdown): the source fails, its listing stops', async () => {
    fake.fault = (ctx) => (ctx.operation === 'ListClusters' && ctx.region === 'eu-west-1' ? {hang: true} : undefined);
    const account = deferred<string>();
    const cycle = new AbortController();
    const planned = sources(account.promise).plan([{types: ['eks'], regions: REGIONS}], context(cycle.signal, 20));
    await listed(4);
    account.resolve(ACCOUNT);
    const {fetchers} = await planned;
    const euWest = fetchers.find((f) => f.source.region === 'eu-west-1');
    const pending = euWest?.fetch(cycle.signal);
    cycle.abort(Object.assign(new Error('cycle deadline reached'), {name: 'TimeoutError'}));
    expect(await pending).toMatchObject({ok: false, clusters: [], error: {operation: 'ListClusters'}});
  });
});
