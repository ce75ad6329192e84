import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {AwsCredentialError, AwsCredentialProviders, awsCredentialProvider} from '../../src/credentials/aws-credentials.ts';
import {mintEksToken} from '../../src/credentials/eks-token.ts';
import {startFakeAws, type FakeAws} from '../fakes/aws-server.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';

const BASE = {accessKeyId: 'AKIDBASE', secretAccessKey: 'base-secret'};
const ROLE_A = 'arn:aws:iam::222222222222:role/discovery-a';
const ROLE_B = 'arn:aws:iam::333333333333:role/discovery-b';
const MIN = 60_000;

describe('AwsCredentialProviders', () => {
  let fake: FakeAws;

  beforeAll(async () => {
    const world = new FakeAwsWorld();
    world.addAccount('111111111111', {accessKeys: [BASE]});
    world.addAccount('222222222222', {roles: [{arn: ROLE_A, trust: ['111111111111']}]});
    world.addAccount('333333333333', {roles: [{arn: ROLE_B, externalId: 'ext-b', trust: ['111111111111']}]});
    fake = await startFakeAws({world});
  });
  afterAll(() => fake.close());

  /** Providers whose AssumeRole client reaches the fake through AWS_ENDPOINT_URL_STS in `env`. */
  function providers(clock = new FakeClock(Date.now())) {
    return {clock, registry: new AwsCredentialProviders({env: fake.env, clock, base: () => Promise.resolve(BASE)})};
  }

  it('without a role, hands out the base credentials', async () => {
    const {registry} = providers();
    expect(await registry.provider({region: 'us-east-1'})()).toEqual(BASE);
    expect(fake.stats.count({operation: 'AssumeRole'})).toBe(0);
  });

  it('assumes a role once and serves it from cache to every caller, in every region', async () => {
    const before = fake.stats.count({operation: 'AssumeRole'});
    const {registry} = providers();
    const east = registry.provider({region: 'us-east-1', roleArn: ROLE_A});
    expect(registry.provider({region: 'us-east-1', roleArn: ROLE_A})).toBe(east);
    const all = await Promise.all([east(), east(), east(), registry.provider({region: 'eu-west-1', roleArn: ROLE_A})()]);
    expect(new Set(all.map((c) => c.accessKeyId)).size).toBe(1);
    expect(all[0]).toMatchObject({accessKeyId: expect.stringMatching(/^ASIA/), sessionToken: expect.any(String), expiration: expect.any(Date)});
    expect(fake.stats.count({operation: 'AssumeRole'}) - before).toBe(1);
  });

  it('renews assumed-role credentials five minutes before they expire', async () => {
    const {clock, registry} = providers();
    const provider = registry.provider({region: 'us-east-1', roleArn: ROLE_A});
    const first = await provider();
    const before = fake.stats.count({operation: 'AssumeRole'});
    const untilRefresh = first.expiration!.getTime() - 5 * MIN - clock.now();

    await clock.advance(untilRefresh - 1_000);
    expect((await provider()).accessKeyId).toBe(first.accessKeyId);
    expect(fake.stats.count({operation: 'AssumeRole'})).toBe(before);

    // STS counts a call when it arrives and answers later: the renewal's answer is 300 ms behind its count here.
    fake.latencyMs = (ctx) => (ctx.operation === 'AssumeRole' ? 300 : 0);
    try {
      await clock.advance(1_000);
      expect((await provider()).accessKeyId).toBe(first.accessKeyId); // still valid: served while renewing
      // The renewal is a real HTTP round trip to the fake; wait for its answer to reach the provider, not for time.
      await vi.waitFor(async () => expect((await provider()).accessKeyId).not.toBe(first.accessKeyId), ROUND_TRIP);
      // One renewal, however often the provider was asked while it ran.
      expect(fake.stats.count({operation: 'AssumeRole'})).toBe(before + 1);
    } finally {
      fake.latencyMs = undefined;
    }
  });

  it('keeps (role, external id) pairs apart and passes the external id', async () => {
    const {registry} = providers();
    const b = await registry.provider({region: 'us-east-1', roleArn: ROLE_B, externalId: 'ext-b'})();
    const a = await registry.provider({region: 'us-east-1', roleArn: ROLE_A})();
    expect(a.accessKeyId).not.toBe(b.accessKeyId);
    await expect(registry.provider({region: 'us-east-1', roleArn: ROLE_B, externalId: 'nope'})()).rejects.toThrow(
      /^cannot assume role arn:aws:iam::333333333333:role\/discovery-b: AccessDenied: /,
    );
  });

  it('signs EKS tokens with assumed-role credentials the fake STS accepts', async () => {
    const {registry} = providers();
    const credentials = await registry.provider({region: 'us-east-1', roleArn: ROLE_A})();
    const {token} = await mintEksToken({clusterName: 'prod', region: 'us-east-1', credentials, env: fake.env});
    const url = Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString();
    const res = await fetch(url, {headers: {'x-k8s-aws-id': 'prod'}});
    expect(await res.text()).toContain('assumed-role/discovery-a/kube-discovery');
  });

  it('reports missing base credentials as such, with a hint', async () => {
    const registry = new AwsCredentialProviders({env: fake.env, base: () => Promise.reject(new Error('Could not load credentials from any providers'))});
    const error = await registry.provider({region: 'us-east-1', roleArn: ROLE_A})().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AwsCredentialError);
    expect((error as Error).message).toMatch(/^cannot assume role .*: no AWS credentials found: Could not load credentials .*AWS_ACCESS_KEY_ID/);
  });

  it('awsCredentialProvider shares one registry per environment', () => {
    const env = {...fake.env};
    const a = awsCredentialProvider({region: 'us-east-1', roleArn: ROLE_A, env});
    expect(awsCredentialProvider({region: 'us-east-1', roleArn: ROLE_A, env})).toBe(a);
    expect(awsCredentialProvider({region: 'us-east-1', roleArn: ROLE_A, env: {...env}})).not.toBe(a);
  });
});
