import {readFileSync} from 'node:fs';
import {describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {InputError} from '../../src/core/errors.ts';
import {mintEksToken, type AwsCredentials} from '../../src/credentials/eks-token.ts';
import {stsEndpoint} from '../../src/credentials/sts-endpoint.ts';
import {verifyEksTokenRules} from './eks-token-rules.ts';

interface Vector {
  readonly name: string;
  readonly access_key_id: string;
  readonly secret_access_key: string;
  readonly session_token: string | null;
  readonly region: string;
  readonly cluster_id: string;
  readonly signing_time: string;
  readonly url: string;
  readonly token?: string;
  readonly expiration: string;
}

// A copy of /work/shared/vectors/eks-token.json, so the repository carries its own vectors.
const vectorsFile = new URL('eks-token-vectors.json', import.meta.url);
const {vectors} = JSON.parse(readFileSync(vectorsFile, 'utf8')) as {vectors: Vector[]};

const creds: AwsCredentials = {accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY'};
const secrets = {[creds.accessKeyId]: creds.secretAccessKey};
const start = Date.UTC(2024, 0, 1);

function urlOf(token: string): string {
  return Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString('utf8');
}

/** Re-encodes a token after editing its URL, as a forger or a naive signer would produce it. */
function withUrl(token: string, edit: (url: string) => string): string {
  return `k8s-aws-v1.${Buffer.from(edit(urlOf(token))).toString('base64url')}`;
}

describe('EKS token vectors', () => {
  it.each(vectors.map((v) => [v.name, v] as const))('%s: byte for byte', async (_name, v) => {
    const minted = await mintEksToken({
      clusterName: v.cluster_id,
      region: v.region,
      credentials: {
        accessKeyId: v.access_key_id,
        secretAccessKey: v.secret_access_key,
        ...(v.session_token === null ? {} : {sessionToken: v.session_token}),
      },
      clock: new FakeClock(new Date(v.signing_time)),
    });
    expect(urlOf(minted.token)).toBe(v.url);
    expect(minted.token).toBe(v.token ?? `k8s-aws-v1.${Buffer.from(v.url).toString('base64url')}`);
    expect(minted.token).not.toContain('=');
    expect(minted.expiresAt.toISOString()).toBe(new Date(v.expiration).toISOString());
    expect(minted).toMatchObject({region: v.region, clusterName: v.cluster_id});
  });
});

describe('mintEksToken', () => {
  it('reports expiry 14 minutes after the signed second', async () => {
    const minted = await mintEksToken({clusterName: 'c', region: 'us-east-1', credentials: creds, clock: new FakeClock(start + 999)});
    expect(minted.expiresAt.getTime()).toBe(start + 14 * 60_000);
  });

  it('reports the credentials expiry when they expire sooner', async () => {
    const expiration = new Date(start + 5 * 60_000);
    const minted = await mintEksToken({clusterName: 'c', region: 'us-east-1', credentials: {...creds, expiration}, clock: new FakeClock(start)});
    expect(minted.expiresAt).toEqual(expiration);
  });

  it('produces tokens the authenticator accepts for that cluster only, for 15 minutes', async () => {
    const {token} = await mintEksToken({clusterName: 'prod', region: 'eu-west-1', credentials: creds, clock: new FakeClock(start)});
    expect(verifyEksTokenRules(token, {clusterId: 'prod', now: start + 60_000, secrets})).toEqual({ok: true, accessKeyId: 'AKIDEXAMPLE', region: 'eu-west-1'});
    expect(verifyEksTokenRules(token, {clusterId: 'staging', now: start, secrets})).toMatchObject({ok: false, reason: expect.stringContaining('signature')});
    expect(verifyEksTokenRules(token, {clusterId: 'prod', now: start + 15 * 60_000 + 1, secrets})).toMatchObject({ok: false, reason: expect.stringContaining('expired')});
  });

  it('signs the session token so the authenticator accepts session credentials', async () => {
    const session = {...creds, sessionToken: 'FwoGZXIvYXdz/+=session'};
    const {token} = await mintEksToken({clusterName: 'prod', region: 'us-west-2', credentials: session, clock: new FakeClock(start)});
    expect(verifyEksTokenRules(token, {clusterId: 'prod', now: start, secrets}).ok).toBe(true);
    expect(verifyEksTokenRules(withUrl(token, (u) => u.replace('session', 'SESSION')), {clusterId: 'prod', now: start, secrets}).ok).toBe(false);
  });

  it('is refused when minted like a naive presign (long expiry, unsigned cluster header)', async () => {
    const {token} = await mintEksToken({clusterName: 'prod', region: 'us-west-2', credentials: creds, clock: new FakeClock(start)});
    const longLived = withUrl(token, (u) => u.replace('X-Amz-Expires=60', 'X-Amz-Expires=3600'));
    expect(verifyEksTokenRules(longLived, {clusterId: 'prod', now: start, secrets})).toMatchObject({ok: false, reason: expect.stringContaining('X-Amz-Expires')});
    const unsignedHeader = withUrl(token, (u) => u.replace('host%3Bx-k8s-aws-id', 'host'));
    expect(verifyEksTokenRules(unsignedHeader, {clusterId: 'prod', now: start, secrets})).toMatchObject({ok: false, reason: expect.stringContaining('x-k8s-aws-id')});
  });

  it('refuses a token that would exceed 4096 bytes', async () => {
    const huge = {...creds, sessionToken: 'x'.repeat(4000)};
    await expect(mintEksToken({clusterName: 'c', region: 'us-east-1', credentials: huge, clock: new FakeClock(start)})).rejects.toThrow(/at most 4096/);
  });
});

describe('STS endpoint of a token', () => {
  it.each([
    ['us-east-1', 'https://sts.us-east-1.amazonaws.com/'],
    ['cn-north-1', 'https://sts.cn-north-1.amazonaws.com.cn/'],
    ['us-gov-west-1', 'https://sts.us-gov-west-1.amazonaws.com/'],
    ['us-iso-east-1', 'https://sts.us-iso-east-1.c2s.ic.gov/'],
    ['us-isob-east-1', 'https://sts.us-isob-east-1.sc2s.sgov.gov/'],
  ])('%s → %s', async (region, expected) => {
    expect(stsEndpoint(region).href).toBe(expected);
    const {token} = await mintEksToken({clusterName: 'c', region, credentials: creds, clock: new FakeClock(start)});
    expect(urlOf(token).startsWith(`${expected}?Action=GetCallerIdentity&`)).toBe(true);
    expect(urlOf(token)).toContain(`%2F${region}%2Fsts%2Faws4_request`);
  });

  it('rejects something that is not a region before signing', async () => {
    await expect(mintEksToken({clusterName: 'c', region: 'useast1', credentials: creds})).rejects.toThrow(InputError);
    await expect(mintEksToken({clusterName: 'c', region: 'useast1', credentials: creds})).rejects.toThrow(/expected an AWS region .* got "useast1"/);
  });

  it('targets the STS endpoint the user configured, and only then', async () => {
    const env = {AWS_ENDPOINT_URL_STS: 'http://127.0.0.1:4566', AWS_ENDPOINT_URL: 'http://127.0.0.1:9999'};
    const {token} = await mintEksToken({clusterName: 'c', region: 'us-east-1', credentials: creds, env, clock: new FakeClock(start)});
    expect(urlOf(token)).toMatch(/^http:\/\/127\.0\.0\.1:4566\/\?Action=GetCallerIdentity&/);
    expect(stsEndpoint('us-east-1', {AWS_ENDPOINT_URL: 'https://sts.example.test'}).href).toBe('https://sts.example.test/');
    const ignored = {...env, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true'};
    expect(stsEndpoint('us-east-1', ignored).href).toBe('https://sts.us-east-1.amazonaws.com/');
    expect(stsEndpoint('us-east-1', {}).href).toBe('https://sts.us-east-1.amazonaws.com/');
  });
});
