/**
 * The default credentials' account is looked up per access key when a cycle is planned
 * (sources.ts), but the listings are signed later, with whatever keys the default chain gives
 * then. When the chain's keys change between the two (a refreshed session of another account's
 * role, a rewritten credentials file), a listing of account B was recorded as account A's: a
 * successful listing that no longer has A's clusters (they would be deregistered) and has B's
 * (registered under A's name, `bravo-eks-us-east-1-111111111111`). A source whose calls are signed
 * with other keys than those its account was looked up with must fail instead (its clusters stay).
 */
import {EKSClient} from '@aws-sdk/client-eks';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';

const A = '111111111111';
const B = '222222222222';
const KEY_A = {accessKeyId: 'AKIASWITCHACCOUNTA01', secretAccessKey: 'switch-secret-account-a'};
const KEY_B = {accessKeyId: 'AKIASWITCHACCOUNTB01', secretAccessKey: 'switch-secret-account-b'};
/** A refreshed session of account A's own role: a new temporary key of the same account. */
const KEY_A2 = {accessKeyId: 'AKIASWITCHACCOUNTA02', secretAccessKey: 'switch-secret-account-a2'};
const REGION = 'us-east-1';

let fake: FakeAws;
const clients: EKSClient[] = [];

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(A, {accessKeys: [KEY_A, KEY_A2]});
  world.addAccount(B, {accessKeys: [KEY_B]});
  world.addCluster(A, REGION, {name: 'alpha', tags: {env: 'prod'}});
  world.addCluster(B, REGION, {name: 'bravo', tags: {env: 'prod'}});
  fake = await startFakeAws({world});
});

afterAll(async () => {
  for (const client of clients) client.destroy();
  await fake.close();
});

function sourcesOf(current: () => {accessKeyId: string; secretAccessKey: string}, lookups: string[]): AwsSources {
  const accounts: Record<string, string> = {[KEY_A.accessKeyId]: A, [KEY_A2.accessKeyId]: A, [KEY_B.accessKeyId]: B};
  return new AwsSources({
    callerAccount: async (credentials) => {
      const {accessKeyId} = await credentials();
      lookups.push(accessKeyId);
      return accounts[accessKeyId] ?? '000000000000';
    },
    credentialProvider: () => async () => current(),
    makeEksClient: (region, credentials) => {
      const client = new EKSClient({region, endpoint: fake.url, credentials, maxAttempts: 1});
      clients.push(client);
      return client;
    },
  });
}

describe('default credentials that change to another account between planning and listing', () => {
  it("fail the source of the account planned, instead of listing the other account's clusters as its own", async () => {
    // Session credentials near their end, as a refreshed role session's are: the SDK asks the chain again on each call.
    const session = (k: typeof KEY_A) => ({...k, sessionToken: `session-token-of-${k.accessKeyId}`, expiration: new Date(Date.now() + 60_000)});
    let key = session(KEY_A);
    const accounts: Record<string, string> = {[KEY_A.accessKeyId]: A, [KEY_B.accessKeyId]: B};
    const sources = new AwsSources({
      callerAccount: async (credentials) => accounts[(await credentials()).accessKeyId] ?? '000000000000',
      credentialProvider: () => async () => key,
      makeEksClient: (region, credentials) => {
        // The real SDK client against the fake (which checks each signature and answers as the key's account).
        const client = new EKSClient({region, endpoint: fake.url, credentials, maxAttempts: 1});
        clients.push(client);
        return client;
      },
    });
    const matchers = [{types: ['eks' as const], regions: [REGION]}];

    const first = await sources.plan(matchers);
    expect(first.fetchers.map((f) => f.source.id)).toEqual([`eks:${REGION}:${A}`]);
    const listed = await (first.fetchers[0] as (typeof first.fetchers)[number]).fetch(new AbortController().signal);
    expect(listed).toMatchObject({ok: true, clusters: [expect.objectContaining({name: 'alpha', account: A})]});

    // The next cycle is planned with A's keys; the chain then hands out B's before the listing.
    const second = await sources.plan(matchers);
    expect(second.fetchers.map((f) => f.source.id)).toEqual([`eks:${REGION}:${A}`]);
    key = session(KEY_B);
    const result = await (second.fetchers[0] as (typeof second.fetchers)[number]).fetch(new AbortController().signal);
    // Not a listing of A: before the fix it succeeded with no cluster (bravo's description named
    // account B, so it was set aside as malformed), so alpha would have been deregistered.
    expect(result.clusters.map((c) => c.name)).not.toContain('bravo');
    expect(result).toMatchObject({ok: false, error: {operation: 'ListClusters'}});

    // The cycle after is planned with B's keys: B's own source lists bravo.
    const third = await sources.plan(matchers);
    expect(third.fetchers.map((f) => f.source.id)).toEqual([`eks:${REGION}:${B}`]);
    const own = await (third.fetchers[0] as (typeof third.fetchers)[number]).fetch(new AbortController().signal);
    expect(own).toMatchObject({ok: true, clusters: [expect.objectContaining({name: 'bravo', account: B})]});
  });

  it("a refreshed session of the planned account's own role (a new temporary key) keeps listing: its account is looked up once, and it is the same", async () => {
    const session = (k: typeof KEY_A) => ({...k, sessionToken: `session-token-of-${k.accessKeyId}`, expiration: new Date(Date.now() + 60_000)});
    let key = session(KEY_A);
    const lookups: string[] = [];
    const sources = sourcesOf(() => key, lookups);
    const matchers = [{types: ['eks' as const], regions: [REGION]}];
    const planned = await sources.plan(matchers);
    key = session(KEY_A2);
    const result = await (planned.fetchers[0] as (typeof planned.fetchers)[number]).fetch(new AbortController().signal);
    expect(result).toMatchObject({ok: true, clusters: [expect.objectContaining({name: 'alpha', account: A})]});
    // The next plan knows the new key already.
    expect((await sources.plan(matchers)).fetchers.map((f) => f.source.id)).toEqual([`eks:${REGION}:${A}`]);
    expect(lookups).toEqual([KEY_A.accessKeyId, KEY_A2.accessKeyId]);
  });
});
