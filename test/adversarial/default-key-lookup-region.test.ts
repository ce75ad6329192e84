/**
 * A new default key met while listing (a refreshed session of the planned account's role) has its
 * account looked up once (sources.ts #signingProvider), and every region's calls wait on that one
 * lookup. It went to the STS of whichever region's call met the key first: with an opt-in region
 * not enabled for the account among the matcher's, its STS refuses the key (InvalidClientTokenId),
 * and every region's listing of the cycle failed with it — a routine refresh costing a whole cycle
 * of stale entries. The lookup goes to the region the plan looked the account up in, which answered.
 */
import {EKSClient} from '@aws-sdk/client-eks';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';

const A = '111111111111';
const KEY_A = {accessKeyId: 'AKIALOOKUPREGIONA001', secretAccessKey: 'lookup-region-secret-a'};
/** A refreshed session of account A's own role: a new temporary key of the same account. */
const KEY_A2 = {accessKeyId: 'AKIALOOKUPREGIONA002', secretAccessKey: 'lookup-region-secret-a2'};
const HOME = 'us-east-1';
/** An opt-in region this account has not enabled: its STS does not know the account's keys. */
const OPT_IN = 'me-south-1';

let fake: FakeAws;
const clients: EKSClient[] = [];

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(A, {accessKeys: [KEY_A, KEY_A2]});
  world.addCluster(A, HOME, {name: 'alpha', tags: {env: 'prod'}});
  fake = await startFakeAws({world});
});

afterAll(async () => {
  for (const client of clients) client.destroy();
  await fake.close();
});

describe("a refreshed default key's account lookup", () => {
  it("goes to the region the plan looked the account up in, so a not-enabled opt-in region's STS fails no other region's listing", async () => {
    const session = (k: typeof KEY_A) => ({...k, sessionToken: `session-token-of-${k.accessKeyId}`, expiration: new Date(Date.now() + 60_000)});
    let key = session(KEY_A);
    const lookups: string[] = [];
    const sources = new AwsSources({
      callerAccount: async (credentials, region) => {
        const {accessKeyId} = await credentials();
        lookups.push(`${accessKeyId}@${region}`);
        // As STS answers in an opt-in region the account has not enabled.
        if (region === OPT_IN) throw Object.assign(new Error('The security token included in the request is invalid.'), {name: 'InvalidClientTokenId', $metadata: {httpStatusCode: 403}});
        return A;
      },
      credentialProvider: () => async () => key,
      makeEksClient: (region, credentials) => {
        // The real SDK client against the fake; the opt-in region's EKS refuses the keys as AWS does.
        const client = new EKSClient({region, endpoint: region === OPT_IN ? 'http://127.0.0.1:9' : fake.url, credentials, maxAttempts: 1});
        clients.push(client);
        return client;
      },
    });
    const matchers = [{types: ['eks' as const], regions: [HOME, OPT_IN]}];
    const planned = await sources.plan(matchers);
    expect(planned.fetchers.map((f) => f.source.id)).toEqual([`eks:${HOME}:${A}`, `eks:${OPT_IN}:${A}`]);

    // The chain refreshes between planning and listing; the opt-in region's call meets the new key first.
    key = session(KEY_A2);
    const [home, optIn] = planned.fetchers as [(typeof planned.fetchers)[number], (typeof planned.fetchers)[number]];
    const optInResult = optIn.fetch(new AbortController().signal);
    const homeResult = await home.fetch(new AbortController().signal);
    await optInResult;
    expect(homeResult).toMatchObject({ok: true, clusters: [expect.objectContaining({name: 'alpha', account: A})]});
    // One lookup of the new key, in the region the plan's lookup answered in.
    expect(lookups).toEqual([`${KEY_A.accessKeyId}@${HOME}`, `${KEY_A2.accessKeyId}@${HOME}`]);
  });
});
