/**
 * A managed clusters page that ARM answers byte for byte as in the source's last good listing is
 * not parsed again (src/clouds/azure/arm-list.ts). These tests prime that memory with a good
 * listing, then spoil the next one through the fault proxy: every fault must still fail the
 * source (or mark its cluster malformed) exactly as it does on a first listing.
 */
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import type {AzureSources} from '../../src/clouds/azure/sources.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {answer, mutateJson, when, type FaultProxy, type ProxyFault} from '../fakes/faults.ts';
import {fakeSources, resultOf, runThroughProxy, startProxiedArm, SUB_A, TENANT, type ProxiedArm} from './aks-helpers.ts';

let world: ArmWorld;
let armp: ProxiedArm;
let proxy: FaultProxy;
/** The body of each managed clusters page (first, later) as the proxy last passed it on. */
const bodies: Record<string, string> = {};

beforeAll(async () => {
  world = new ArmWorld();
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  // Three clusters, two to a page: a first page and a later one.
  for (const name of ['a1', 'a2', 'a3']) world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name});
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());

/** Passes every answer on unchanged, noting the managed clusters pages' bodies. */
function recordPages(): void {
  proxy.fault = (req) =>
    req.operation === 'managedClusters.list'
      ? {kind: 'mutate', rewrite: (text) => {
        bodies[req.page] = text;
        return text;
      }}
      : undefined;
}

let sources: AzureSources;
beforeEach(() => {
  ({sources} = fakeSources(armp.arm));
  recordPages();
});

async function run(): Promise<SourceResult> {
  return resultOf(await runThroughProxy(armp, sources), `aks:${SUB_A}`);
}

describe('a listing after a good one, its pages answered as before', () => {
  it('lists the same clusters as the same objects', async () => {
    const first = await run();
    const second = await run();
    expect(second.ok).toBe(true);
    expect(second.clusters.map((c) => c.name)).toEqual(['a1', 'a2', 'a3']);
    second.clusters.forEach((c, i) => expect(c).toBe(first.clusters[i]));
  });

  it('keeps handing on the same objects over many listings, and still sees a change, and the change undone', async () => {
    const first = await run();
    for (let i = 0; i < 3; i++) (await run()).clusters.forEach((c, j) => expect(c).toBe(first.clusters[j]));
    world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a2'}, {tags: {team: 'b'}});
    try {
      const changed = await run();
      expect(changed.clusters.find((c) => c.name === 'a2')?.tags).toEqual({team: 'b'});
      expect(changed.clusters.find((c) => c.name === 'a1')).toBe(first.clusters[0]);
    } finally {
      world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a2'}, {tags: {}});
    }
    expect((await run()).clusters.find((c) => c.name === 'a2')?.tags).toEqual({});
  });

  it('sees a changed cluster on an otherwise identical page', async () => {
    await run();
    world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a3'}, {tags: {team: 'c'}});
    try {
      const result = await run();
      expect(result.clusters.find((c) => c.name === 'a3')?.tags).toEqual({team: 'c'});
    } finally {
      world.updateCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'a3'}, {tags: {}});
    }
  });
});

describe('a listing after a good one fails its source as before', () => {
  const faults: [string, () => ProxyFault, 'first' | 'later', RegExp][] = [
    ['the later page answered with the first page again (its nextLink repeats)', () => answer(200, bodies['first'] ?? ''), 'later', /nextLink it had already returned/],
    ['the first page answered as a 203', () => answer(203, bodies['first'] ?? ''), 'first', /status 203 instead of a 200 list page/],
    ['the later page truncated', () => ({kind: 'truncate'}), 'later', /aborted/],
    ['the later page without value', () => answer(200, '{}'), 'later', /value is missing/],
    ['an item that is not an object', () => mutateJson((body) => ({...body, value: [...(body['value'] as unknown[]), 'a4']})), 'first', /not a resource/],
  ];
  for (const [label, fault, page, message] of faults) {
    it(`${label}: the source fails, listing nothing; the next good listing is the last good one`, async () => {
      const good = await run();
      expect(good.ok).toBe(true);
      proxy.fault = when({operation: 'managedClusters.list', page}, fault());
      const spoiled = await run();
      expect(spoiled).toMatchObject({ok: false, clusters: [], malformed: []});
      expect(spoiled.error?.message).toMatch(message);
      recordPages();
      const after = await run();
      after.clusters.forEach((c, i) => expect(c).toBe(good.clusters[i]));
    });
  }

  it('a field of the wrong type marks its cluster malformed, the rest listed as before', async () => {
    const good = await run();
    proxy.fault = when({operation: 'managedClusters.list', page: 'first'}, mutateJson((body) => {
      const [first, ...rest] = body['value'] as Record<string, unknown>[];
      return {...body, value: [{...first, tags: 'env=prod'}, ...rest]};
    }));
    const result = await run();
    expect(result.ok).toBe(true);
    expect(result.malformed).toEqual([{name: 'a1', sourceId: `aks:${SUB_A}`, reason: expect.stringMatching(/tags is a string/)}]);
    expect(result.clusters.map((c) => c.name)).toEqual(['a2', 'a3']);
    expect(result.clusters[1]).toBe(good.clusters[2]);
  });
});
