/**
 * Malformed is not empty: the real EKS client, through the fault proxy, in front of the EKS
 * fake. A list page of the wrong shape fails the source; a described cluster with a bad
 * status or another name is malformed (its entry kept); a cluster whose endpoint or CA is
 * unusable is still reported, marked unreachable.
 */
import {EKSClient} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import {startProxiedAws, type ProxiedAws} from '../fakes/aws-proxied.ts';
import {answer, mutateJson, when, type FaultProxy, type ProxyFault} from '../fakes/faults.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAMALFORMED0000001', secretAccessKey: 'malformed-secret'};
let aws: ProxiedAws;
let proxy: FaultProxy;

beforeAll(async () => {
  aws = await startProxiedAws({account: ACCOUNT, key: KEY, clusters: ['a', 'b', 'c'].map((name) => ({name, tags: {env: 'prod'}}))});
  ({proxy} = aws);
});
afterAll(async () => {
  await aws.close();
});
beforeEach(() => {
  proxy.fault = undefined;
});

function fetcher(requestTimeoutMs = 5_000) {
  return createEksFetcher({
    source: eksSource(0, 'us-east-1', ACCOUNT),
    client: new EKSClient({
      region: 'us-east-1',
      endpoint: proxy.url,
      credentials: KEY,
      maxAttempts: 1,
      requestHandler: {requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true},
    }),
    describeQueue: new PQueue({concurrency: 4}),
  });
}

const listBodies: [string, ProxyFault][] = [
  ['{}', answer(200, '{}')],
  ['[]', answer(200, '[]')],
  ['an empty body', answer(200, '')],
  ['{"clusters":null}', answer(200, '{"clusters":null}')],
  ['{"clusters":"x"}', answer(200, '{"clusters":"x"}')],
  ['{"clusters":[1,2]}', answer(200, '{"clusters":[1,2]}')],
  ['{"message":"..."}', answer(200, '{"message":"Service is busy"}')],
  ['a 204', {kind: 'answer', status: 204, body: ''}],
];

describe('ListClusters answers of the wrong shape', () => {
  for (const page of ['first', 'later'] as const) {
    for (const [label, fault] of listBodies) {
      it(`${label} on the ${page} page fails the source as invalid_response`, async () => {
        proxy.fault = when({operation: 'ListClusters', page}, fault);
        const result = await fetcher().fetch(new AbortController().signal);
        expect(result).toMatchObject({ok: false, clusters: [], error: {reason: 'invalid_response', operation: 'ListClusters'}});
      });
    }
  }

  it('an empty region answered as {"clusters":[]} is a real, successful empty listing', async () => {
    proxy.fault = when({operation: 'ListClusters'}, answer(200, '{"clusters":[],"nextToken":null}'));
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result).toMatchObject({ok: true, clusters: []});
  });
});

describe('DescribeCluster answers of the wrong shape', () => {
  const statuses: [string, unknown][] = [['an object', {x: 1}], ['lower case', 'active'], ['trailing space', 'ACTIVE '], ['unknown', 'EXPLODED'], ['a number', 7]];
  for (const [label, status] of statuses) {
    it(`a status that is ${label} makes the cluster malformed, not gone`, async () => {
      proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, mutateJson((body) => ({cluster: {...(body['cluster'] as object), status}})));
      const result = await fetcher().fetch(new AbortController().signal);
      expect(result.ok).toBe(true);
      expect(result.clusters.map((c) => c.name)).toEqual(['a', 'c']);
      expect(result.malformed).toEqual([expect.objectContaining({name: 'b', reason: expect.stringContaining('status')})]);
    });
  }

  it('a record naming another cluster is malformed under the name asked for', async () => {
    proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, mutateJson((body) => ({cluster: {...(body['cluster'] as object), name: 'zzz'}})));
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.clusters.map((c) => c.name)).toEqual(['a', 'c']);
    expect(result.malformed).toEqual([expect.objectContaining({name: 'b', reason: expect.stringContaining('zzz')})]);
  });

  it('a body without a cluster object is malformed, not gone', async () => {
    proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, answer(200, '{}'));
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.clusters.map((c) => c.name)).toEqual(['a', 'c']);
    expect(result.malformed.map((m) => m.name)).toEqual(['b']);
  });
});

describe('clusters that exist but cannot be reached', () => {
  it('keeps a cluster whose CA is not base64 PEM, marked invalid_ca with what the cloud returned', async () => {
    proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, mutateJson((body) => ({cluster: {...(body['cluster'] as object), certificateAuthority: {data: 'bm90IGEgY2VydA=='}}})));
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.malformed).toEqual([]);
    const b = result.clusters.find((c) => c.name === 'b');
    expect(b).toMatchObject({statusOk: true, unreachable: {reason: 'invalid_ca', message: expect.stringContaining('not base64 PEM')}});
    expect(b?.caData).toBeUndefined();
  });

  it('keeps a cluster without an endpoint, marked no_endpoint', async () => {
    proxy.fault = when({operation: 'DescribeCluster', cluster: 'c'}, mutateJson((body) => {
      const {endpoint: _endpoint, ...cluster} = body['cluster'] as Record<string, unknown>;
      return {cluster};
    }));
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.clusters.find((c) => c.name === 'c')).toMatchObject({unreachable: {reason: 'no_endpoint', message: expect.stringContaining('endpoint')}});
  });
});

describe('connections that never answer', () => {
  it('a hung ListClusters fails the source as timeout within the request timeout', async () => {
    proxy.fault = when({operation: 'ListClusters'}, {kind: 'hang'});
    const result = await fetcher(300).fetch(new AbortController().signal);
    expect(result).toMatchObject({ok: false, error: {reason: 'timeout', operation: 'ListClusters'}});
  });

  it('a reset connection is not a timeout', async () => {
    proxy.fault = when({operation: 'ListClusters'}, {kind: 'reset'});
    const result = await fetcher().fetch(new AbortController().signal);
    expect(result.ok).toBe(false);
    expect(result.error?.reason).not.toBe('timeout');
  });
});
