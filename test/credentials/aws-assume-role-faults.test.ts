/**
 * AssumeRole answers that carry no usable credentials (a well-formed 200 without keys, an error
 * status, a reset connection) fail the mint and cache nothing: the next call asks STS again. Roles
 * of many accounts are assumed through one shared STS client, so one role's failure must not
 * leak into another's.
 */
import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest';
import {assumedRoleMatches, AwsCredentialError, AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {startFakeAws, type FakeAws} from '../fakes/aws-server.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';
import {answer, awsClassifier, startFaultProxy, when, type FaultProxy} from '../fakes/faults.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {redactText} from '../../src/observability/redact.ts';

const BASE = {accessKeyId: 'AKIDASSUMEFAULTS0001', secretAccessKey: 'assume-faults-secret'};
const ROLE_A = 'arn:aws:iam::222222222222:role/discovery';
const ROLE_B = 'arn:aws:iam::333333333333:role/discovery';
const NO_KEYS = `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><AssumedRoleUser><Arn>${ROLE_A}</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser></AssumeRoleResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>`;

let fake: FakeAws;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount('111111111111', {accessKeys: [BASE]});
  world.addAccount('222222222222', {roles: [{arn: ROLE_A, trust: ['111111111111']}]});
  world.addAccount('333333333333', {roles: [{arn: ROLE_B, trust: ['111111111111']}]});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
});

afterAll(async () => {
  await proxy.close();
  await fake.close();
});

function registry(): AwsCredentialProviders {
  const env: Record<string, string> = {AWS_MAX_ATTEMPTS: '1'};
  for (const key of Object.keys(fake.env)) env[key] = proxy.url;
  return new AwsCredentialProviders({env, base: () => Promise.resolve(BASE)});
}

describe('AssumeRole through the shared STS client', () => {
  it('fails on a 200 answer without credentials, caches nothing, and succeeds once STS answers properly', async () => {
    const providers = registry();
    const role = providers.provider({region: 'us-east-1', roleArn: ROLE_A});
    proxy.fault = when({operation: 'AssumeRole'}, answer(200, NO_KEYS, {'content-type': 'text/xml'}));
    const error = await role().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AwsCredentialError);
    expect((error as Error).message).toMatch(/^cannot assume role arn:aws:iam::222222222222:role\/discovery: InvalidResponse: /);
    proxy.fault = undefined;
    expect((await role()).accessKeyId).toMatch(/^ASIA/);
  });

  it('fails on an error status, then assumes each role as itself through the same client', async () => {
    const providers = registry();
    proxy.fault = when({operation: 'AssumeRole'}, answer(503, '<ErrorResponse><Error><Code>ServiceUnavailable</Code><Message>down</Message></Error></ErrorResponse>', {'content-type': 'text/xml'}));
    await expect(providers.provider({region: 'us-east-1', roleArn: ROLE_A})()).rejects.toThrow(/^cannot assume role arn:aws:iam::222222222222:role\/discovery: /);
    proxy.fault = undefined;
    const [a, b] = await Promise.all([providers.provider({region: 'us-east-1', roleArn: ROLE_A})(), providers.provider({region: 'us-east-1', roleArn: ROLE_B})()]);
    expect(a.accessKeyId).not.toBe(b.accessKeyId);
  });

  it('fails on a reset connection and caches nothing', async () => {
    const providers = registry();
    const role = providers.provider({region: 'us-east-1', roleArn: ROLE_B});
    proxy.fault = when({operation: 'AssumeRole'}, {kind: 'reset'});
    await expect(role()).rejects.toBeInstanceOf(AwsCredentialError);
    proxy.fault = undefined;
    expect((await role()).accessKeyId).toMatch(/^ASIA/);
  });
});

describe('assumedRoleMatches', () => {
  it('accepts a session of the role asked for (a role path is not in its sessions) and nothing else', () => {
    expect(assumedRoleMatches(ROLE_A, 'arn:aws:sts::222222222222:assumed-role/discovery/kube-discovery')).toBe(true);
    expect(assumedRoleMatches('arn:aws:iam::222222222222:role/team/eks/discovery', 'arn:aws:sts::222222222222:assumed-role/discovery/s')).toBe(true);
    expect(assumedRoleMatches('arn:aws-cn:iam::222222222222:role/discovery', 'arn:aws-cn:sts::222222222222:assumed-role/discovery/s')).toBe(true);
    // IAM role names are unique without regard to case: the session spells it as IAM stored it.
    expect(assumedRoleMatches('arn:aws:iam::222222222222:role/Discovery', 'arn:aws:sts::222222222222:assumed-role/discovery/s')).toBe(true);
    for (const other of [
      'arn:aws:sts::333333333333:assumed-role/discovery/kube-discovery',
      'arn:aws:sts::222222222222:assumed-role/other/kube-discovery',
      'arn:aws-us-gov:sts::222222222222:assumed-role/discovery/kube-discovery',
      'arn:aws:iam::222222222222:role/discovery',
      '',
      undefined,
    ]) {
      expect(assumedRoleMatches(ROLE_A, other)).toBe(false);
    }
  });
});

