/** Shared set-up of the AKS tests: AzureSources pointed at a fake ARM with a fake credential. */
import {createDefaultHttpClient, createHttpHeaders, type HttpClient} from '@azure/core-rest-pipeline';
import type {AzureSourceMatcher, AzureSourcesOptions} from '../../src/clouds/azure/sources.ts';
import type {PlannedSources} from '../../src/clouds/fetcher.ts';
import {AzureSources} from '../../src/clouds/azure/sources.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {fakeTokenCredential, type FakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {armClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';

/** Subscriptions and tenant the tests use. */
export const SUB_A = '00000000-0000-0000-0000-0000000000aa';
export const SUB_B = '00000000-0000-0000-0000-0000000000bb';
export const TENANT = 'aaaaaaaa-0000-0000-0000-000000000001';

/** A matcher over the fake ARM; every list is subscription-wide unless overridden. */
export function matcher(arm: FakeArm, m: Partial<AzureSourceMatcher> = {}): AzureSourceMatcher {
  return {types: ['aks'], subscriptions: ['*'], resource_groups: ['*'], regions: ['*'], resource_manager_endpoint: arm.url, ...m};
}

/** AzureSources as production builds it, but trusting the fake's CA, with fast retries and a fake credential. */
export function fakeSources(arm: FakeArm, extra: Partial<AzureSourcesOptions> = {}): {sources: AzureSources; credential: FakeTokenCredential; clock: FakeClock} {
  const credential = fakeTokenCredential();
  const clock = new FakeClock();
  const sources = new AzureSources({
    credential,
    clock,
    clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 2, retryDelayInMs: 1, maxRetryDelayInMs: 5}},
    ...extra,
  });
  return {sources, credential, clock};
}

/** Runs every planned fetcher; results sorted by source id, failed plans included. */
export async function runPlan(planned: PlannedSources): Promise<SourceResult[]> {
  const fetched = await Promise.all(planned.fetchers.map((f) => f.fetch(new AbortController().signal)));
  return [...planned.failed, ...fetched].sort((a, b) => a.source.id.localeCompare(b.source.id));
}

/** The one result of a source id (fails the test when absent). */
export function resultOf(results: readonly SourceResult[], id: string): SourceResult {
  const r = results.find((x) => x.source.id === id);
  if (!r) throw new Error(`expected a result for source ${id}, got ${results.map((x) => x.source.id).join(', ')}`);
  return r;
}

/** The fake ARM and the fault proxy in front of it. */
export interface ProxiedArm {
  readonly arm: FakeArm;
  readonly proxy: FaultProxy;
  /** Stops the proxy, then the fake. */
  close(): Promise<void>;
}

/** Starts the fake ARM serving `world` behind the fault proxy, for tests that spoil ARM's answers on the wire. */
export async function startProxiedArm(world: ArmWorld): Promise<ProxiedArm> {
  const arm = await startFakeArm({world});
  const proxy = await startFaultProxy({upstream: arm.url, upstreamCa: arm.caPem, tls: await sharedServerTls(), classify: armClassifier()});
  return {
    arm,
    proxy,
    async close() {
      await proxy.close();
      await arm.close();
    },
  };
}

/** One subscription (SUB_A) with clusters a1 and a2 in rg-a, served behind the fault proxy. */
export function startTwoClusterArm(): Promise<ProxiedArm> {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  for (const name of ['a1', 'a2']) world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name});
  return startProxiedArm(world);
}

/** Plans and runs a subscription-wide matcher through the proxy with `sources` (default: fresh ones from fakeSources). */
export async function runThroughProxy({arm, proxy}: ProxiedArm, sources: AzureSources = fakeSources(arm).sources): Promise<SourceResult[]> {
  return runPlan(await sources.plan([matcher(arm, {resource_manager_endpoint: proxy.url})]));
}

/** The SDK's own HTTP client, dropping `subscriptionId` from the subscription list's pages while `hiding()` holds. */
export function subscriptionHidingClient(subscriptionId: string, hiding: () => boolean = () => true): HttpClient {
  const inner = createDefaultHttpClient();
  return {
    async sendRequest(request) {
      const response = await inner.sendRequest(request);
      if (!hiding() || !/\/subscriptions\?api-version=/.test(request.url) || typeof response.bodyAsText !== 'string') return response;
      const body = JSON.parse(response.bodyAsText) as {value: {subscriptionId?: string}[]};
      const text = JSON.stringify({...body, value: body.value.filter((s) => s.subscriptionId !== subscriptionId)});
      const headers = createHttpHeaders(response.headers.toJSON());
      headers.set('content-length', String(Buffer.byteLength(text)));
      return {...response, headers, bodyAsText: text};
    },
  };
}
