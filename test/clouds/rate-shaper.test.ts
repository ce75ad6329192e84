/**
 * Client-side rate shaping: the token buckets on a FakeClock (which requests may start when),
 * AIMD adaptation on throttling, and the SDK middleware on a real EKS client against the
 * wire-level fake answering `429 ThrottlingException`.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {RateShaper, isThrottle} from '../../src/clouds/aws/rate-shaper.ts';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {systemClock} from '../../src/core/clock.ts';
import {FakeClock, flushMicrotasks} from '../helpers/fake-clock.ts';
import {FakeAwsWorld, startFakeAws, throttleFirst, type FakeAws} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';

/** Starts `n` acquisitions; returns the list of those that got their token so far. */
function start(shaper: RateShaper, n: number, operation = 'DescribeCluster'): number[] {
  const got: number[] = [];
  for (let i = 0; i < n; i++) void shaper.acquire('111', 'us-east-1', operation).then(() => got.push(i));
  return got;
}

describe('RateShaper', () => {
  it('lets a burst through at once, then one request per 1/rate seconds, in order', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {DescribeCluster: {ratePerSecond: 10, burst: 3}}});
    const got = start(shaper, 6);
    await flushMicrotasks();
    expect(got).toEqual([0, 1, 2]);
    await clock.advance(100);
    expect(got).toEqual([0, 1, 2, 3]);
    await clock.advance(200);
    expect(got).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('keeps buckets apart per account, region and operation; operations without a limit are not shaped', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {ListClusters: {ratePerSecond: 1, burst: 1}}});
    const done: string[] = [];
    for (const [account, region] of [['111', 'us-east-1'], ['222', 'us-east-1'], ['111', 'eu-west-1'], ['111', 'us-east-1']] as const) {
      void shaper.acquire(account, region, 'ListClusters').then(() => done.push(`${account}/${region}`));
    }
    void shaper.acquire('111', 'us-east-1', 'DescribeCluster').then(() => done.push('describe'));
    await flushMicrotasks();
    expect(done.sort()).toEqual(['111/eu-west-1', '111/us-east-1', '222/us-east-1', 'describe']);
    await clock.advance(1000);
    expect(done).toHaveLength(5);
  });

  it('slows down multiplicatively on throttling (once per cooldown) and regains rate additively with time, never above its ceiling', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {DescribeCluster: {ratePerSecond: 40, burst: 5}}, decrease: 0.5, increase: 2, cooldownMs: 1000});
    const rate = (): number => shaper.rate('111', 'us-east-1', 'DescribeCluster') ?? Number.NaN;
    await shaper.acquire('111', 'us-east-1', 'DescribeCluster');
    expect(rate()).toBe(40);
    shaper.throttled('111', 'us-east-1', 'DescribeCluster');
    shaper.throttled('111', 'us-east-1', 'DescribeCluster'); // same overload: no second cut
    expect(rate()).toBe(20);
    // One second regains `increase` = 2 requests per second.
    await clock.advance(1000);
    expect(rate()).toBeCloseTo(22);
    await clock.advance(60_000);
    expect(rate()).toBe(40);
  });

  it('by default cuts gently and never below half its ceiling, however many throttles come', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {DescribeCluster: {ratePerSecond: 40, burst: 5}}});
    const rate = (): number => shaper.rate('111', 'us-east-1', 'DescribeCluster') ?? Number.NaN;
    shaper.throttled('111', 'us-east-1', 'DescribeCluster');
    expect(rate()).toBeCloseTo(36);
    for (let i = 0; i < 50; i++) {
      await clock.advance(1000);
      shaper.throttled('111', 'us-east-1', 'DescribeCluster');
    }
    expect(rate()).toBe(20);
    // Back to the ceiling after 10 s without throttling: 5 % of it regained per second.
    await clock.advance(9_000);
    expect(rate()).toBeLessThan(40);
    await clock.advance(1000);
    expect(rate()).toBeCloseTo(40);
  });

  it('starts the next cycle at its ceiling: a bucket cut at the end of one cycle has regained its rate minutes later', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {DescribeCluster: {ratePerSecond: 10, burst: 1}}});
    // The end of a throttled cycle: the rate is cut to its floor.
    for (let i = 0; i < 20; i++) {
      shaper.throttled('111', 'us-east-1', 'DescribeCluster');
      await clock.advance(1000);
    }
    await clock.advance(5 * 60_000);
    // The next cycle: after the burst token, one request per 100 ms (the ceiling), not per 200 ms.
    const got = start(shaper, 4);
    await flushMicrotasks();
    expect(got).toEqual([0]);
    await clock.advance(100);
    expect(got).toEqual([0, 1]);
    await clock.advance(200);
    expect(got).toEqual([0, 1, 2, 3]);
  });

  it('after a throttle the saved burst is spent: the next request waits for a fresh token', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {DescribeCluster: {ratePerSecond: 10, burst: 5}}, decrease: 0.5});
    shaper.throttled('111', 'us-east-1', 'DescribeCluster');
    const got = start(shaper, 1);
    await flushMicrotasks();
    expect(got).toEqual([]);
    await clock.advance(200); // one token at the halved rate of 5/s
    expect(got).toEqual([0]);
  });

  it('an aborted waiter gives up without blocking the ones behind it', async () => {
    const clock = new FakeClock();
    const shaper = new RateShaper({clock, limits: {DescribeCluster: {ratePerSecond: 1, burst: 1}}});
    await shaper.acquire('111', 'us-east-1', 'DescribeCluster');
    const controller = new AbortController();
    const aborted = shaper.acquire('111', 'us-east-1', 'DescribeCluster', controller.signal);
    const next = shaper.acquire('111', 'us-east-1', 'DescribeCluster');
    controller.abort(new Error('cycle over'));
    await expect(aborted).rejects.toThrow('cycle over');
    let done = false;
    void next.then(() => (done = true));
    await clock.advance(1000);
    expect(done).toBe(true);
  });

  it('rejects a limit that could never grant a token', () => {
    expect(() => new RateShaper({clock: new FakeClock(), limits: {ListClusters: {ratePerSecond: 0, burst: 1}}})).toThrow(/ListClusters/);
  });

  it('recognises throttling answers of the AWS SDK', () => {
    expect(isThrottle(Object.assign(new Error('x'), {name: 'ThrottlingException'}))).toBe(true);
    expect(isThrottle({name: 'ServiceUnavailable', $metadata: {httpStatusCode: 429}})).toBe(true);
    expect(isThrottle(Object.assign(new Error('x'), {name: 'AccessDeniedException', $metadata: {httpStatusCode: 403}}))).toBe(false);
  });
});