describe('AssumeRole answers with an Expiration that cannot be right', () => {
  /** A well-formed answer for ROLE_A whose credentials expire at `expiration` (as written on the wire). */
  const withExpiration = (expiration: string, secret = 'expiry-fault-secret'): string =>
    `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>` +
    `<AssumedRoleUser><Arn>arn:aws:sts::222222222222:assumed-role/discovery/kube-discovery</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>` +
    `<Credentials><AccessKeyId>ASIAEXPIRYFAULT00001</AccessKeyId><SecretAccessKey>${secret}</SecretAccessKey><SessionToken>${secret}-session</SessionToken>` +
    `<Expiration>${expiration}</Expiration></Credentials></AssumeRoleResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>`;
  const assumeCalls = (): number => proxy.seen.filter((s) => s.req.operation === 'AssumeRole').length;

  for (const [what, expiration] of [
    ['already past', () => new Date(Date.now() - 60_000).toISOString()],
    ['unparseable', () => 'not-a-date'],
  ] as const) {
    it(`an Expiration ${what} fails the mint (nothing cached), instead of a new AssumeRole for every signed call`, async () => {
      const providers = registry();
      const role = providers.provider({region: 'us-east-1', roleArn: ROLE_A});
      proxy.fault = when({operation: 'AssumeRole'}, answer(200, withExpiration(expiration()), {'content-type': 'text/xml'}));
      try {
        await expect(role()).rejects.toBeInstanceOf(AwsCredentialError);
      } finally {
        proxy.fault = undefined;
      }
      const before = assumeCalls();
      const good = await role();
      expect(good.accessKeyId).toMatch(/^ASIA/);
      expect(good.accessKeyId).not.toBe('ASIAEXPIRYFAULT00001');
      await role();
      expect(assumeCalls()).toBe(before + 1);
    });
  }

  it('an Expiration further away than the hour asked for is held for that hour only, then renewed', async () => {
    const clock = new FakeClock(Date.now());
    const env: Record<string, string> = {AWS_MAX_ATTEMPTS: '1'};
    for (const key of Object.keys(fake.env)) env[key] = proxy.url;
    const role = new AwsCredentialProviders({env, clock, base: () => Promise.resolve(BASE)}).provider({region: 'us-east-1', roleArn: ROLE_A});
    proxy.fault = when({operation: 'AssumeRole'}, answer(200, withExpiration('2100-01-01T00:00:00Z'), {'content-type': 'text/xml'}));
    try {
      expect((await role()).expiration?.getTime()).toBeLessThanOrEqual(clock.now() + 3_600_000);
    } finally {
      proxy.fault = undefined;
    }
    // Near the end of the hour STS grants without DurationSeconds, they are renewed (in the
    // background, the old ones served meanwhile), not used until 2100.
    await clock.advance(56 * 60_000);
    await role();
    await vi.waitFor(async () => expect((await role()).accessKeyId).not.toBe('ASIAEXPIRYFAULT00001'), ROUND_TRIP);
  });

  it('renewals refused for their Expiration leave the credentials still served redacted by value', async () => {
    // Values no pattern recognises as AWS keys: only redaction by value hides them.
    const clock = new FakeClock(Date.now());
    const env: Record<string, string> = {AWS_MAX_ATTEMPTS: '1'};
    for (const key of Object.keys(fake.env)) env[key] = proxy.url;
    const role = new AwsCredentialProviders({env, clock, base: () => Promise.resolve(BASE)}).provider({region: 'us-east-1', roleArn: ROLE_A});
    const xml = {'content-type': 'text/xml'};
    proxy.fault = when({operation: 'AssumeRole'}, answer(200, withExpiration(new Date(clock.now() + 3_600_000).toISOString(), 'served-plain-secret'), xml));
    let refused = 0;
    try {
      const served = await role();
      expect(served.secretAccessKey).toBe('served-plain-secret');
      // Near the end of the hour, two renewals whose answers had expired already.
      proxy.fault = (req) => (req.operation === 'AssumeRole' ? answer(200, withExpiration(new Date(clock.now() - 60_000).toISOString(), `refused-plain-secret-${++refused}`), xml) : undefined);
      await clock.advance(56 * 60_000);
      for (let i = 1; i <= 2; i++) {
        await clock.advance(61_000);
        expect((await role()).secretAccessKey).toBe('served-plain-secret');
        await vi.waitFor(() => expect(refused).toBe(i), ROUND_TRIP);
      }
      expect((await role()).secretAccessKey).toBe('served-plain-secret');
      const line = redactText(`signed with ${served.secretAccessKey} and ${served.sessionToken ?? ''}`);
      expect(line).not.toContain('served-plain-secret');
    } finally {
      proxy.fault = undefined;
    }
  });
});
