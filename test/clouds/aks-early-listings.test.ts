// Early listings (src/clouds/early-listings.ts): from the second plan of a `management_groups`
// matcher on, the subscriptions of the last good walk are listed while the walk runs; a listing
// counts only once the walk has finished well and still has its subscription (same tenant).
import {getEventListeners} from 'node:events';
import {createDefaultHttpClient, type HttpClient} from '@azure/core-rest-pipeline';
import {afterAll, beforeEach, describe, expect, it} from 'vitest';
import type {PlanContext, PlannedSources} from '../../src/clouds/fetcher.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {TENANT, fakeSources, matcher, resultOf, runPlan} from './aks-helpers.ts';

const sub = (n: number): string => `00000000-0000-0000-0000-0000000000${n.toString(16).padStart(2, '0')}`;
// Under mg-root: S1 directly, S2 in mg-a. Outside: S3.
const [S1, S2, S3] = [1, 2, 3].map(sub) as [string, string, string];
const OTHER_TENANT = 'bbbbbbbb-0000-0000-0000-000000000002';

let world: ArmWorld;
let arm: FakeArm;

beforeEach(async () => {
  await arm?.close();
  world = new ArmWorld();
  world.managementGroups.add('mg-root');
  world.managementGroups.add('mg-a', {parent: 'mg-root'});
  world.managementGroups.add('mg-other');
  for (const [id, group] of [[S1, 'mg-root'], [S2, 'mg-a'], [S3, 'mg-other']] as const) {
    world.addSubscription({subscriptionId: id, tenantId: TENANT});
    world.managementGroups.placeSubscription(id, group);
    world.addCluster({subscriptionId: id, resourceGroup: 'rg', name: `c-${id.slice(-2)}`});
  }
  arm = await startFakeArm({world});
});

afterAll(async () => {
  await arm.close();
});

/** The SDK's HTTP client; while `hold()` is in force, every descendants request waits for `release()`. */
function walkGate(): {client: HttpClient; hold: () => void; release: () => void; held: () => number} {
  const inner = createDefaultHttpClient();
  let gate: Promise<void> | undefined;
  let release = (): void => undefined;
  let held = 0;
  return {
    client: {
      async sendRequest(request) {
        if (gate !== undefined && request.url.includes('/descendants')) {
          held++;
          await gate;
        }
        return inner.sendRequest(request);
      },
    },
    hold() {
      held = 0;
      gate = new Promise<void>((resolve) => {
        release = () => {
          gate = undefined;
          resolve();
        };
      });
    },
    release: () => release(),
    held: () => held,
  };
}

/** A cycle's plan context: the registry is empty, the bound is 10 sources. */
function cycleContext(signal = new AbortController().signal): PlanContext {
  return {registered: () => Promise.resolve([]), signal, sourceConcurrency: 10, now: Date.now};
}

const lists = (subscription: string): number => arm.stats.count({operation: 'managedClusters.list', subscription});
const ids = (results: readonly SourceResult[]): string[] => results.map((r) => r.source.id);

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(condition()).toBe(true);
}

/** A planner over the fake whose walks `gate` can hold, with one good plan run (its walk known). */
async function plannedOnce(): Promise<{plan: (context?: PlanContext) => Promise<PlannedSources>; gate: ReturnType<typeof walkGate>}> {
  const gate = walkGate();
  const {sources} = fakeSources(arm, {clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 0}, httpClient: gate.client}});
  const m = matcher(arm, {management_groups: ['mg-root']});
  const plan = (context?: PlanContext): Promise<PlannedSources> => sources.plan([m], context);
  const first = await runPlan(await plan(cycleContext()));
  expect(ids(first)).toEqual([`aks:${S1}`, `aks:${S2}`]);
  arm.stats.reset();
  return {plan, gate};
}