describe('rate shaping of the real EKS client', () => {
  const ACCOUNT = '111111111111';
  const KEY = {accessKeyId: 'AKIARATESHAPER000001', secretAccessKey: 'shaper-secret'};
  let fake: FakeAws;
  let restoreEnv: () => void;
  beforeAll(async () => {
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
    for (let i = 0; i < 30; i++) world.addCluster(ACCOUNT, 'us-east-1', {name: `c${i}`, tags: {n: String(i)}});
    fake = await startFakeAws({world, pageSize: 100});
    restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '5', AWS_RETRY_MODE: 'standard'});
  });
  afterAll(async () => {
    restoreEnv();
    await fake.close();
  });

  it('throttled describes slow their own bucket down, are retried, and every cluster is found', async () => {
    // The real clock: after a throttle the next token is a fraction of a second away (no timing is asserted).
    const shaper = new RateShaper({clock: systemClock, limits: {DescribeCluster: {ratePerSecond: 40, burst: 1000}, '*': {ratePerSecond: 40, burst: 1000}}});
    fake.fault = throttleFirst(3, {operation: 'DescribeCluster'});
    const sources = new AwsSources({rateShaper: shaper, refreshMs: 0});
    const {fetchers} = await sources.plan([{types: ['eks'], regions: ['us-east-1']}]);
    const [result] = await Promise.all(fetchers.map((f) => f.fetch(new AbortController().signal)));
    fake.fault = undefined;
    expect(result?.ok).toBe(true);
    expect(result?.clusters).toHaveLength(30);
    expect(fake.stats.count({operation: 'DescribeCluster', code: 'ThrottlingException'})).toBe(3);
    expect(shaper.rate('caller', 'us-east-1', 'DescribeCluster')).toBeLessThan(40);
    expect(shaper.rate('caller', 'us-east-1', 'ListClusters')).toBe(40);
  });
});
