// `management_groups` on an azure matcher, against the fake ARM: the descendants of every named
// group (nested groups, every page) scope `subscriptions: ["*"]`; a subscription that moves out
// is deregistered only after two walks in a row that succeed no longer have it; a failed walk keeps everything.
import {afterAll, beforeEach, describe, expect, it} from 'vitest';
import type {SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {armClassifier, mutateJson, startFaultProxy, when} from '../fakes/faults.ts';
import {sharedServerTls} from '../fakes/tls-ca.ts';
import {TENANT, fakeSources, matcher, resultOf, runPlan} from './aks-helpers.ts';

const sub = (n: number): string => `00000000-0000-0000-0000-0000000000${n.toString(16).padStart(2, '0')}`;
// Under mg-root: S1 directly, S2 in mg-a, S3 in mg-a1 (nested twice), S6 Disabled in mg-a.
// Outside: S4 in mg-other, S5 in no group.
const [S1, S2, S3, S4, S5, S6] = [1, 2, 3, 4, 5, 6].map(sub) as [string, string, string, string, string, string];

let world: ArmWorld;
let arm: FakeArm;

beforeEach(async () => {
  await arm?.close();
  world = new ArmWorld();
  const groups = world.managementGroups;
  groups.add('mg-root');
  groups.add('mg-a', {parent: 'mg-root'});
  groups.add('mg-a1', {parent: 'mg-a'});
  groups.add('mg-empty', {parent: 'mg-a1'});
  groups.add('mg-other');
  for (const [id, group] of [[S1, 'mg-root'], [S2, 'mg-a'], [S3, 'mg-a1'], [S4, 'mg-other'], [S5, undefined], [S6, 'mg-a']] as const) {
    world.addSubscription({subscriptionId: id, tenantId: TENANT, ...(id === S6 ? {state: 'Disabled' as const} : {})});
    groups.placeSubscription(id, group);
    world.addCluster({subscriptionId: id, resourceGroup: 'rg', name: `c-${id.slice(-2)}`});
  }
  arm = await startFakeArm({world});
});

afterAll(async () => {
  await arm.close();
});

const ids = (results: readonly SourceResult[]): string[] => results.map((r) => r.source.id);
const clusters = (results: readonly SourceResult[]): string[] => results.flatMap((r) => r.clusters.map((c) => c.name)).sort();

describe('management groups scope subscriptions: ["*"]', () => {
  it('finds every cluster of the subscriptions under the group, nested groups included, and none outside', async () => {
    const {sources} = fakeSources(arm);
    const results = await runPlan(await sources.plan([matcher(arm, {management_groups: ['mg-root']})]));

    // S6 is Disabled: not listed, its source skipped (whatever it had registered is kept).
    expect(ids(results)).toEqual([`aks:${S1}`, `aks:${S2}`, `aks:${S3}`, `aks:${S6}`]);
    expect(resultOf(results, `aks:${S6}`)).toMatchObject({ok: true, notAListing: true, skippedReason: expect.stringContaining('Disabled') as unknown});
    expect(results.every((r) => r.ok)).toBe(true);
    expect(clusters(results)).toEqual(['c-01', 'c-02', 'c-03']);
    expect(resultOf(results, `aks:${S3}`).clusters[0]).toMatchObject({account: S3, tenantId: TENANT});
    // 3 groups and 4 subscriptions below mg-root, two to a page: every page was read.
    expect(arm.stats.count({operation: 'managementGroups.descendants', status: 200})).toBe(4);
    expect(arm.stats.requests.filter((r) => r.operation === 'managementGroups.descendants').every((r) => r.apiVersion === '2021-04-01')).toBe(true);
  });

  it('takes the union of several groups, each subscription once', async () => {
    const {sources} = fakeSources(arm);
    const results = await runPlan(await sources.plan([matcher(arm, {management_groups: ['mg-a1', 'MG-A', 'mg-other']})]));

    expect(ids(results)).toEqual([`aks:${S2}`, `aks:${S3}`, `aks:${S4}`, `aks:${S6}`]);
  });

  it('an empty group is a successful walk with no subscription', async () => {
    const {sources} = fakeSources(arm);
    const planned = await sources.plan([matcher(arm, {management_groups: ['mg-empty']})]);

    expect(planned).toEqual({fetchers: [], failed: []});
  });

  it('accepts subscriptions spelt with the nested resource type of the 2023-04-01 examples', async () => {
    const proxy = await startFaultProxy({upstream: arm.url, upstreamCa: arm.caPem, tls: await sharedServerTls(), classify: armClassifier()});
    try {
      proxy.fault = when({operation: 'managementGroups.descendants'}, mutateJson((body) => ({
        ...body,
        value: (body['value'] as Record<string, unknown>[]).map((d) => (d['type'] === '/subscriptions' ? {...d, type: 'Microsoft.Management/managementGroups/subscriptions'} : d)),
      })));
      const {sources} = fakeSources(arm);
      const results = await runPlan(await sources.plan([matcher(arm, {resource_manager_endpoint: proxy.url, management_groups: ['mg-a']})]));
      expect(ids(results)).toEqual([`aks:${S2}`, `aks:${S3}`, `aks:${S6}`]);
    } finally {
      await proxy.close();
    }
  });

  it('keeps a subscription of the group the identity cannot list as its own failed source, with its id and reason', async () => {
    const hidden = sub(0x77);
    world.managementGroups.placeSubscription(hidden, 'mg-a1');
    arm.setFault((c) => (c.subscription === hidden ? {status: 403} : undefined));
    const {sources} = fakeSources(arm);
    const results = await runPlan(await sources.plan([matcher(arm, {management_groups: ['mg-a']})]));

    expect(ids(results)).toEqual([`aks:${S2}`, `aks:${S3}`, `aks:${S6}`, `aks:${hidden}`]);
    expect(resultOf(results, `aks:${hidden}`)).toMatchObject({
      ok: false,
      source: {account: hidden},
      error: {reason: 'access_denied', code: 'AuthorizationFailed', operation: 'ManagedClusters.List'},
    });
    expect(resultOf(results, `aks:${S3}`).ok).toBe(true);
  });
});

describe('a subscription moving out of the group', () => {
  it('is deregistered only after two successful walks in a row no longer have it', async () => {
    const {sources} = fakeSources(arm);
    const m = [matcher(arm, {management_groups: ['mg-a']})];
    const first = await runPlan(await sources.plan(m));
    const current = [...evaluate(first, context()).candidates.values()].map((c) => stored(c.server));
    expect(current.map((s) => s.spec.cluster.spec.azure?.resource_name).sort()).toEqual(['c-02', 'c-03']);

    world.managementGroups.placeSubscription(S3, 'mg-other');
    // The walk fails (500 on every try): nothing under the matcher may go.
    arm.setFault((c) => (c.operation === 'managementGroups.descendants' ? {status: 500} : undefined));
    const failed = await runPlan(await sources.plan(m));
    expect(failed).toEqual([expect.objectContaining({
      ok: false,
      source: expect.objectContaining({id: 'aks:*', account: ''}) as unknown,
      error: expect.objectContaining({reason: 'other', code: 'InternalServerError', operation: 'ManagementGroups.GetDescendants'}) as unknown,
    })]);
    expect(failed[0]?.error?.message).toMatch(/^management group mg-a: /);
    expect(reconcile(current, evaluate(failed, context()), failed, 'g1').items.map((i) => i.action)).toEqual(['stale', 'stale']);

    arm.setFault(undefined);
    // One good walk without it could be a move racing the walk: kept, stale, its source skipped.
    const once = await runPlan(await sources.plan(m));
    expect(ids(once)).toEqual([`aks:${S2}`, `aks:${S3}`, `aks:${S6}`]);
    expect(resultOf(once, `aks:${S3}`)).toMatchObject({ok: true, notAListing: true, skippedReason: expect.stringContaining('missing from this management group walk') as unknown});
    expect(reconcile(current, evaluate(once, context()), once, 'g1').items.map((i) => [i.labels['subscription-id'], i.action])).toEqual([[S2, 'unchanged'], [S3, 'stale']]);
    // The second good walk without it deregisters it.
    const walked = await runPlan(await sources.plan(m));
    expect(ids(walked)).toEqual([`aks:${S2}`, `aks:${S6}`]);
    const plan = reconcile(current, evaluate(walked, context()), walked, 'g1');
    expect(plan.items.map((i) => [i.labels['subscription-id'], i.action])).toEqual([[S2, 'unchanged'], [S3, 'delete']]);
  });
});

describe('walk failures fail the matcher and name the group', () => {
  const cases: {name: string; group?: string; fault?: Parameters<FakeArm['setFault']>[0]; reason: string; code: string; message: RegExp}[] = [
    {name: 'a group that does not exist (404)', group: 'mg-typo', reason: 'not_found', code: 'NotFound', message: /management group mg-typo: .*not found/},
    {
      name: '403 on the group',
      fault: (c) => (c.operation === 'managementGroups.descendants' ? {status: 403} : undefined),
      reason: 'access_denied',
      code: 'AuthorizationFailed',
      message: /Microsoft\.Management\/managementGroups\/descendants\/read/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      arm.setFault(c.fault);
      const {sources} = fakeSources(arm);
      const planned = await sources.plan([matcher(arm, {management_groups: [c.group ?? 'mg-a']})]);
      expect(planned.fetchers).toEqual([]);
      expect(planned.failed).toEqual([expect.objectContaining({ok: false, source: expect.objectContaining({id: 'aks:*'}) as unknown})]);
      expect(planned.failed[0]?.error).toMatchObject({reason: c.reason, code: c.code, operation: 'ManagementGroups.GetDescendants'});
      expect(planned.failed[0]?.error?.message).toMatch(c.message);
    });
  }

  it('a nextLink that comes back again fails the walk instead of paging forever', async () => {
    const proxy = await startFaultProxy({upstream: arm.url, upstreamCa: arm.caPem, tls: await sharedServerTls(), classify: armClassifier()});
    try {
      // The first page links to $skiptoken=mg-2 (through the proxy); every later page links there again.
      const again = `${proxy.url}/providers/Microsoft.Management/managementGroups/mg-root/descendants?api-version=2021-04-01&$skiptoken=mg-2`;
      proxy.fault = when({operation: 'managementGroups.descendants', page: 'later'}, mutateJson((body) => ({...body, nextLink: again})));
      const {sources} = fakeSources(arm);
      const planned = await sources.plan([matcher(arm, {resource_manager_endpoint: proxy.url, management_groups: ['mg-root']})]);
      expect(planned.failed[0]?.error).toMatchObject({reason: 'invalid_response', operation: 'ManagementGroups.GetDescendants'});
      expect(planned.failed[0]?.error?.message).toMatch(/a nextLink it had already returned/);
      expect(arm.stats.count({operation: 'managementGroups.descendants'})).toBe(2);
    } finally {
      await proxy.close();
    }
  });

  it('an item that is neither a group nor a subscription fails the walk as invalid_response', async () => {
    const proxy = await startFaultProxy({upstream: arm.url, upstreamCa: arm.caPem, tls: await sharedServerTls(), classify: armClassifier()});
    try {
      proxy.fault = when({operation: 'managementGroups.descendants', page: 'later'}, mutateJson((body) => ({
        ...body,
        value: [{id: '/providers/Microsoft.Something/else', type: 'Microsoft.Something/else', name: 'x'}],
      })));
      const {sources} = fakeSources(arm);
      const planned = await sources.plan([matcher(arm, {resource_manager_endpoint: proxy.url, management_groups: ['mg-root']})]);
      expect(planned.failed[0]?.error).toMatchObject({reason: 'invalid_response', code: 'InvalidResponse', operation: 'ManagementGroups.GetDescendants'});
      expect(planned.failed[0]?.error?.message).toMatch(/mg-root held an item of type "Microsoft.Something\/else"/);
    } finally {
      await proxy.close();
    }
  });
});
