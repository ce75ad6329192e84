/**
 * Adversarial: an ARM managed-cluster record whose `name` is missing or unusable, but whose
 * resource id still names the cluster, is malformed. The entry of that cluster must be kept
 * (stale), not deleted because the malformed record was filed under "(unnamed)".
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {mutateJson, when, type FaultProxy} from '../fakes/faults.ts';
import {runThroughProxy, startTwoClusterArm, type ProxiedArm} from '../clouds/aks-helpers.ts';
import {context, stored} from '../discovery/builders.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;

beforeAll(async () => {
  armp = await startTwoClusterArm();
  ({proxy} = armp);
});
afterAll(() => armp.close());

const run = () => runThroughProxy(armp);

describe('a managed-cluster record without a usable name', () => {
  const spoilers: [string, (record: Record<string, unknown>) => Record<string, unknown>][] = [
    ['no name', ({name: _name, ...rest}) => rest],
    ['a name that is not a string', (record) => ({...record, name: 7})],
  ];
  for (const [what, spoil] of spoilers) {
    it(`with ${what} keeps the cluster's entry`, async () => {
      proxy.fault = undefined;
      const clean = await run();
      const ctx = context('g1');
      const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
      expect(current.map((s) => s.spec.cluster.spec.azure?.resource_name).sort()).toEqual(['a1', 'a2']);

      proxy.fault = when({operation: 'managedClusters.list', page: 'first'}, mutateJson((body) => ({
        ...body,
        value: (body['value'] as Record<string, unknown>[]).map((r) => (r['name'] === 'a1' ? spoil(r) : r)),
      })));
      const spoiled = await run();
      const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
      expect(plan.items.filter((i) => i.action === 'delete')).toEqual([]);
      expect(plan.items.find((i) => i.name.startsWith('a1-'))?.action).toBe('stale');
    });
  }
});
