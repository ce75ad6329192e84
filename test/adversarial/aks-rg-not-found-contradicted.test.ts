/**
 * Adversarial: a `resource_groups` source reads ARM's `ResourceGroupNotFound` as "the group was
 * deleted, and its clusters with it": a succeeded, empty listing that deregisters them. Two answers
 * carry that code without saying so: a later page of a listing whose first page just listed the
 * group's clusters (the group exists; that page is no answer about it), and an error status other
 * than 404 (a 503 or 429 whose body names the code: ARM says "not found" only with a 404). Both
 * must fail the source, every entry kept (stale). The AKS sources as production builds them,
 * through the fault proxy in front of the ARM fake (two clusters a page).
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {answer, type FaultProxy, type ProxyFaultRule} from '../fakes/faults.ts';
import {fakeSources, matcher, runPlan, startProxiedArm, SUB_A, TENANT, type ProxiedArm} from '../clouds/aks-helpers.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  for (const name of ['a1', 'a2', 'a3']) world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name});
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());

const run = async (): Promise<SourceResult[]> =>
  runPlan(await fakeSources(armp.arm).sources.plan([matcher(armp.arm, {subscriptions: [SUB_A], resource_groups: ['rg-a'], resource_manager_endpoint: proxy.url})]));

const notFound = (status: number) =>
  answer(status, JSON.stringify({error: {code: 'ResourceGroupNotFound', message: "Resource group 'rg-a' could not be found."}}), {'x-ms-failure-cause': 'gateway'});

const FAULTS: [string, ProxyFaultRule][] = [
  ['a later page answers 404 ResourceGroupNotFound', (req) => (req.operation === 'managedClusters.listByResourceGroup' && req.page === 'later' ? notFound(404) : undefined)],
  ['the first page answers 503 with the code ResourceGroupNotFound', (req) => (req.operation === 'managedClusters.listByResourceGroup' ? notFound(503) : undefined)],
  ['the first page answers 429 with the code ResourceGroupNotFound', (req) => (req.operation === 'managedClusters.listByResourceGroup' ? notFound(429) : undefined)],
];

describe('ResourceGroupNotFound that the answer contradicts', () => {
  for (const [what, rule] of FAULTS) {
    it(`${what}: the source fails and the group's clusters stay`, async () => {
      proxy.fault = undefined;
      const clean = await run();
      const ctx = context('g1');
      const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
      expect(current).toHaveLength(3);

      proxy.fault = rule;
      try {
        const spoiled = await run();
        expect(spoiled.map((r) => r.ok)).toEqual([false]);
        const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
        expect(plan.items.filter((i) => i.action === 'delete')).toEqual([]);
        expect(plan.items.map((i) => i.action)).toEqual(['stale', 'stale', 'stale']);
      } finally {
        proxy.fault = undefined;
      }
    });
  }

  it('a first page that answers 404 ResourceGroupNotFound is still a deleted group: its clusters go', async () => {
    proxy.fault = undefined;
    const ctx = context('g1');
    const current = [...evaluate(await run(), ctx).candidates.values()].map((c) => stored(c.server));
    proxy.fault = (req) => (req.operation === 'managedClusters.listByResourceGroup' ? notFound(404) : undefined);
    try {
      const gone = await run();
      expect(gone).toMatchObject([{ok: true, clusters: [], skippedReason: 'resource group rg-a not found'}]);
      expect(reconcile(current, evaluate(gone, ctx), gone, 'g1').items.map((i) => i.action)).toEqual(['delete', 'delete', 'delete']);
    } finally {
      proxy.fault = undefined;
    }
  });
});
