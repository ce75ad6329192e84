/**
 * The managed clusters list on the short path (src/clouds/azure/lean-get.ts): after a first
 * listing taught it how the SDK client's requests look, every page goes out once, without the
 * SDK's pipeline, and comes back as raw bytes. These tests run the real AzureSources against the
 * ARM fake through the fault proxy (which tells the two paths apart: the SDK's pipeline asks for
 * gzip, the short path does not) and spoil the second listing of one subscription: every fault
 * must fail that source and list nothing (deleting nothing), while the other subscription is
 * listed; answers only the SDK's pipeline handles (throttling, 5xx, 401, gzip, resets) are asked
 * again through it and end as they did before.
 */
import https from 'node:https';
import {gzipSync} from 'node:zlib';
import {createHttpHeaders, createPipelineRequest, type PipelineRequest} from '@azure/core-rest-pipeline';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {pooledHttpClient} from '../../src/clouds/azure/http-client.ts';
import {LeanArmGet} from '../../src/clouds/azure/lean-get.ts';
import type {AzureSources} from '../../src/clouds/azure/sources.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {azureMetricsPolicies} from '../../src/observability/azure-policy.ts';
import {Metrics} from '../../src/observability/metrics.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {answer, armClassifier, mutateJson, startFaultProxy, type FaultProxy, type FaultRequest, type ProxyFault} from '../fakes/faults.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';
import {value} from '../observability/prom-tools.ts';
import {fakeSources, matcher, resultOf, runPlan, SUB_A, SUB_B, TENANT} from './aks-helpers.ts';

let world: ArmWorld;
let arm: FakeArm;
let proxy: FaultProxy;
/** Which path each managed clusters request took, in order: `short` or `sdk` (by its Accept-Encoding). */
let paths: {sub: string; page: string; path: 'short' | 'sdk'}[] = [];

beforeAll(async () => {
  world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.addSubscription({subscriptionId: SUB_B, tenantId: TENANT});
  // Three clusters in A, two to a page (a first page and a later one); two in B.
  for (const name of ['a1', 'a2', 'a3']) world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name});
  for (const name of ['b1', 'b2']) world.addCluster({subscriptionId: SUB_B, resourceGroup: 'rg-b', name});
  arm = await startFakeArm({world});
  const classify = armClassifier();
  proxy = await startFaultProxy({
    upstream: arm.url,
    upstreamCa: arm.caPem,
    tls: await sharedServerTls(),
    classify: (method, url, headers, body) => {
      const named = classify(method, url, headers, body);
      if (named.operation === 'managedClusters.list') paths.push({sub: named.account, page: named.page, path: headers['accept-encoding'] === undefined ? 'short' : 'sdk'});
      return named;
    },
  });
});
afterAll(async () => {
  await proxy.close();
  await arm.close();
});

let sources: AzureSources;
let metrics: Metrics;
/** AzureSources as production builds it, with the service's metrics policy (and a shorter per-attempt timeout when asked). */
function newSources(requestTimeoutMs?: number): void {
  metrics = new Metrics({defaultMetrics: false});
  ({sources} = fakeSources(arm, {
    clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 2, retryDelayInMs: 1, maxRetryDelayInMs: 5}, additionalPolicies: azureMetricsPolicies(metrics)},
    ...(requestTimeoutMs === undefined ? {} : {policyOptions: {requestTimeoutMs}}),
  }));
}

beforeEach(() => {
  newSources();
  proxy.fault = undefined;
  paths = [];
});

async function run(): Promise<{a: SourceResult; b: SourceResult}> {
  const results = await runPlan(await sources.plan([matcher(arm, {resource_manager_endpoint: proxy.url})]));
  return {a: resultOf(results, `aks:${SUB_A}`), b: resultOf(results, `aks:${SUB_B}`)};
}

