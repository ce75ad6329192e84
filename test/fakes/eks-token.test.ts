/**
 * The EKS token verifier used by the fake Kubernetes API server, and the presigned
 * GetCallerIdentity on the fake STS: reference tokens from botocore verify, smithy-presigned
 * URLs verify, and anything aws-iam-authenticator would refuse is refused.
 */
import {Hash} from '@smithy/hash-node';
import {SignatureV4} from '@smithy/signature-v4';
import {describe, expect, it} from 'vitest';
import {FakeAwsWorld, startFakeAws, verifyEksToken} from './aws-fakes.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAVERIFIER00000001', secretAccessKey: 'verifier-secret'};
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const MIN = 60_000;

/** Reference vectors (../../../shared/vectors/eks-token.json), produced by botocore. */
const VECTORS = [
  {
    name: 'A: static credentials',
    key: {accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY'},
    cluster: 'my-cluster',
    signedAt: Date.UTC(2024, 0, 1),
    url: 'https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240101%2Fus-west-2%2Fsts%2Faws4_request&X-Amz-Date=20240101T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Signature=9820522955b8790d1291fa15ce3ec3c7efba9e7cd15d38dc020d10f18b3c84fb',
  },
  {
    name: 'S: session credentials',
    key: {accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', sessionToken: 'SESSIONTOKEN/+='},
    cluster: 'my-cluster',
    signedAt: Date.UTC(2024, 0, 1),
    url: 'https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240101%2Fus-west-2%2Fsts%2Faws4_request&X-Amz-Date=20240101T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Security-Token=SESSIONTOKEN%2F%2B%3D&X-Amz-Signature=8e4a61d4a17ca6442cb009bbe6ef1d1ad40f4e476896a2d5ee5b9a33efe3d0d0',
  },
  {
    name: 'B: aws-iam-authenticator golden',
    key: {accessKeyId: 'ASIAR2TG44V6AS3ZZE7C', secretAccessKey: '4KD5cntGcVmLWRdF5wvNRuzNL5Qxmp6OKVY6Fz/Q'},
    cluster: 'test-cluster',
    signedAt: Date.UTC(2023, 3, 28),
    url: 'https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAR2TG44V6AS3ZZE7C%2F20230428%2Fus-west-2%2Fsts%2Faws4_request&X-Amz-Date=20230428T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Signature=e211dba77aba9dc44b0b6be38b8eaad092599c5157f6314444c5b9d85747f5ce',
  },
];

const toToken = (url: string): string => `k8s-aws-v1.${Buffer.from(url).toString('base64url')}`;

/** Presigns GetCallerIdentity with smithy, as the token minter does; `host` may be a test server. */
async function presignUrl(
  creds: {accessKeyId: string; secretAccessKey: string; sessionToken?: string},
  opts: {cluster: string; signedAt?: number; expiresIn?: number; host?: string; protocol?: string; region?: string},
): Promise<string> {
  const region = opts.region ?? 'us-west-2';
  const host = opts.host ?? `sts.${region}.amazonaws.com`;
  const signer = new SignatureV4({credentials: creds, region, service: 'sts', sha256: Hash.bind(null, 'sha256')});
  const signed = await signer.presign(
    {method: 'GET', protocol: 'https:', hostname: host, path: '/', query: {Action: 'GetCallerIdentity', Version: '2011-06-15'}, headers: {'host': host, 'x-k8s-aws-id': opts.cluster}},
    {signingDate: new Date(opts.signedAt ?? T0), expiresIn: opts.expiresIn ?? 60},
  );
  const query = Object.entries(signed.query ?? {})
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  return `${opts.protocol ?? 'https'}://${host}/?${query}`;
}

function newWorld(): FakeAwsWorld {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY], roles: [{arn: `arn:aws:iam::${ACCOUNT}:role/path/viewer`, trust: [ACCOUNT]}]});
  return world;
}

