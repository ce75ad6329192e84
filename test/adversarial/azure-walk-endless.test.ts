/**
 * Adversarial: Azure list answers that never end — a management group's descendants, or the
 * subscriptions list, answering page after page, each with a new `nextLink`. The planner read them
 * without the cycle's signal: when the cycle's deadline cut planning off (nothing deleted), the
 * walk went on in the background up to 10,000 pages, one more such walk each cycle. Aborted with the
 * cycle, the plan ends at once (the matcher failed, nothing deleted) and no further page is asked.
 * The AKS sources as production builds them, through the fault proxy in front of the ARM fake.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {ArmWorld} from '../fakes/arm-world.ts';
import {answer, type FaultProxy} from '../fakes/faults.ts';
import {fakeSources, matcher, startProxiedArm, SUB_A, TENANT, type ProxiedArm} from '../clouds/aks-helpers.ts';

let armp: ProxiedArm;
let proxy: FaultProxy;

beforeAll(async () => {
  const world = new ArmWorld();
  world.managementGroups.add('mg-a');
  world.addSubscription({subscriptionId: SUB_A, tenantId: TENANT});
  world.managementGroups.placeSubscription(SUB_A, 'mg-a');
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg-a', name: 'c1'});
  armp = await startProxiedArm(world);
  ({proxy} = armp);
});
afterAll(() => armp.close());

const LISTS: [string, string, string][] = [
  ['management group descendants', 'managementGroups.descendants', '/providers/Microsoft.Management/managementGroups/mg-a/descendants?api-version=2021-04-01'],
  ['subscriptions', 'subscriptions.list', '/subscriptions?api-version=2022-12-01'],
];

describe('an Azure list that never ends', () => {
  for (const [what, operation, path] of LISTS) {
    it(`(${what}) stops with the cycle: the matcher fails, and no page is asked after`, async () => {
      const cycle = new AbortController();
      let page = 0;
      proxy.fault = (req) => {
        if (req.operation !== operation) return undefined;
        // The cycle's deadline comes while the list is being read.
        if (++page === 5) cycle.abort(Object.assign(new Error('cycle deadline'), {name: 'TimeoutError'}));
        return answer(200, JSON.stringify({value: [], nextLink: `${proxy.url}${path}&$skiptoken=endless-${page}`}));
      };
      try {
        const {sources} = fakeSources(armp.arm);
        const planned = await sources.plan([matcher(armp.arm, {resource_manager_endpoint: proxy.url, management_groups: ['mg-a']})], {registered: () => Promise.resolve([]), signal: cycle.signal, now: Date.now});
        expect(planned.fetchers).toEqual([]);
        expect(planned.failed.map((f) => [f.source.id, f.ok])).toEqual([['aks:*', false]]);
        // A call already on the wire may still arrive; a list still being read would ask again within a round trip.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const asked = page;
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(page).toBe(asked);
        expect(page).toBeLessThan(20);
      } finally {
        proxy.fault = undefined;
      }
    }, 60_000);
  }
});
