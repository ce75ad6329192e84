/**
 * The direct way of the short reads (src/clouds/aws/direct-read.ts): once a client's first call
 * of ListClusters or GetResources showed the request, later calls skip the SDK's middleware
 * stack and drive the client's own retry strategy and SigV4 signer in a small loop. What a user
 * of the SDK would notice must not change: the same listings (signed as the account, checked by
 * the fake), throttling and 5xx retried by the client's strategy with every attempt counted by
 * the metrics middleware, the SDK's error after the last attempt, a 2xx naming an error type
 * refused, abort, and the SDK's clock-skew correction (a server whose clock is 20 minutes ahead
 * refuses the first attempt as skewed; the retry is signed with the corrected clock and answers).
 */
import http from 'node:http';
import type {AddressInfo} from 'node:net';
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import {GetResourcesCommand, ResourceGroupsTaggingAPIClient} from '@aws-sdk/client-resource-groups-tagging-api';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {listClusterNames} from '../../src/clouds/aws/eks-fetcher.ts';
import {awsFailure} from '../../src/clouds/aws/errors.ts';
import {describeClusterOperation, getResourcesOperation, leanReads, listClustersOperation} from '../../src/clouds/aws/lean-read.ts';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {NodeSha256} from '../../src/clouds/aws/sha256.ts';
import {awsRequestHandler} from '../../src/clouds/aws/sources.ts';
import {instrumentAwsClient} from '../../src/observability/aws-middleware.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';

const ACCOUNT = '444455556666';
const KEY = {accessKeyId: 'AKIADIRECTREAD000001', secretAccessKey: 'direct-read-secret'};
const REGION = 'eu-west-1';
const NAMES = ['alpha', 'bravo', 'charlie', 'delta', 'echo'];

let fake: FakeAws;
let proxy: FaultProxy;
const opened: {destroy(): void}[] = [];

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const name of NAMES) world.addCluster(ACCOUNT, REGION, {name, tags: {env: 'prod', team: name}});
  // Two names a page: every listing is three pages.
  fake = await startFakeAws({world, pageSize: 2});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
});

afterAll(async () => {
  for (const client of opened) client.destroy();
  await proxy.close();
  await fake.close();
});

beforeEach(() => {
  proxy.fault = undefined;
});

interface Attempt {
  readonly operation: string;
  readonly code: string;
}

/** An EKS client as the organization sources build it (lean, undici, metrics middleware), wrapped for the short reads. */
function eksClient(endpoint = proxy.url, extra?: (client: EKSClient) => void): {client: ReturnType<typeof leanReads<EKSClient>>; attempts: Attempt[]; sdk: EKSClient} {
  const attempts: Attempt[] = [];
  const sdk = leanSdkClient(
    new EKSClient({region: REGION, endpoint, credentials: KEY, sha256: NodeSha256, maxAttempts: 3, retryMode: 'standard', requestHandler: awsRequestHandler(1_000)}),
  );
  instrumentAwsClient(sdk, {cloudApiCall: (call) => attempts.push({operation: call.operation, code: call.code})});
  extra?.(sdk);
  opened.push(sdk);
  return {client: leanReads(sdk, [listClustersOperation(ListClustersCommand)]), attempts, sdk};
}

/** Primes a client: its first calls go the SDK's way and show the short path its request. */
async function primed(client: ReturnType<typeof leanReads<EKSClient>>): Promise<void> {
  await client.send(new ListClustersCommand({maxResults: 2}));
  await client.send(new ListClustersCommand({maxResults: 2}));
}

const throttling = answer(400, JSON.stringify({message: 'Rate exceeded'}), {'x-amzn-errortype': 'ThrottlingException'});