describe('verifyEksToken', () => {
  it.each(VECTORS)('accepts the reference token $name for 15 minutes, for its cluster only', async (v) => {
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [v.key]});
    const token = toToken(v.url);
    expect(await verifyEksToken(world, token, {clusterName: v.cluster, now: v.signedAt + 14 * MIN})).toMatchObject({
      ok: true,
      account: ACCOUNT,
      accessKeyId: v.key.accessKeyId,
    });
    expect(await verifyEksToken(world, token, {clusterName: v.cluster, now: v.signedAt + 15 * MIN + 1000})).toMatchObject({ok: false});
    expect(await verifyEksToken(world, token, {clusterName: 'other-cluster', now: v.signedAt + MIN})).toMatchObject({
      ok: false,
      reason: expect.stringContaining('signature') as unknown,
    });
  });

  it('accepts a smithy-presigned token and refuses it once altered', async () => {
    const world = newWorld();
    const url = await presignUrl(KEY, {cluster: 'prod'});
    expect(await verifyEksToken(world, toToken(url), {clusterName: 'prod', now: T0 + MIN})).toMatchObject({
      ok: true,
      arn: `arn:aws:iam::${ACCOUNT}:user/fake-user`,
    });
    const tampered = url.replace('X-Amz-Date=20260101T120000Z', 'X-Amz-Date=20260101T120001Z');
    expect(tampered).not.toBe(url);
    expect(await verifyEksToken(world, toToken(tampered), {clusterName: 'prod', now: T0 + MIN})).toMatchObject({ok: false});
    const wrongSecret = await presignUrl({...KEY, secretAccessKey: 'guess'}, {cluster: 'prod'});
    expect(await verifyEksToken(world, toToken(wrongSecret), {clusterName: 'prod', now: T0 + MIN})).toMatchObject({ok: false});
  });

  it('refuses what aws-iam-authenticator refuses, even when correctly signed', async () => {
    const world = newWorld();
    const check = async (token: string): Promise<string> => {
      const verdict = await verifyEksToken(world, token, {clusterName: 'prod', now: T0 + MIN});
      return verdict.ok ? 'accepted' : verdict.reason;
    };
    const good = await presignUrl(KEY, {cluster: 'prod'});
    expect(await check(toToken(good))).toBe('accepted');
    expect(await check(toToken(await presignUrl(KEY, {cluster: 'prod', expiresIn: 3600})))).toMatch(/X-Amz-Expires/);
    expect(await check(toToken(await presignUrl(KEY, {cluster: 'prod', host: 'sts.evil.example.com'})))).toMatch(/not an STS endpoint/);
    expect(await check(toToken(await presignUrl(KEY, {cluster: 'prod', protocol: 'http'})))).toMatch(/https/);
    expect(await check(toToken(await presignUrl(KEY, {cluster: 'prod', host: 'sts.us-east-1.amazonaws.com'})))).toMatch(/does not match STS host/);
    expect(await check(toToken(`${good}&Action=GetCallerIdentity`))).toMatch(/more than once/);
    expect(await check(toToken(`${good}&X-Amz-Foo=1`))).toMatch(/not allowed/);
    expect(await check(toToken(good.replace('Action=GetCallerIdentity', 'Action=AssumeRole')))).toMatch(/Action/);
    expect(await check(`k8s-aws-v2.${toToken(good).slice(11)}`)).toMatch(/k8s-aws-v1/);
    expect(await check(`${toToken(good)}==`)).toMatch(/padding/);
    expect(await check(`k8s-aws-v1.${'A'.repeat(4096)}`)).toMatch(/4096/);
  });

  it('maps an assumed-role session to its role ARN and refuses it after the session expires', async () => {
    const world = newWorld();
    const session = world.issueRoleCredentials(`arn:aws:iam::${ACCOUNT}:role/path/viewer`, 'probe', 900);
    // Signed 10 minutes into a 15-minute session: the token outlives the session.
    const signedAt = world.now() + 10 * MIN;
    const token = toToken(await presignUrl({accessKeyId: session.accessKeyId, secretAccessKey: session.secretAccessKey, sessionToken: session.sessionToken ?? ''}, {cluster: 'prod', signedAt}));
    expect(await verifyEksToken(world, token, {clusterName: 'prod', now: signedAt + MIN})).toMatchObject({
      ok: true,
      arn: `arn:aws:sts::${ACCOUNT}:assumed-role/viewer/probe`,
      principalArn: `arn:aws:iam::${ACCOUNT}:role/viewer`,
    });
    expect(await verifyEksToken(world, token, {clusterName: 'prod', now: signedAt + 6 * MIN})).toMatchObject({
      ok: false,
      reason: expect.stringContaining('expired') as unknown,
    });
  });
});

describe('presigned GetCallerIdentity on the fake STS', () => {
  it('answers the presigned GET when x-k8s-aws-id matches what was signed', async () => {
    const world = newWorld();
    const fake = await startFakeAws({world});
    try {
      const {host} = new URL(fake.url);
      const url = (await presignUrl(KEY, {cluster: 'prod', host, signedAt: world.now()})).replace('https://', 'http://');
      const res = await fetch(url, {headers: {'x-k8s-aws-id': 'prod'}});
      expect(res.status).toBe(200);
      expect(await res.text()).toContain(`<Account>${ACCOUNT}</Account>`);

      const wrong = await fetch(url, {headers: {'x-k8s-aws-id': 'other'}});
      expect(wrong.status).toBe(403);
      expect(await wrong.text()).toContain('<Code>SignatureDoesNotMatch</Code>');
      expect(fake.stats.find({service: 'sts', operation: 'GetCallerIdentity'}).map((c) => c.status)).toEqual([200, 403]);
    } finally {
      await fake.close();
    }
  });
});
