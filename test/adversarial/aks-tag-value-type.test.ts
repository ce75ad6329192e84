/**
 * Adversarial: ARM tags are a map of strings. A record whose tag value is of another JSON type
 * (`{"env": ["prod"]}`, `{"env": 7}`, `{"env": null}`) had that tag dropped silently: the cluster then
 * no longer matched `tags: {env: prod}` and was deregistered, or lost its `TeleportKubernetesName`
 * and was renamed — a malformed answer changing how the cluster is labelled and named. Such a
 * record is malformed: its entry is kept (stale), nothing renamed.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {mutateJson, when, type FaultProxy} from '../fakes/faults.ts';
import {runThroughProxy, startProxiedArm, SUB_A, TENANT, type ProxiedArm} from '../clouds/aks-helpers.ts';
import {context, stored} from '../discovery/builders.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a1', tags: {env: 'prod'}});
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a2', tags: {env: 'prod', TeleportKubernetesName: 'payments'}});
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());

const run = () => runThroughProxy(armp);

describe('a managed-cluster tag value that is not a string', () => {
  for (const [what, value] of [['a list', ['x']], ['a number', 7], ['null', null], ['an object', {v: 'prod'}]] as const) {
    it(`(${what}) deregisters and renames nothing`, async () => {
      proxy.fault = undefined;
      const ctx = context('g1', {env: 'prod'});
      const clean = await run();
      const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
      expect(current.map((s) => s.metadata.name).sort()).toEqual(['a1-aks-eastus-rg-a-00000000-0000-0000-0000-0000000000aa', 'payments']);

      // a1's `env` and a2's name tag come back of the wrong type.
      proxy.fault = when({operation: 'managedClusters.list'}, mutateJson((body) => ({
        ...body,
        value: (body['value'] as Record<string, unknown>[]).map((r) => {
          const tags = r['tags'] as Record<string, unknown>;
          if (r['name'] === 'a1') return {...r, tags: {...tags, env: value}};
          if (r['name'] === 'a2') return {...r, tags: {...tags, TeleportKubernetesName: value}};
          return r;
        }),
      })));
      const spoiled = await run();
      const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
      expect(plan.items.filter((i) => i.action === 'delete').map((i) => `${i.name}: ${i.reason}`)).toEqual([]);
      expect(plan.items.filter((i) => i.action === 'create').map((i) => i.name)).toEqual([]);
      proxy.fault = undefined;
    });
  }
});