describe('early listings of a management groups matcher', () => {
  it('lists the subscriptions of the last walk while the next walk is held, and hands those listings on once it is done', async () => {
    const {plan, gate} = await plannedOnce();
    world.updateCluster({subscriptionId: S1, resourceGroup: 'rg', name: 'c-01'}, {tags: {team: 'new'}});
    gate.hold();
    const planning = plan(cycleContext());
    await until(() => lists(S1) === 1 && lists(S2) === 1);
    // Both listed, the walk not answered yet.
    expect(gate.held()).toBeGreaterThan(0);
    expect(arm.stats.count({operation: 'managementGroups.descendants'})).toBe(0);
    gate.release();
    const results = await runPlan(await planning);

    expect(ids(results)).toEqual([`aks:${S1}`, `aks:${S2}`]);
    expect(results.every((r) => r.ok)).toBe(true);
    // What the early listing read is what the source reports: the changed tag is in.
    expect(resultOf(results, `aks:${S1}`).clusters[0]?.tags).toEqual({team: 'new'});
    // Listed once each: the cycle got the early listings, not new ones.
    expect([lists(S1), lists(S2), lists(S3)]).toEqual([1, 1, 0]);
  });

  it('leaves no listener on a signal that outlives the cycles (each plan would stay in memory)', async () => {
    // The cycle's signal combines the scheduler's, which lives for a whole leadership term: a
    // listener left on it kept every cycle's early listings, their queue and controllers.
    const {plan} = await plannedOnce();
    const term = new AbortController();
    for (let cycle = 0; cycle < 5; cycle++) {
      const results = await runPlan(await plan(cycleContext(term.signal)));
      expect(results.every((r) => r.ok)).toBe(true);
    }
    expect([lists(S1), lists(S2)]).toEqual([5, 5]);
    await until(() => getEventListeners(term.signal, 'abort').length === 0);
  });

  it('a subscription that joined the group is listed after the walk, one that left is not reported as listed', async () => {
    const {plan} = await plannedOnce();
    world.managementGroups.placeSubscription(S3, 'mg-a');
    world.managementGroups.placeSubscription(S2, 'mg-other');
    world.removeCluster({subscriptionId: S2, resourceGroup: 'rg', name: 'c-02'});
    const results = await runPlan(await plan(cycleContext()));

    expect(resultOf(results, `aks:${S3}`)).toMatchObject({ok: true, clusters: [{name: 'c-03'}]});
    // S2 left: the walk's grace keeps it (a skip, not a listing), whatever its early listing found.
    expect(resultOf(results, `aks:${S2}`)).toMatchObject({ok: true, notAListing: true, clusters: []});
    expect(results.filter((r) => !r.notAListing).map((r) => r.source.id)).toEqual([`aks:${S1}`, `aks:${S3}`]);
  });

  it('plans a subscription that joined ahead of the early listings: its listing and kubeconfigs are what the cycle waits on last', async () => {
    const {plan} = await plannedOnce();
    world.managementGroups.placeSubscription(S3, 'mg-a');
    const planned = await plan(cycleContext());

    // The cycle starts its sources in this order; S1 and S2 were listed early already.
    expect(planned.fetchers.map((f) => f.source.id)).toEqual([`aks:${S3}`, `aks:${S1}`, `aks:${S2}`]);
    const results = await runPlan(planned);
    expect(results.map((r) => [r.source.id, r.ok, r.clusters.length])).toEqual([
      [`aks:${S1}`, true, 1],
      [`aks:${S2}`, true, 1],
      [`aks:${S3}`, true, 1],
    ]);
  });

  it('a failed walk drops every early listing: only the catch-all source, failed, comes back', async () => {
    const {plan} = await plannedOnce();
    arm.setFault((ctx) => (ctx.operation === 'managementGroups.descendants' ? {status: 500, code: 'InternalServerError', message: 'injected'} : undefined));
    const planned = await plan(cycleContext());

    expect(planned.fetchers).toEqual([]);
    expect(planned.failed.map((r) => [r.source.id, r.ok])).toEqual([['aks:*', false]]);
  });

  it('a malformed early listing fails its own source and no other', async () => {
    const {plan, gate} = await plannedOnce();
    arm.setFault((ctx) => (ctx.operation === 'managedClusters.list' && ctx.subscription === S2 ? {malformed: true} : undefined));
    gate.hold();
    const planning = plan(cycleContext());
    await until(() => lists(S2) >= 1);
    arm.setFault(undefined);
    gate.release();
    const results = await runPlan(await planning);

    expect(resultOf(results, `aks:${S2}`)).toMatchObject({ok: false, clusters: [], error: {reason: 'invalid_response'}});
    expect(resultOf(results, `aks:${S1}`)).toMatchObject({ok: true, clusters: [{name: 'c-01'}]});
  });

  it('a subscription whose tenant changed is listed again after the walk, with the new tenant', async () => {
    const {plan} = await plannedOnce();
    world.updateSubscription(S1, {tenantId: OTHER_TENANT});
    const results = await runPlan(await plan(cycleContext()));

    expect(resultOf(results, `aks:${S1}`).clusters[0]).toMatchObject({tenantId: OTHER_TENANT});
    expect(lists(S1)).toBe(2);
    expect(lists(S2)).toBe(1);
  });

  it('without the cycle\'s signal and bound (a plan on its own) nothing is listed before the walk', async () => {
    const {plan, gate} = await plannedOnce();
    gate.hold();
    const planning = plan();
    await until(() => gate.held() > 0);
    expect(lists(S1) + lists(S2)).toBe(0);
    gate.release();
    const results = await runPlan(await planning);
    expect(ids(results)).toEqual([`aks:${S1}`, `aks:${S2}`]);
  });

  it('the cycle\'s abort stops the early listings: none is handed on as a success', async () => {
    const {plan, gate} = await plannedOnce();
    const cycle = new AbortController();
    gate.hold();
    const planning = plan(cycleContext(cycle.signal));
    cycle.abort(new Error('cycle deadline'));
    gate.release();
    const planned = await planning;
    const results = await Promise.all(planned.fetchers.map((f) => f.fetch(cycle.signal)));
    expect(results.filter((r) => r.ok)).toEqual([]);
  });
});