/** A good first listing; the paths of the next one are then recorded alone. */
async function primed(): Promise<{a: SourceResult; b: SourceResult}> {
  const good = await run();
  expect(good.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
  expect(good.b.clusters.map((c) => c.name)).toEqual(['b1', 'b2']);
  paths = [];
  return good;
}

/** Spoils SUB_A's `page` for the first `times` requests (every request when omitted). */
function spoil(page: FaultRequest['page'], fault: () => ProxyFault, times = Number.POSITIVE_INFINITY): void {
  let left = times;
  proxy.fault = (req) => {
    if (req.operation !== 'managedClusters.list' || req.account !== SUB_A || req.page !== page || left <= 0) return undefined;
    left--;
    return fault();
  };
}

const pathsOf = (sub: string): string[] => paths.filter((p) => p.sub === sub).map((p) => `${p.page}:${p.path}`);

describe('the managed clusters list on the short path', () => {
  it('reads every page of a later listing once, on the short path, and hands on the same clusters', async () => {
    const good = await primed();
    const again = await run();
    expect(pathsOf(SUB_A)).toEqual(['first:short', 'later:short']);
    expect(pathsOf(SUB_B)).toEqual(['first:short']);
    expect(again.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
    again.a.clusters.forEach((c, i) => expect(c).toBe(good.a.clusters[i]));
    again.b.clusters.forEach((c, i) => expect(c).toBe(good.b.clusters[i]));
  });

  it('sees a cluster that changed, added or went', async () => {
    await primed();
    world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a4'});
    world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a1'}, {tags: {team: 'x'}});
    try {
      const after = await run();
      expect(pathsOf(SUB_A).every((p) => p.endsWith(':short'))).toBe(true);
      expect(after.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3', 'a4']);
      expect(after.a.clusters[0]?.tags).toEqual({team: 'x'});
    } finally {
      world.removeCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a4'});
      world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a1'}, {tags: {}});
    }
    const back = await run();
    expect(back.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
  });

  it('counts its calls in the cloud API metrics as the SDK path does', async () => {
    await primed();
    await run();
    const text = (await metrics.render()).body;
    const labels = {service: 'containerservice', operation: 'ManagedClusters_List'};
    // Two listings of three pages each (A's two, B's one), every one answered OK.
    expect(value(text, 'kube_discovery_cloud_api_requests_total', {...labels, code: 'OK'})).toBe(6);
    expect(value(text, 'kube_discovery_cloud_api_request_duration_seconds_count', labels)).toBe(6);
  });
});

describe('a spoiled page on the short path fails its source and lists nothing, as before', () => {
  // label, page spoiled, fault, the source's error, the managed clusters requests of A (when the count is ours to say).
  const faults: [string, FaultRequest['page'], () => ProxyFault, {reason?: string; code?: string; message?: RegExp}, string[]][] = [
    ['an empty 200', 'first', () => answer(200, ''), {reason: 'invalid_response', message: /empty body/}, ['first:short', 'first:sdk']],
    ['a 200 of {}', 'first', () => answer(200, '{}'), {reason: 'invalid_response', message: /value is missing/}, ['first:short', 'first:sdk']],
    ['a 200 of {"value":null}', 'later', () => answer(200, '{"value":null}'), {reason: 'invalid_response', message: /value is null/}, ['first:short', 'later:short', 'later:sdk']],
    ['a 200 that is not JSON', 'first', () => answer(200, '{"value":[{"name":'), {reason: 'invalid_response', message: /not JSON/}, ['first:short', 'first:sdk']],
    ['a 200 whose value holds a string', 'later', () => mutateJson((body) => ({...body, value: ['a3']})), {reason: 'invalid_response', message: /not a resource/}, ['first:short', 'later:short', 'later:sdk']],
    ['a 403', 'first', () => answer(403, JSON.stringify({error: {code: 'AuthorizationFailed', message: 'no read on managedClusters'}})), {reason: 'access_denied', code: 'AuthorizationFailed', message: /no read on managedClusters/}, ['first:short']],
    ['a 500 on every attempt', 'first', () => answer(500, JSON.stringify({error: {code: 'InternalServerError', message: 'boom'}})), {reason: 'other', code: 'InternalServerError', message: /boom/}, ['first:short', 'first:sdk', 'first:sdk', 'first:sdk']],
    ['a 429 on every attempt', 'later', () => answer(429, JSON.stringify({error: {code: 'TooManyRequests', message: 'slow down'}}), {'retry-after': '0'}), {reason: 'throttled', message: /slow down/}, ['first:short', 'later:short', 'later:sdk', 'later:sdk', 'later:sdk']],
    ['a body cut off halfway', 'later', () => ({kind: 'truncate'}), {reason: 'other', message: /aborted|ECONNRESET|socket hang up/}, []],
    ['a reset connection', 'first', () => ({kind: 'reset'}), {reason: 'other', message: /ECONNRESET|socket hang up/}, []],
    // One attempt, as the SDK's own timeout (an AbortError its retry policy does not retry).
    ['no answer', 'later', () => ({kind: 'hang'}), {reason: 'timeout', code: 'AbortError'}, ['first:short', 'later:short']],
  ];
  for (const [label, page, fault, error, seen] of faults) {
    it(`${label} (${page} page): the source fails, the other subscription is listed, and the next good listing is the last good one`, async () => {
      // A hang waits for the per-attempt timeout: a short one (long enough for the loaded machine's good answers).
      if (fault().kind === 'hang') newSources(2_000);
      const good = await primed();
      spoil(page, fault);
      const spoiled = await run();
      expect(spoiled.a).toMatchObject({ok: false, clusters: [], malformed: []});
      expect(spoiled.a.error).toMatchObject({...error, ...(error.message ? {message: expect.stringMatching(error.message)} : {})});
      expect(spoiled.b.ok).toBe(true);
      expect(spoiled.b.clusters.map((c) => c.name)).toEqual(['b1', 'b2']);
      if (seen.length > 0) expect(pathsOf(SUB_A)).toEqual(seen);
      proxy.fault = undefined;
      const after = await run();
      after.a.clusters.forEach((c, i) => expect(c).toBe(good.a.clusters[i]));
    });
  }
});

describe('a later page that names itself as the next one', () => {
  it('fails the source as a repeated nextLink, listing nothing', async () => {
    const good = await primed();
    let link = '';
    proxy.fault = (req) => {
      if (req.operation !== 'managedClusters.list' || req.account !== SUB_A) return undefined;
      if (req.page === 'first') return {kind: 'mutate', rewrite: (text) => ((link = (JSON.parse(text) as {nextLink: string}).nextLink), text)};
      return mutateJson((body) => ({...body, nextLink: link}));
    };
    const spoiled = await run();
    expect(spoiled.a).toMatchObject({ok: false, clusters: [], malformed: [], error: {reason: 'invalid_response', message: expect.stringMatching(/nextLink it had already returned/)}});
    expect(pathsOf(SUB_A)).toEqual(['first:short', 'later:short']);
    expect(spoiled.b.ok).toBe(true);
    proxy.fault = undefined;
    const after = await run();
    after.a.clusters.forEach((c, i) => expect(c).toBe(good.a.clusters[i]));
  });
});

describe('answers only the SDK pipeline handles are asked again through it', () => {
  it('a 429 then a good answer: the SDK retries after Retry-After and the listing counts', async () => {
    await primed();
    // The short path's 429 and the SDK's first attempt's; its retry gets the page.
    spoil('first', () => answer(429, JSON.stringify({error: {code: 'TooManyRequests', message: 'slow down'}}), {'retry-after': '0'}), 2);
    const result = await run();
    expect(result.a.ok).toBe(true);
    expect(result.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
    expect(pathsOf(SUB_A)).toEqual(['first:short', 'first:sdk', 'first:sdk', 'later:short']);
    const text = (await metrics.render()).body;
    expect(value(text, 'kube_discovery_cloud_api_throttled_total', {service: 'containerservice', operation: 'ManagedClusters_List'})).toBe(2);
  });

  it('a 401 is left to the SDK (its token handling), whose good answer counts', async () => {
    await primed();
    spoil('first', () => answer(401, JSON.stringify({error: {code: 'InvalidAuthenticationToken', message: 'expired'}})), 1);
    const result = await run();
    expect(result.a.ok).toBe(true);
    expect(pathsOf(SUB_A)).toEqual(['first:short', 'first:sdk', 'later:short']);
  });

  it('a gzip-encoded page is read by the SDK, which asked for it and decompresses it', async () => {
    await primed();
    let original = '';
    proxy.fault = (req) => (req.operation === 'managedClusters.list' && req.account === SUB_A && req.page === 'first' ? {kind: 'mutate', rewrite: (text) => (original = text)} : undefined);
    await run();
    expect(original).toContain('"a1"');
    spoil('first', () => ({kind: 'answer', status: 200, body: gzipSync(original), headers: {'content-type': 'application/json', 'content-encoding': 'gzip'}}), 2);
    paths = [];
    const result = await run();
    expect(pathsOf(SUB_A)).toEqual(['first:short', 'first:sdk', 'later:short']);
    expect(result.a.ok).toBe(true);
    expect(result.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
  });

  it('a reset once: the SDK path reads the page and the listing counts', async () => {
    await primed();
    spoil('later', () => ({kind: 'reset'}), 1);
    const result = await run();
    expect(result.a.ok).toBe(true);
    expect(result.a.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
  });
});

describe('before it has learnt', () => {
  it('a fresh AzureSources lists through the SDK until a request of its client was seen', async () => {
    const first = await run();
    expect(first.a.ok).toBe(true);
    // The first page of the first listing taught it; what follows went the short way.
    expect(pathsOf(SUB_A)[0]).toBe('first:sdk');
    const {sources: sdkOnly} = fakeSources(arm, {leanListReads: false});
    paths = [];
    for (let i = 0; i < 2; i++) await runPlan(await sdkOnly.plan([matcher(arm, {resource_manager_endpoint: proxy.url})]));
    expect(paths.every((p) => p.path === 'sdk')).toBe(true);
  });
});

describe('what the short path learns from the SDK client', () => {
  const learnFrom = async (lean: LeanArmGet, options: Pick<PipelineRequest, 'agent' | 'proxySettings'>): Promise<void> => {
    // As the SDK's agent and proxy policies leave a request (they set these fields before it is sent).
    const request = Object.assign(createPipelineRequest({url: `${arm.url}/subscriptions/${SUB_A}/providers/Microsoft.ContainerService/managedClusters`}), options);
    request.headers.set('user-agent', 'azsdk-js-arm-containerservice/test');
    await lean.learn.policy.sendRequest(request, (r) => Promise.resolve({request: r, status: 200, headers: createHttpHeaders()}));
  };
  const newLean = (): LeanArmGet => new LeanArmGet({credential: fakeTokenCredential(), scope: 'https://management.azure.com/.default', agentFor: pooledHttpClient().agentFor, policies: [], timeoutMs: 1_000});

  it('opens on a request sent without a proxy or an agent of the caller', async () => {
    const lean = newLean();
    expect(lean.open).toBe(false);
    await learnFrom(lean, {});
    expect(lean.open).toBe(true);
  });

  it('stays on the SDK pipeline for good when a request goes through a proxy or an agent of the caller (the short path would bypass it)', async () => {
    for (const options of [{agent: new https.Agent()}, {proxySettings: {host: 'http://127.0.0.1', port: 3128}}]) {
      const lean = newLean();
      await learnFrom(lean, options);
      expect(lean.open).toBe(false);
      await expect(lean.get(`${arm.url}/subscriptions/${SUB_A}/providers/Microsoft.ContainerService/managedClusters?api-version=2026-04-01`, new AbortController().signal)).resolves.toBeUndefined();
      const later = newLean();
      await learnFrom(later, {});
      await learnFrom(later, options);
      expect(later.open).toBe(false);
    }
  });
});
