// Planning AKS sources against the fake ARM: subscriptions re-listed every cycle, failures
// kept per subscription and classified, throttling retried, and "stale beats partial".
import {afterAll, beforeEach, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {context, stored} from '../discovery/builders.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {SUB_A, SUB_B, TENANT, fakeSources, matcher, resultOf, runPlan} from './aks-helpers.ts';

const SUB_C = '00000000-0000-0000-0000-0000000000cc';
let world: ArmWorld;
let arm: FakeArm;
let disabled: string;

beforeEach(async () => {
  await arm?.close();
  world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.addSubscription({subscriptionId: SUB_B, tenantId: TENANT});
  disabled = world.addSubscription({displayName: 'gone', state: 'Disabled'}).subscriptionId.toLowerCase();
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a1'});
  world.addCluster({subscriptionId: SUB_B, resourceGroup: 'rg-b', name: 'b1'});
  arm = await startFakeArm({world});
});

afterAll(async () => {
  await arm.close();
});

const summary = (results: readonly SourceResult[]) => results.map((r) => [r.source.id, r.ok, r.clusters.map((c) => c.name)]);

describe('subscriptions', () => {
  it('re-lists "*" every cycle: a subscription granted between two cycles is discovered, a disabled one is not listed', async () => {
    const {sources} = fakeSources(arm);
    const m = [matcher(arm)];

    // The disabled one is a skipped source (no call): whatever it had registered is kept, stale.
    const first = await runPlan(await sources.plan(m));
    expect(summary(first.filter((r) => !r.notAListing))).toEqual([[`aks:${SUB_A}`, true, ['a1']], [`aks:${SUB_B}`, true, ['b1']]]);
    expect(resultOf(first, `aks:${disabled}`)).toMatchObject({ok: true, notAListing: true, skippedReason: expect.stringContaining('Disabled') as unknown});
    expect(arm.stats.requests.filter((r) => r.subscription?.toLowerCase() === disabled)).toEqual([]);

    world.addSubscription({subscriptionId: SUB_C, tenantId: TENANT});
    world.addCluster({subscriptionId: SUB_C, resourceGroup: 'rg-c', name: 'c1'});
    const results = await runPlan(await sources.plan(m));

    expect(summary(results.filter((r) => !r.notAListing))).toEqual([[`aks:${SUB_A}`, true, ['a1']], [`aks:${SUB_B}`, true, ['b1']], [`aks:${SUB_C}`, true, ['c1']]]);
    expect(arm.stats.count({operation: 'subscriptions.list', status: 200})).toBe(4);
    expect(resultOf(results, `aks:${SUB_C}`).clusters[0]).toMatchObject({account: SUB_C, tenantId: TENANT});
  });

  it('a failed subscription listing fails one source covering every subscription, so reconcile keeps all entries', async () => {
    const {sources} = fakeSources(arm);
    const m = [matcher(arm)];
    const first = await runPlan(await sources.plan(m));
    const current = [...evaluate(first, context()).candidates.values()].map((c) => stored(c.server));
    expect(current).toHaveLength(2);

    arm.setFault((c) => (c.operation === 'subscriptions.list' ? {status: 403} : undefined));
    const second = await runPlan(await sources.plan(m));

    expect(second).toEqual([expect.objectContaining({
      ok: false,
      source: expect.objectContaining({id: 'aks:*', account: '', region: '*', cloud: 'Azure'}) as unknown,
      error: expect.objectContaining({reason: 'access_denied', code: 'AuthorizationFailed', operation: 'Subscriptions.List'}) as unknown,
    })]);
    const plan = reconcile(current, evaluate(second, context()), second, 'g1');
    expect(plan.items.map((i) => i.action)).toEqual(['stale', 'stale']);
  });
});

describe('failures', () => {
  it('403 on one subscription fails only that source, with ARM code, message and request id', async () => {
    arm.setFault((c) => (c.subscription === SUB_B ? {status: 403} : undefined));
    const {sources} = fakeSources(arm);

    const results = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A, SUB_B]})]));

    expect(resultOf(results, `aks:${SUB_A}`)).toMatchObject({ok: true, clusters: [{name: 'a1'}]});
    const failed = resultOf(results, `aks:${SUB_B}`);
    expect(failed).toMatchObject({ok: false, error: {reason: 'access_denied', code: 'AuthorizationFailed', operation: 'ManagedClusters.List'}});
    // The pager would have said "Pagination failed with unexpected statusCode 403"; ARM's own words tell the operator what to grant.
    expect(failed.error?.message).toContain("does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/read'");
    expect(failed.error?.requestId).toBe(arm.stats.requests.find((r) => r.subscription === SUB_B)?.requestId);
    expect(arm.stats.count({subscription: SUB_B})).toBe(1);
  });

  it('retries a 429 after its Retry-After and succeeds', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' && c.attempt === 1 ? {status: 429, retryAfterSeconds: 0} : undefined));
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    expect(result).toMatchObject({ok: true, clusters: [{name: 'a1'}]});
    expect(arm.stats.count({operation: 'managedClusters.list', status: 429})).toBe(1);
  });

  it('fails a source as throttled at once when Retry-After is longer than the cap, instead of stalling the cycle', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' ? {status: 429, retryAfterSeconds: 3600} : undefined));
    const {sources} = fakeSources(arm, {policyOptions: {maxRetryAfterMs: 60_000}});

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    expect(result).toMatchObject({ok: false, error: {reason: 'throttled', code: 'TooManyRequests'}});
    expect(arm.stats.count({operation: 'managedClusters.list'})).toBe(1);
  });

  it('retries 5xx, then reports the source failed with the ARM code', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' ? {status: 503, code: 'ServiceUnavailable'} : undefined));
    const {sources} = fakeSources(arm);

    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));

    expect(result).toMatchObject({ok: false, error: {reason: 'other', code: 'ServiceUnavailable'}});
    expect(arm.stats.count({operation: 'managedClusters.list'})).toBe(3);
  });

  it('a truncated body fails the source as invalid_response', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' ? {malformed: true} : undefined));
    const {sources} = fakeSources(arm);
    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));
    expect(result).toMatchObject({ok: false, error: {reason: 'invalid_response'}});
  });

  it('a hung page fails the source as timeout once the per-request timeout passes', async () => {
    arm.setFault((c) => (c.operation === 'managedClusters.list' ? {hang: true} : undefined));
    const {sources} = fakeSources(arm, {policyOptions: {requestTimeoutMs: 50}});
    const [result] = await runPlan(await sources.plan([matcher(arm, {subscriptions: [SUB_A]})]));
    expect(result).toMatchObject({ok: false, error: {reason: 'timeout'}});
  });
});

describe('clouds', () => {
  it('asks the credential for the sovereign cloud\'s Resource Manager scope, for subscriptions and clusters alike', async () => {
    const {sources, credential} = fakeSources(arm);
    const results = await runPlan(await sources.plan([matcher(arm, {cloud: 'AzureChinaCloud'})]));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(arm.stats.count({operation: 'subscriptions.list', status: 200})).toBe(2);
    expect(new Set(credential.scopesRequested.flat())).toEqual(new Set(['https://management.chinacloudapi.cn/.default']));
  });
});
