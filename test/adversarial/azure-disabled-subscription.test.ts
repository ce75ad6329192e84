/**
 * Adversarial: a subscription Azure disables (unpaid bill, expired credit, spending limit) is
 * still the tenant's; its AKS clusters still exist and come back when it is re-enabled, but it is
 * not listed while disabled. No listing lacks its clusters, so they must stay registered (stale,
 * the state named) for as long as it is disabled — with `subscriptions: ["*"]` and with
 * `management_groups` alike. A subscription the list shows as Deleted is gone: its clusters go.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {fakeSources, matcher, resultOf, runPlan, SUB_A, SUB_B, TENANT} from '../clouds/aks-helpers.ts';

let world: ArmWorld;
let arm: FakeArm;

beforeAll(async () => {
  world = new ArmWorld();
  world.managementGroups.add('mg-platform');
  for (const sub of [SUB_A, SUB_B]) {
    world.addSubscription({subscriptionId: sub, tenantId: TENANT});
    world.managementGroups.placeSubscription(sub, 'mg-platform');
    world.addCluster({subscriptionId: sub, resourceGroup: 'rg-a', name: `c-${sub.slice(-2)}`});
  }
  arm = await startFakeArm({world});
});

afterAll(async () => {
  await arm.close();
});

type Stored = ReturnType<typeof stored>;
const changes = (current: Stored[], results: readonly SourceResult[]): [string | undefined, string][] =>
  reconcile(current, evaluate(results, context()), results, 'g1').items.filter((i) => i.action !== 'unchanged').map((i) => [i.labels['subscription-id'], i.action]);

describe('a subscription that Azure disables', () => {
  for (const [scope, extra] of [['subscriptions: ["*"]', {}], ['management_groups', {management_groups: ['mg-platform']}]] as const) {
    it(`keeps its clusters, stale, for as long as it is disabled; a deleted one is deregistered (${scope})`, async () => {
      world.updateSubscription(SUB_B, {state: 'Enabled'});
      const {sources} = fakeSources(arm);
      const m = [matcher(arm, extra)];
      const first = await runPlan(await sources.plan(m));
      const current = [...evaluate(first, context()).candidates.values()].map((c) => stored(c.server));
      expect(current.map((s) => s.spec.cluster.metadata.labels['subscription-id']).sort()).toEqual([SUB_A, SUB_B]);

      world.updateSubscription(SUB_B, {state: 'Disabled'});
      for (let walk = 0; walk < 3; walk++) {
        const results = await runPlan(await sources.plan(m));
        expect(changes(current, results)).toEqual([[SUB_B, 'stale']]);
        expect(resultOf(results, `aks:${SUB_B}`)).toMatchObject({ok: true, clusters: [], notAListing: true, skippedReason: expect.stringContaining('Disabled') as unknown});
      }

      world.updateSubscription(SUB_B, {state: 'Enabled'});
      expect(changes(current, await runPlan(await sources.plan(m)))).toEqual([]);

      world.updateSubscription(SUB_B, {state: 'Deleted'});
      // A deleted subscription is gone; with management_groups the walk still has it for now.
      const deleted = await runPlan(await sources.plan(m));
      expect(changes(current, deleted)).toEqual([[SUB_B, 'delete']]);
      world.updateSubscription(SUB_B, {state: 'Enabled'});
    });
  }
});
