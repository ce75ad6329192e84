/**
 * Adversarial: an ARM managed-cluster record whose `name` names one cluster and whose resource id
 * another — an answer not to be trusted (a cache or proxy that mixed records up). Read by its
 * `name`, the record registered the cluster of its id under another cluster's name (that one's
 * user credential, endpoint and CA fetched by id), and the cluster of its id looked unlisted and
 * was deregistered. It is malformed: the id's cluster keeps its entry (stale), nothing is renamed
 * or created from it.
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

describe('a managed-cluster record whose name and resource id disagree', () => {
  for (const claimed of ['a2', 'a3']) {
    it(`(a1's record named ${claimed}) keeps a1's entry and registers nothing from it`, async () => {
      proxy.fault = undefined;
      const clean = await run();
      const ctx = context('g1');
      const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
      const byCluster = new Map(current.map((s) => [s.spec.cluster.spec.azure?.resource_name, s]));
      expect([...byCluster.keys()].sort()).toEqual(['a1', 'a2']);

      proxy.fault = when({operation: 'managedClusters.list'}, mutateJson((body) => ({
        ...body,
        value: (body['value'] as Record<string, unknown>[]).map((r) => (r['name'] === 'a1' ? {...r, name: claimed} : r)),
      })));
      const spoiled = await run();
      const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
      expect(plan.items.filter((i) => i.action === 'delete'), 'a listing whose a1 record names another cluster deregistered something').toEqual([]);
      expect(plan.items.filter((i) => i.action === 'create')).toEqual([]);
      expect(plan.items.find((i) => i.name === byCluster.get('a1')?.metadata.name)?.action).toBe('stale');
      // a2 keeps its own endpoint, not the one of a1's credential.
      const a2 = plan.items.find((i) => i.name === byCluster.get('a2')?.metadata.name);
      expect(a2?.server?.status?.endpoint).toBe(byCluster.get('a2')?.status?.endpoint);
    });
  }
});
