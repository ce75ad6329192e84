/**
 * The lean SDK clients (src/clouds/aws/lean-sdk.ts): one signer per client, a remembered user
 * agent, no logger or recursion-detection middleware. What a user would notice if they were
 * wrong: a call signed with another account's keys (a region client is shared by every member
 * account of an organization), a signature AWS rejects, a user agent that changes or vanishes.
 */
import {AsyncLocalStorage} from 'node:async_hooks';
import http from 'node:http';
import type {AddressInfo} from 'node:net';
import {EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import {HttpRequest} from '@smithy/protocol-http';
import {SignatureV4} from '@smithy/signature-v4';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {NodeSha256} from '../../src/clouds/aws/sha256.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';

const MGMT = '111111111111';
const MGMT_KEY = {accessKeyId: 'AKIALEANMGMT00000001', secretAccessKey: 'lean-mgmt-secret'};
const ROLE = 'kube-discovery';
const REGIONS = ['us-east-1', 'eu-west-1'];
/** Member accounts, each with clusters whose names say whose they are. */
const MEMBERS = Array.from({length: 8}, (_, i) => String(300_000_000_000 + i * 1_111));
/** Two accounts with long-lived keys, for calls made on one client under changing identities. */
const ALICE = {account: '222222222222', key: {accessKeyId: 'AKIALEANALICE0000001', secretAccessKey: 'alice-secret'}};
const BOB = {account: '333333333333', key: {accessKeyId: 'AKIALEANBOB000000001', secretAccessKey: 'bob-secret'}};

let fake: FakeAws;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(MGMT, {accessKeys: [MGMT_KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  const unit = org.addUnit('members');
  for (const account of MEMBERS) {
    org.addAccount(account, {parent: unit});
    world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: [MGMT]}]});
    for (const region of REGIONS) for (const n of ['a', 'b', 'c']) world.addCluster(account, region, {name: `of-${account}-${n}`, tags: {owner: account}});
  }
  for (const {account, key} of [ALICE, BOB]) {
    world.addAccount(account, {accessKeys: [key]});
    for (let i = 0; i < 3; i++) world.addCluster(account, 'us-east-1', {name: `of-${account}-${i}`});
  }
  // Latency keeps many calls of different accounts in flight on each shared client at once.
  fake = await startFakeAws({world, latencyMs: 15, pageSize: 100});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

describe('region clients shared by the member accounts of an organization', () => {
  it('every call is signed as the account it is made for, on every cycle: no cluster is ever listed under another account', async () => {
    const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(MGMT_KEY)});
    const sources = new AwsSources({credentialProvider: (role) => providers.provider(role), perRegionConcurrency: 10});
    const matcher = {types: ['eks'], regions: REGIONS, assume_role_name: ROLE, organization: {organization_id: org.id, organizational_units: {include: ['*'], exclude: []}}};
    for (let cycle = 0; cycle < 3; cycle++) {
      fake.stats.reset();
      const planned = await sources.plan([matcher]);
      const signal = new AbortController().signal;
      // Every source of every account at once: one region client carries 8 accounts' calls interleaved.
      const results = await Promise.all(planned.fetchers.map((f) => f.fetch(signal)));
      expect(results.filter((r) => !r.ok).map((r) => r.error)).toEqual([]);
      expect(results).toHaveLength(MEMBERS.length * REGIONS.length);
      for (const result of results) {
        expect(result.clusters.map((c) => c.name).sort()).toEqual(['a', 'b', 'c'].map((n) => `of-${result.source.account}-${n}`));
        expect(result.clusters.every((c) => c.account === result.source.account)).toBe(true);
      }
      // The fake verified each signature and saw each account's own calls: one listing and (after
      // the first cycle) one tag read per region, three describes per region on the first.
      for (const account of MEMBERS) {
        expect(fake.stats.count({operation: 'ListClusters', account})).toBe(REGIONS.length);
        if (cycle === 0) expect(fake.stats.count({operation: 'DescribeCluster', account})).toBe(3 * REGIONS.length);
        else expect(fake.stats.count({operation: 'GetResources', account})).toBe(REGIONS.length);
      }
      expect(fake.stats.calls.filter((c) => c.service !== 'sts' && c.status !== 200)).toEqual([]);
    }
  });

  it('one lean client used under two identities at once signs each call with the identity it runs under', async () => {
    const identity = new AsyncLocalStorage<{accessKeyId: string; secretAccessKey: string}>();
    const credentials = Object.assign(() => Promise.resolve(identity.getStore() ?? {accessKeyId: 'none', secretAccessKey: 'none'}), {memoized: true});
    const client = leanSdkClient(new EKSClient({region: 'us-east-1', credentials, sha256: NodeSha256, maxAttempts: 1}));
    try {
      fake.stats.reset();
      const calls = Array.from({length: 40}, (_, i) => (i % 3 === 0 ? ALICE : BOB));
      const listed = await Promise.all(calls.map((who) => identity.run(who.key, () => client.send(new ListClustersCommand({})))));
      listed.forEach((out, i) => expect(out.clusters?.sort()).toEqual([0, 1, 2].map((n) => `of-${calls[i]?.account}-${n}`)));
      expect(fake.stats.count({operation: 'ListClusters', accessKeyId: ALICE.key.accessKeyId, status: 200})).toBe(14);
      expect(fake.stats.count({operation: 'ListClusters', accessKeyId: BOB.key.accessKeyId, status: 200})).toBe(26);
    } finally {
      client.destroy();
    }
  });

  it('a key rotated under the same access key id is used as soon as the provider returns it (no signer state outlives a call)', async () => {
    let key = {accessKeyId: ALICE.key.accessKeyId, secretAccessKey: 'not-alice-secret'};
    const client = leanSdkClient(new EKSClient({region: 'us-east-1', credentials: Object.assign(() => Promise.resolve(key), {memoized: true}), sha256: NodeSha256, maxAttempts: 1}));
    try {
      await expect(client.send(new ListClustersCommand({}))).rejects.toThrow();
      key = ALICE.key;
      const out = await client.send(new ListClustersCommand({}));
      expect(out.clusters).toHaveLength(3);
    } finally {
      client.destroy();
    }
  });
});

