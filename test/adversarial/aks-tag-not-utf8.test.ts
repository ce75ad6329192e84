/**
 * Adversarial: a managed-cluster record whose tag bytes were not UTF-8 (a proxy that re-encodes
 * the page, a corrupted answer) decodes with U+FFFD in place of the bad bytes. Read as the
 * cluster's tags, `env: pro\uFFFD` no longer matched `tags: {env: prod}` (deregistered) and a
 * garbled `TeleportKubernetesName` renamed the cluster (its entry deleted). Such a record is
 * malformed: its entry is kept (stale), nothing renamed. The decoded text is what the fault proxy
 * sends here (U+FFFD, as Node's and the SDK's UTF-8 decoders give it for any bad byte).
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

describe('a managed-cluster tag with bytes that were not UTF-8', () => {
  it('deregisters and renames nothing; both records are malformed', async () => {
    proxy.fault = undefined;
    const ctx = context('g1', {env: 'prod'});
    const clean = await runThroughProxy(armp);
    const current = [...evaluate(clean, ctx).candidates.values()].map((c) => stored(c.server));
    expect(current.map((s) => s.metadata.name).sort()).toEqual(['a1-aks-eastus-rg-a-00000000-0000-0000-0000-0000000000aa', 'payments']);

    proxy.fault = when({operation: 'managedClusters.list'}, mutateJson((body) => ({
      ...body,
      value: (body['value'] as Record<string, unknown>[]).map((r) => {
        const tags = r['tags'] as Record<string, unknown>;
        if (r['name'] === 'a1') return {...r, tags: {...tags, env: 'pro\uFFFD'}};
        if (r['name'] === 'a2') return {...r, tags: {...tags, TeleportKubernetesName: 'paym\uFFFDnts'}};
        return r;
      }),
    })));
    try {
      const spoiled = await runThroughProxy(armp);
      const plan = reconcile(current, evaluate(spoiled, ctx), spoiled, 'g1');
      expect(plan.items.filter((i) => i.action === 'delete').map((i) => `${i.name}: ${i.reason}`)).toEqual([]);
      expect(plan.items.filter((i) => i.action === 'create').map((i) => i.name)).toEqual([]);
      expect(spoiled.flatMap((r) => r.malformed.map((m) => m.name)).sort()).toEqual(['a1', 'a2']);
    } finally {
      proxy.fault = undefined;
    }
  });
});