describe('the direct way of the short reads', () => {
  it('lists what the SDK lists, every page, signed as the account (the fake checks each signature)', async () => {
    const {client} = eksClient();
    await primed(client);
    const before = client.ways.direct;
    const names = await listClusterNames(client, new AbortController().signal, 2);
    expect(names.sort()).toEqual([...NAMES].sort());
    // Three pages, all the direct way.
    expect(client.ways.direct - before).toBe(3);
    const plain = new EKSClient({region: REGION, endpoint: proxy.url, credentials: KEY, maxAttempts: 1});
    opened.push(plain);
    expect(await listClusterNames(plain, new AbortController().signal, 2)).toEqual(names);
  });

  it('GetResources: the same mappings as the SDK reads, the direct way', async () => {
    const sdk = leanSdkClient(new ResourceGroupsTaggingAPIClient({region: REGION, endpoint: proxy.url, credentials: KEY, sha256: NodeSha256, maxAttempts: 2, requestHandler: awsRequestHandler(1_000)}));
    const plain = new ResourceGroupsTaggingAPIClient({region: REGION, endpoint: proxy.url, credentials: KEY, maxAttempts: 1});
    opened.push(sdk, plain);
    const client = leanReads(sdk, [getResourcesOperation(GetResourcesCommand)]);
    const input = {ResourceTypeFilters: ['eks:cluster'], ResourcesPerPage: 100};
    await client.send(new GetResourcesCommand(input));
    await client.send(new GetResourcesCommand(input));
    const before = client.ways.direct;
    const direct = await client.send(new GetResourcesCommand(input));
    expect(client.ways.direct - before).toBe(1);
    const expected = await plain.send(new GetResourcesCommand(input));
    expect(direct.ResourceTagMappingList).toEqual(expected.ResourceTagMappingList);
    expect(direct.PaginationToken).toEqual(expected.PaginationToken);
    // The fake's page of two mappings, each with its tags.
    expect(direct.ResourceTagMappingList).toHaveLength(2);
    expect(direct.ResourceTagMappingList?.[0]?.Tags?.length).toBe(2);
  });

  it("throttled twice, then answered: the client's strategy retries, each attempt is counted, $metadata says 3 attempts", async () => {
    const {client, attempts} = eksClient();
    await primed(client);
    let refused = 0;
    proxy.fault = (req) => (req.operation === 'ListClusters' && refused < 2 ? (refused++, throttling) : undefined);
    attempts.length = 0;
    const before = client.ways.direct;
    const out = await client.send(new ListClustersCommand({maxResults: 2}));
    expect(client.ways.direct - before).toBe(1);
    expect(out.clusters).toHaveLength(2);
    expect(out.$metadata.attempts).toBe(3);
    expect(attempts.map((a) => a.code)).toEqual(['ThrottlingException', 'ThrottlingException', 'OK']);
  });

  it("503 on every attempt: the SDK's error after the client's three attempts, an `other` failure", async () => {
    const {client, attempts} = eksClient();
    await primed(client);
    proxy.fault = (req) => (req.operation === 'ListClusters' ? answer(503, JSON.stringify({message: 'unavailable'}), {'x-amzn-errortype': 'ServiceUnavailableException'}) : undefined);
    attempts.length = 0;
    const error = (await client.send(new ListClustersCommand({maxResults: 2})).catch((e: unknown) => e)) as {name?: string; $metadata?: {attempts?: number; httpStatusCode?: number}};
    expect(error.name).toBe('ServiceUnavailableException');
    expect(error.$metadata?.attempts).toBe(3);
    expect(error.$metadata?.httpStatusCode).toBe(503);
    expect(attempts).toHaveLength(3);
    expect(awsFailure(error, 'ListClusters').reason).toBe('other');
  });

  it('a 2xx that names an error type is refused as invalid_response, not read as an empty region', async () => {
    const {client} = eksClient();
    await primed(client);
    proxy.fault = (req) => (req.operation === 'ListClusters' ? answer(200, '{"clusters":[]}', {'x-amzn-errortype': 'ServiceUnavailableException'}) : undefined);
    const error = await client.send(new ListClustersCommand({maxResults: 2})).catch((e: unknown) => e);
    expect(awsFailure(error, 'ListClusters').reason).toBe('invalid_response');
  });

  it('a body that is not the documented shape goes to the SDK reader: `{}` is no listing', async () => {
    const {client} = eksClient();
    await primed(client);
    proxy.fault = (req) => (req.operation === 'ListClusters' ? answer(200, '{"clusters":"alpha"}') : undefined);
    const error = await listClusterNames(client, new AbortController().signal, 2).catch((e: unknown) => e);
    expect(awsFailure(error, 'ListClusters').reason).toBe('invalid_response');
  });

  it('an aborted call rejects as AbortError (a timeout for the source) and a call that hangs is cut at once by abort', async () => {
    const {client} = eksClient();
    await primed(client);
    const aborted = new AbortController();
    aborted.abort(new Error('cycle deadline'));
    const early = await client.send(new ListClustersCommand({maxResults: 2}), {abortSignal: aborted.signal}).catch((e: unknown) => e);
    expect((early as Error).name).toBe('AbortError');
    expect(awsFailure(early, 'ListClusters').reason).toBe('timeout');
    proxy.fault = (req) => (req.operation === 'ListClusters' ? {kind: 'hang'} : undefined);
    const later = new AbortController();
    const pending = client.send(new ListClustersCommand({maxResults: 2}), {abortSignal: later.signal}).catch((e: unknown) => e);
    setTimeout(() => later.abort(new Error('cycle deadline')), 50);
    expect((await pending as Error).name).toBe('AbortError');
  });

  it("a describe burst: the first call is the SDK's, every other one started with it goes the direct way and reads the same cluster", async () => {
    const sdk = leanSdkClient(new EKSClient({region: REGION, endpoint: proxy.url, credentials: KEY, sha256: NodeSha256, maxAttempts: 2, requestHandler: awsRequestHandler(1_000)}));
    opened.push(sdk);
    const client = leanReads(sdk, [describeClusterOperation(DescribeClusterCommand)]);
    const out = await Promise.all(NAMES.map((name) => client.send(new DescribeClusterCommand({name}))));
    expect(out.map((o) => o.cluster?.name)).toEqual(NAMES);
    expect(out.map((o) => o.cluster?.tags?.['team'])).toEqual(NAMES);
    expect(client.ways).toEqual({sdk: 1, middlewares: 0, direct: NAMES.length - 1});
  });

  it("after the client's ListClusters, a describe burst goes the direct way from its first call: signed as the account, counted as DescribeCluster, the SDK's clusters", async () => {
    const attempts: Attempt[] = [];
    const sdk = leanSdkClient(new EKSClient({region: REGION, endpoint: proxy.url, credentials: KEY, sha256: NodeSha256, maxAttempts: 2, requestHandler: awsRequestHandler(1_000)}));
    instrumentAwsClient(sdk, {cloudApiCall: (call) => attempts.push({operation: call.operation, code: call.code})});
    opened.push(sdk);
    const client = leanReads(sdk, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand, {after: ListClustersCommand})]);
    const names = await listClusterNames(client, new AbortController().signal, 2);
    const ways = {...client.ways};
    const out = await Promise.all(names.map((name) => client.send(new DescribeClusterCommand({name}))));
    // The same records a plain SDK client reads.
    const plain = new EKSClient({region: REGION, endpoint: proxy.url, credentials: KEY, maxAttempts: 1});
    opened.push(plain);
    const expected = await Promise.all(names.map((name) => plain.send(new DescribeClusterCommand({name}))));
    expect(out.map((o) => o.cluster)).toEqual(expected.map((o) => o.cluster));
    expect(out.map((o) => o.cluster?.tags?.['team']).sort()).toEqual([...NAMES].sort());
    expect(client.ways).toEqual({sdk: ways.sdk, middlewares: ways.middlewares, direct: ways.direct + NAMES.length});
    expect(attempts.filter((a) => a.operation === 'DescribeCluster')).toEqual(NAMES.map(() => ({operation: 'DescribeCluster', code: 'OK'})));
  });

  it('without a ListClusters first, the first describe is still the SDK\'s (nothing to make its request from)', async () => {
    const sdk = leanSdkClient(new EKSClient({region: REGION, endpoint: proxy.url, credentials: KEY, sha256: NodeSha256, maxAttempts: 2, requestHandler: awsRequestHandler(1_000)}));
    opened.push(sdk);
    const client = leanReads(sdk, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand, {after: ListClustersCommand})]);
    const out = await Promise.all(NAMES.map((name) => client.send(new DescribeClusterCommand({name}))));
    expect(out.map((o) => o.cluster?.name)).toEqual(NAMES);
    expect(client.ways).toEqual({sdk: 1, middlewares: 0, direct: NAMES.length - 1});
  });

  it('a client with another finalizeRequest middleware keeps the middlewares (no direct way), and still lists', async () => {
    let seen = 0;
    const {client} = eksClient(proxy.url, (sdk) =>
      (sdk.middlewareStack as unknown as {add(mw: unknown, o: object): void}).add(
        (next: (a: unknown) => Promise<unknown>) => (args: unknown) => {
          seen++;
          return next(args);
        },
        {step: 'finalizeRequest', priority: 'low', name: 'testFinalizeCounter', override: true},
      ),
    );
    await primed(client);
    const names = await listClusterNames(client, new AbortController().signal, 2);
    expect(names.sort()).toEqual([...NAMES].sort());
    expect(client.ways.direct).toBe(0);
    expect(client.ways.middlewares).toBeGreaterThan(0);
    expect(seen).toBeGreaterThanOrEqual(5);
  });
});