describe('the signing keys of a lean client', () => {
  it('derives each (credentials, day, region, service) key once, however many identities sign, and signs as the SDK does', async () => {
    // More identities than any bounded cache shared by all of them held (an organization signs with ~34,000).
    const identities = Array.from({length: 4_200}, (_, i) => ({accessKeyId: `AKIAMANY${String(i).padStart(8, '0')}`, secretAccessKey: `secret-${i}`, sessionToken: `token-${i}`}));
    const current = new AsyncLocalStorage<(typeof identities)[number]>();
    let derivations = 0;
    // The SDK derives a key with HMACs keyed by the secret itself (its cache key, then "AWS4" + secret).
    class Counting extends NodeSha256 {
      constructor(secret?: ConstructorParameters<typeof NodeSha256>[0]) {
        super(secret);
        if (typeof secret === 'string' && secret.startsWith('AWS4')) derivations++;
      }
    }
    const client = leanSdkClient(new EKSClient({region: 'us-east-1', credentials: Object.assign(() => Promise.resolve(current.getStore() ?? ALICE.key), {memoized: true}), sha256: Counting, maxAttempts: 1}));
    const signer = (await (client.config as unknown as {signer: () => Promise<SignatureV4>}).signer());
    const signingDate = new Date('2026-11-23T12:00:00Z');
    const request = (): HttpRequest => new HttpRequest({method: 'GET', protocol: 'https:', hostname: 'eks.us-east-1.amazonaws.com', path: '/clusters', headers: {host: 'eks.us-east-1.amazonaws.com'}});
    const signAll = async (): Promise<string[]> => {
      const out: string[] = [];
      for (const identity of identities) out.push((await current.run(identity, () => signer.sign(request(), {signingDate}))).headers['authorization'] ?? '');
      return out;
    };
    try {
      const first = await signAll();
      expect(derivations).toBe(identities.length);
      const second = await signAll();
      expect(derivations).toBe(identities.length);
      expect(second).toEqual(first);
      for (const i of [0, 2_100, 4_199]) {
        const identity = identities[i] as (typeof identities)[number];
        const plain = new SignatureV4({credentials: identity, region: 'us-east-1', service: 'eks', sha256: NodeSha256});
        expect(first[i]).toBe((await plain.sign(request(), {signingDate})).headers['authorization']);
      }
      // A secret rotated under the same credentials object is derived anew and signs with the new secret.
      const rotated = identities[0] as (typeof identities)[number];
      rotated.secretAccessKey = 'rotated-secret';
      const after = (await current.run(rotated, () => signer.sign(request(), {signingDate}))).headers['authorization'];
      expect(derivations).toBe(identities.length + 1);
      expect(after).toBe((await new SignatureV4({credentials: {...rotated}, region: 'us-east-1', service: 'eks', sha256: NodeSha256}).sign(request(), {signingDate})).headers['authorization']);
    } finally {
      client.destroy();
    }
  });
});

describe('the user agent of a lean client', () => {
  let server: http.Server;
  const seen: {userAgent: string | undefined; amzUserAgent: string | undefined; recursion: string | undefined}[] = [];
  let url = '';

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.push({userAgent: req.headers['user-agent'], amzUserAgent: req.headers['x-amz-user-agent'] as string | undefined, recursion: req.headers['x-amzn-trace-id'] as string | undefined});
      req.resume();
      req.on('end', () => res.writeHead(200, {'content-type': 'application/json'}).end('{"clusters":[]}'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('is the SDK’s own on the first call and the same on every later one, as a client without the change sends it', async () => {
    const key = {accessKeyId: 'AKIAUA', secretAccessKey: 's'};
    const plain = new EKSClient({region: 'us-east-1', endpoint: url, credentials: key, maxAttempts: 1});
    const lean = leanSdkClient(new EKSClient({region: 'us-east-1', endpoint: url, credentials: key, maxAttempts: 1}));
    try {
      seen.length = 0;
      await plain.send(new ListClustersCommand({}));
      for (let i = 0; i < 3; i++) await lean.send(new ListClustersCommand({}));
      const [sdk, ...ours] = seen;
      expect(sdk?.userAgent).toMatch(/^aws-sdk-js\/\S+ .*api\/eks#/);
      expect(sdk?.amzUserAgent).toMatch(/^aws-sdk-js\//);
      expect(ours).toHaveLength(3);
      for (const headers of ours) expect(headers).toEqual(sdk);
    } finally {
      plain.destroy();
      lean.destroy();
    }
  });
});
