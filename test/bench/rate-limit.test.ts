/**
 * The simulator's token-bucket rate limits, driven through the wire fakes by the real SDK:
 * a burst passes, the next call is answered `429 ThrottlingException` like AWS (ARM: `429
 * TooManyRequests` with Retry-After), and the bucket refills as the fake clock moves.
 */
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import https from 'node:https';
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {armRateLimiter, awsRateLimiter, type AwsRateLimiter} from '../../bench/rate-limit.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIARATELIMITTEST001', secretAccessKey: 'rate-limit-secret'};

let clock: FakeClock;
let limiter: AwsRateLimiter;
let fake: FakeAws;

beforeEach(async () => {
  // SigV4 checks the signing time against the world's clock: start it at the real time.
  clock = new FakeClock(Date.now());
  const world = new FakeAwsWorld({clock});
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const region of ['us-east-1', 'eu-west-1']) world.addCluster(ACCOUNT, region, {name: 'prod'});
  limiter = awsRateLimiter({clock, limits: {DescribeCluster: {ratePerSecond: 1, burst: 3}}});
  fake = await startFakeAws({world, fault: limiter.hook});
});

afterEach(async () => {
  await fake.close();
});

/** One DescribeCluster without SDK retries: 200, or the error name and HTTP status AWS sent. */
async function describeOnce(region = 'us-east-1'): Promise<string> {
  const client = new EKSClient({region, endpoint: fake.url, credentials: KEY, maxAttempts: 1});
  try {
    await client.send(new DescribeClusterCommand({name: 'prod'}));
    return 'ok';
  } catch (error) {
    const e = error as {name: string; message: string; $metadata?: {httpStatusCode?: number}};
    return `${e.name} ${e.$metadata?.httpStatusCode} ${e.message}`;
  } finally {
    client.destroy();
  }
}

describe('AWS token buckets', () => {
  it('let a burst through, then answer 429 ThrottlingException like AWS', async () => {
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await describeOnce());
    expect(results).toEqual(['ok', 'ok', 'ok', 'ThrottlingException 429 Rate exceeded', 'ThrottlingException 429 Rate exceeded']);
    expect(fake.stats.count({operation: 'DescribeCluster', code: 'ThrottlingException'})).toBe(2);
    expect(limiter.buckets.stats).toEqual({allowed: 3, throttled: 2});
  });

  it('keep one bucket per region and per operation', async () => {
    for (let i = 0; i < 3; i++) await describeOnce('us-east-1');
    expect(await describeOnce('us-east-1')).toMatch(/^ThrottlingException/);
    expect(await describeOnce('eu-west-1')).toBe('ok');
    const client = new EKSClient({region: 'us-east-1', endpoint: fake.url, credentials: KEY, maxAttempts: 1});
    // ListClusters has no limit in this world: an exhausted DescribeCluster bucket does not touch it.
    await expect(client.send(new ListClustersCommand({}))).resolves.toMatchObject({clusters: ['prod']});
    client.destroy();
  });

  it('refill at the configured rate on the world clock, up to the burst', async () => {
    for (let i = 0; i < 3; i++) await describeOnce();
    expect(await describeOnce()).toMatch(/^ThrottlingException/);
    await clock.advance(1000);
    expect(await describeOnce()).toBe('ok');
    expect(await describeOnce()).toMatch(/^ThrottlingException/);
    await clock.advance(60_000);
    const afterLongPause = [];
    for (let i = 0; i < 4; i++) afterLongPause.push(await describeOnce());
    expect(afterLongPause).toEqual(['ok', 'ok', 'ok', expect.stringMatching(/^ThrottlingException/)]);
  });

  it('start full again after refill(), as between two real discovery cycles', async () => {
    for (let i = 0; i < 3; i++) await describeOnce();
    limiter.buckets.refill();
    expect(await describeOnce()).toBe('ok');
  });

  it('refuse limits that could never let a call through', () => {
    expect(() => awsRateLimiter({clock, limits: {DescribeCluster: {ratePerSecond: 0, burst: 1}}})).toThrow(/ratePerSecond.*> 0, got 0/);
    expect(() => awsRateLimiter({clock, limits: {'*': {ratePerSecond: 1, burst: 0}}})).toThrow(/burst.*>= 1, got 0/);
  });
});

describe('ARM token buckets', () => {
  let arm: FakeArm;

  afterEach(async () => {
    await arm.close();
  });

  function get(path: string): Promise<{status: number; retryAfter: string | undefined; code: string | undefined}> {
    return new Promise((resolve, reject) => {
      const req = https.request(`${arm.url}${path}`, {ca: arm.caPem, headers: {authorization: `Bearer ${FAKE_ARM_TOKEN}`}}, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => {
          const header = res.headers['retry-after'];
          const code = res.statusCode === 200 ? undefined : (JSON.parse(body) as {error?: {code?: string}}).error?.code;
          resolve({status: res.statusCode ?? 0, retryAfter: Array.isArray(header) ? header[0] : header, code});
        });
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('answer 429 TooManyRequests with Retry-After once a subscription bucket is empty', async () => {
    const world = new ArmWorld();
    const sub = world.addSubscription({subscriptionId: '00000000-0000-4000-8000-000000000001'});
    const limits = armRateLimiter({clock, limits: {'managedClusters.list': {ratePerSecond: 0.5, burst: 2}}});
    arm = await startFakeArm({world, fault: limits.hook});
    const path = `/subscriptions/${sub.subscriptionId}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01`;
    const answers = [await get(path), await get(path), await get(path)];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
    expect(answers[2]).toMatchObject({code: 'TooManyRequests', retryAfter: '2'});
    await clock.advance(2000);
    expect((await get(path)).status).toBe(200);
  });
});