describe('clock skew on the direct way', () => {
  let server: http.Server;
  let url = '';
  const SKEW_MS = 20 * 60_000;
  const dates: string[] = [];

  beforeAll(async () => {
    // An EKS endpoint whose clock runs 20 minutes ahead: a request signed more than 5 minutes
    // away from it is refused as AWS refuses it; its Date header is what the SDK corrects by.
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const now = Date.now() + SKEW_MS;
        const amzDate = String(req.headers['x-amz-date'] ?? '');
        dates.push(amzDate);
        const signedAt = Date.parse(amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
        const headers = {'content-type': 'application/json', date: new Date(now).toUTCString()};
        if (!(Math.abs(now - signedAt) <= 5 * 60_000)) {
          res.writeHead(403, {...headers, 'x-amzn-errortype': 'InvalidSignatureException'}).end(JSON.stringify({message: 'Signature expired: the request time is too far from the server time'}));
          return;
        }
        res.writeHead(200, headers).end(JSON.stringify({clusters: ['alpha']}));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('a refused skewed attempt corrects the client clock and the retry answers, as on the SDK way', async () => {
    const {client, sdk, attempts} = eksClient(url);
    // The first calls (the SDK's way) meet the skew first and correct the clock; put it back.
    await primed(client);
    expect(Math.abs((sdk.config as {systemClockOffset?: number}).systemClockOffset ?? 0) - SKEW_MS).toBeLessThan(60_000);
    (sdk.config as {systemClockOffset?: number}).systemClockOffset = 0;
    attempts.length = 0;
    dates.length = 0;
    const before = client.ways.direct;
    const out = await client.send(new ListClustersCommand({maxResults: 2}));
    expect(client.ways.direct - before).toBe(1);
    expect(out.clusters).toEqual(['alpha']);
    expect(attempts.map((a) => a.code)).toEqual(['InvalidSignatureException', 'OK']);
    expect(Math.abs(((sdk.config as {systemClockOffset?: number}).systemClockOffset ?? 0) - SKEW_MS)).toBeLessThan(60_000);
    // The retry was signed with the corrected clock.
    const [first, second] = dates;
    expect(first).not.toBe(second);
  });
});
