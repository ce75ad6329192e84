/**
 * Adversarial: with `subscriptions: ["*"]` the subscriptions list decides which subscriptions are
 * listed at all. A record of that list without a subscription id, or in a state Azure does not
 * document, is malformed: it must fail the listing (everything kept), not drop the subscription
 * and with it every cluster registered there.
 *
 * A list that shows one subscription twice, in two states (a list is no snapshot: a subscription
 * whose record changed while the pages were read can be on two of them): whichever record came
 * first decided, so `Deleted` then `Enabled` dropped the subscription and deregistered its
 * clusters, though the same list also said it could be listed. As for AWS accounts (ACTIVE in one
 * listing wins), a record in a listable state wins, whatever the order.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {mutateJson, when, type FaultProxy} from '../fakes/faults.ts';
import {runThroughProxy, startProxiedArm, SUB_A, SUB_B, TENANT, type ProxiedArm} from '../clouds/aks-helpers.ts';
import {context, stored} from '../discovery/builders.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new ArmWorld();
  for (const sub of [SUB_A, SUB_B]) {
    world.addSubscription({subscriptionId: sub, tenantId: TENANT});
    world.addCluster({subscriptionId: sub, resourceGroup: 'rg-a', name: `c-${sub.slice(-2)}`});
  }
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());

const run = () => runThroughProxy(armp);

describe('a subscriptions list with a malformed record', () => {
  const spoilers: [string, (record: Record<string, unknown>) => Record<string, unknown>][] = [
    ['no subscriptionId', ({subscriptionId: _id, ...rest}) => rest],
    ['a state Azure does not document', (record) => ({...record, state: 'enabled'})],
    // Subscription ids are GUIDs: a garbled one names no subscription, and the one it garbled is missing from the list.
    ['a subscriptionId that is no subscription id', (record) => ({...record, subscriptionId: `${String(record['subscriptionId']).slice(0, -1)}x`, id: `/subscriptions/${String(record['subscriptionId']).slice(0, -1)}x`})],
  ];
  for (const [what, spoil] of spoilers) {
    it(`(${what}) deletes nothing`, async () => {
      proxy.fault = undefined;
      const clean = await run();
      const ctx = context('g1');
      const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
      expect(current).toHaveLength(2);

      proxy.fault = when({operation: 'subscriptions.list'}, mutateJson((body) => ({
        ...body,
        value: (body['value'] as Record<string, unknown>[]).map((r) => (String(r['subscriptionId']) === SUB_B ? spoil(r) : r)),
      })));
      const spoiled = await run();
      const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
      expect(plan.items.filter((i) => i.action === 'delete').map((i) => i.reason)).toEqual([]);
    });
  }
});

describe('a subscriptions list with one subscription twice, in two states', () => {
  for (const state of ['Deleted', 'Disabled']) {
    for (const where of ['before', 'after'] as const) {
      it(`a ${state} record ${where} its Enabled one: the subscription is listed and nothing is deleted or kept stale`, async () => {
        proxy.fault = undefined;
        const clean = await run();
        const ctx = context('g1');
        const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
        expect(current).toHaveLength(2);

        proxy.fault = when({operation: 'subscriptions.list'}, mutateJson((body) => {
          const value = body['value'] as Record<string, unknown>[];
          const record = value.find((r) => String(r['subscriptionId']) === SUB_B);
          const other = {...record, state};
          return {...body, value: where === 'before' ? [other, ...value] : [...value, other]};
        }));
        try {
          const spoiled = await run();
          const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
          expect(plan.items.filter((i) => i.action !== 'unchanged').map((i) => [i.name, i.action])).toEqual([]);
        } finally {
          proxy.fault = undefined;
        }
      });
    }
  }
});
