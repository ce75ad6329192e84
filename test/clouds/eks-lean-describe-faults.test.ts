/**
 * The promise on the short path of DescribeCluster (lean-read.ts): with the EKS client wrapped
 * as the service wraps it and its first call made, every fault of one cluster's DescribeCluster
 * — broken or empty JSON, a record of the wrong shape, an error status, throttling, a hang, a
 * reset — keeps that cluster (malformed) or fails the source; nothing is ever read as "gone".
 * The real EKS client talks to the wire-level fake through the fault proxy; the calls counted at
 * the SDK's serialize step show the faults were met on the short path.
 */
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {describeClusterOperation, leanReads, listClustersOperation} from '../../src/clouds/aws/lean-read.ts';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {startProxiedAws, type ProxiedAws} from '../fakes/aws-proxied.ts';
import {answer, mutateJson, when, type FaultProxy, type ProxyFault} from '../fakes/faults.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIALEANFAULTS000001', secretAccessKey: 'lean-faults-secret'};
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

/** A fetcher over a primed short-path client; `serialized` counts calls that took the SDK's whole way. */
async function primed(maxAttempts = 1, requestTimeoutMs = 5_000): Promise<{fetch(): Promise<SourceResult>; serialized: () => number; destroy(): void}> {
  const eks = leanSdkClient(
    new EKSClient({region: 'us-east-1', endpoint: proxy.url, credentials: KEY, maxAttempts, retryMode: 'standard', requestHandler: {requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true}}),
  );
  let serialized = 0;
  eks.middlewareStack.add(
    (next) => (args) => {
      serialized++;
      return next(args);
    },
    {step: 'serialize', name: 'testSerializeCounter'},
  );
  const client = leanReads(eks, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand)]);
  await client.send(new ListClustersCommand({}));
  await client.send(new DescribeClusterCommand({name: 'a'}));
  const fetcher = createEksFetcher({source: eksSource(0, 'us-east-1', ACCOUNT), client, describeQueue: new PQueue({concurrency: 4})});
  return {fetch: () => fetcher.fetch(new AbortController().signal), serialized: () => serialized, destroy: () => eks.destroy()};
}

const eksError = (status: number, code: string): ProxyFault => answer(status, JSON.stringify({message: `${code} injected`}), {'x-amzn-errortype': code});

describe('a DescribeCluster answer the service cannot use keeps its cluster (malformed), on the short path', () => {
  const cases: [string, ProxyFault, string][] = [
    ['broken JSON', answer(200, '{"cluster": {"name": "b"'), 'unreadable'],
    ['an empty body', answer(200, ''), 'no cluster'],
    ['{}', answer(200, '{}'), 'no cluster'],
    ['{"cluster":null}', answer(200, '{"cluster":null}'), 'no cluster'],
    ['a cluster that is a string', answer(200, '{"cluster":"b"}'), 'no cluster'],
    ['a status in lower case', mutateJson((body) => ({cluster: {...(body['cluster'] as object), status: 'active'}})), 'status'],
    ['a status that is a number', mutateJson((body) => ({cluster: {...(body['cluster'] as object), status: 7}})), 'status'],
    ['another name', mutateJson((body) => ({cluster: {...(body['cluster'] as object), name: 'zzz'}})), 'zzz'],
    ['a createdAt the SDK cannot read', mutateJson((body) => ({cluster: {...(body['cluster'] as object), createdAt: true}})), 'unreadable'],
    ['ResourceNotFoundException', eksError(404, 'ResourceNotFoundException'), 'ResourceNotFoundException'],
  ];
  for (const [label, fault, reason] of cases) {
    it(`${label}: b is malformed (kept), a and c are found, the source succeeds`, async () => {
      const client = await primed();
      try {
        proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, fault);
        const result = await client.fetch();
        expect(result.ok).toBe(true);
        expect(result.clusters.map((c) => c.name)).toEqual(['a', 'c']);
        expect(result.malformed).toEqual([expect.objectContaining({name: 'b', reason: expect.stringContaining(reason)})]);
        expect(client.serialized()).toBe(2);
      } finally {
        client.destroy();
      }
    });
  }
});

describe('a DescribeCluster that fails fails the source (nothing deleted), on the short path', () => {
  const cases: [string, ProxyFault, string][] = [
    ['503 on every attempt', eksError(503, 'ServiceUnavailableException'), 'other'],
    ['403 AccessDeniedException', eksError(403, 'AccessDeniedException'), 'access_denied'],
    ['a reset connection', {kind: 'reset'}, 'other'],
  ];
  for (const [label, fault, reason] of cases) {
    it(`${label}: the source fails as ${reason}`, async () => {
      const client = await primed();
      try {
        proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, fault);
        const result = await client.fetch();
        expect(result).toMatchObject({ok: false, clusters: [], error: {operation: 'DescribeCluster', reason}});
        expect(client.serialized()).toBe(2);
      } finally {
        client.destroy();
      }
    });
  }

  it('a hang past the request timeout fails the source as timeout', async () => {
    const client = await primed(1, 300);
    try {
      proxy.fault = when({operation: 'DescribeCluster', cluster: 'b'}, {kind: 'hang'});
      expect(await client.fetch()).toMatchObject({ok: false, clusters: [], error: {operation: 'DescribeCluster', reason: 'timeout'}});
    } finally {
      client.destroy();
    }
  });

  it('throttling is retried by the SDK strategy on the short path: every cluster is found', async () => {
    const client = await primed(3);
    try {
      let throttles = 2;
      proxy.fault = (req) => (req.operation === 'DescribeCluster' && req.cluster === 'b' && throttles-- > 0 ? eksError(400, 'ThrottlingException') : undefined);
      const result = await client.fetch();
      expect(result.ok).toBe(true);
      expect(result.clusters.map((c) => c.name)).toEqual(['a', 'b', 'c']);
      expect(throttles).toBe(-1); // two throttled attempts, then the answer
      expect(client.serialized()).toBe(2);
    } finally {
      client.destroy();
    }
  });
});
