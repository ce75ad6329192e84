/**
 * The fault matrix of the management groups walk (`management_groups` on an azure matcher):
 * every fault of the descendants call runs against `once` and `start` on a filled registry,
 * with the real SDK clients talking to the ARM fake through the fault proxy. For each: nothing
 * deregistered, the failure visible in the output / `/v1/status`, the metrics and one log line,
 * and recovery on the next clean cycle. One row fails a single subscription instead: only its
 * source fails, shown with its subscription id.
 */
import {copyFile, writeFile} from 'node:fs/promises';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {FailureReason} from '../../src/core/types.ts';
import {answer, mutateJson, when, type ProxyFaultRule} from '../fakes/faults.ts';
import {metricValue, once, start, SUBSCRIPTION, startHarness, type Harness} from './cloud-fault-harness.ts';

// The harness world has SUBSCRIPTION (a1..a3); this file adds SECOND (b1) and puts both under
// mg-platform, SUBSCRIPTION one level down in mg-team, so the descendants answer has two pages.
const SECOND = '00000000-0000-0000-0000-0000000000bb';
const OUTSIDE = '00000000-0000-0000-0000-0000000000cc';
const NAMES = [...['a1', 'a2', 'a3'].map((n) => `${n}-aks-eastus-rg-a-${SUBSCRIPTION}`), `b1-aks-eastus-rg-b-${SECOND}`].sort();
const ALL = 'aks:*';

interface Row {
  readonly fault: string;
  readonly rule: ProxyFaultRule;
  readonly source: string;
  readonly reason: FailureReason;
  /** false where `once`'s default ARM retries (1 s backoff, 5 tries) would only measure the SDK's patience. */
  readonly once?: boolean;
}

const walk = (page: 'first' | 'later') => ({operation: 'managementGroups.descendants', page});
const armError = (status: number, code: string): ReturnType<typeof answer> => answer(status, JSON.stringify({error: {code, message: `${code} injected`}}));

const ROWS: Row[] = [
  {fault: 'descendants: 500', rule: when(walk('first'), armError(500, 'InternalServerError')), source: ALL, reason: 'other', once: false},
  {fault: 'descendants: 403 AuthorizationFailed', rule: when(walk('first'), armError(403, 'AuthorizationFailed')), source: ALL, reason: 'access_denied'},
  {fault: 'descendants: 404 (group gone)', rule: when(walk('first'), armError(404, 'NotFound')), source: ALL, reason: 'not_found'},
  {fault: 'descendants: hang', rule: when(walk('first'), {kind: 'hang'}), source: ALL, reason: 'timeout', once: false},
  {fault: 'descendants first page: 200 {}', rule: when(walk('first'), answer(200, '{}')), source: ALL, reason: 'invalid_response'},
  {fault: 'descendants first page: 200 {"value":null}', rule: when(walk('first'), answer(200, '{"value":null}')), source: ALL, reason: 'invalid_response'},
  {fault: 'descendants first page: 200 empty body', rule: when(walk('first'), answer(200, '')), source: ALL, reason: 'invalid_response'},
  {fault: 'descendants later page: 200 {}', rule: when(walk('later'), answer(200, '{}')), source: ALL, reason: 'invalid_response'},
  // JSON.parse keeps the last of two equal keys: a second `"value":[]` or `"nextLink":null` would read as an empty or last page.
  {fault: 'descendants first page: a second "nextLink":null', rule: when(walk('first'), {kind: 'mutate', rewrite: (text) => text.replace(/\}\s*$/, ',"nextLink":null}')}), source: ALL, reason: 'invalid_response'},
  {fault: 'descendants later page: a second "value":[]', rule: when(walk('later'), {kind: 'mutate', rewrite: (text) => text.replace(/\}\s*$/, ',"value":[]}')}), source: ALL, reason: 'invalid_response'},
  {fault: 'descendants later page: 204', rule: when(walk('later'), {kind: 'answer', status: 204, body: ''}), source: ALL, reason: 'invalid_response'},
  {
    fault: 'descendants later page: a subscription without an id',
    rule: when(walk('later'), mutateJson((body) => ({...body, value: [{type: '/subscriptions', properties: {}}]}))),
    source: ALL,
    reason: 'invalid_response',
  },
  {
    fault: 'descendants later page: an item of an unknown type',
    rule: when(walk('later'), mutateJson((body) => ({...body, value: [{id: '/x/y', type: 'Microsoft.Unknown/things', name: 'y'}]}))),
    source: ALL,
    reason: 'invalid_response',
  },
  {fault: 'descendants: truncated answer', rule: when(walk('later'), {kind: 'truncate'}), source: ALL, reason: 'other', once: false},
  {fault: 'descendants: connection reset', rule: when(walk('first'), {kind: 'reset'}), source: ALL, reason: 'other', once: false},
  {
    fault: 'one subscription of the group: managedClusters 200 cut off mid-JSON',
    rule: when({operation: 'managedClusters.list', account: SECOND}, answer(200, '{"value":[{"id":"/subscriptions/')),
    source: `aks:${SECOND}`,
    reason: 'invalid_response',
  },
  {
    fault: 'one subscription of the group: managedClusters 403',
    rule: when({operation: 'managedClusters.list', account: SECOND}, armError(403, 'AuthorizationFailed')),
    source: `aks:${SECOND}`,
    reason: 'access_denied',
  },
];

let h: Harness;
let rows = 0;
let golden: string;

/** A config of one management-group matcher over the harness's ARM proxy, with its own registry. */
async function config(name: string, relaxed = false): Promise<{file: string; text: string}> {
  const file = path.join(h.dir, `${name}.yaml`);
  const text = `version: v1
discovery_service:
  discovery_group: matrix
  poll_interval: 1h
${relaxed ? '' : '  request_timeout: 2s\n  cycle_timeout: 5s\n'}  azure:
    - types: [aks]
      management_groups: [mg-platform]
      resource_manager_endpoint: ${h.armProxy.url}
storage: {type: sqlite, path: ${h.registryPath(name)}}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
log: {level: debug}
`;
  await writeFile(file, text);
  return {file, text};
}

beforeAll(async () => {
  h = await startHarness();
  const world = h.arm.world;
  world.managementGroups.add('mg-platform');
  world.managementGroups.add('mg-team', {parent: 'mg-platform'});
  world.managementGroups.add('mg-elsewhere');
  world.addSubscription({subscriptionId: SECOND});
  world.addSubscription({subscriptionId: OUTSIDE});
  world.addCluster({subscriptionId: SECOND, resourceGroup: 'rg-b', name: 'b1', location: 'eastus'});
  world.addCluster({subscriptionId: OUTSIDE, resourceGroup: 'rg-c', name: 'c1', location: 'eastus'});
  world.managementGroups.placeSubscription(SUBSCRIPTION, 'mg-team');
  world.managementGroups.placeSubscription(SECOND, 'mg-platform');
  world.managementGroups.placeSubscription(OUTSIDE, 'mg-elsewhere');

  const {file} = await config('golden', true);
  const clean = await once(file);
  expect(clean.code, JSON.stringify(clean.json.sources)).toBe(0);
  // Every cluster under the group, nested one included; none of the subscription outside it.
  expect(clean.json.clusters.filter((c) => c.action === 'create').map((c) => c.name).sort()).toEqual(NAMES);
  golden = h.registryPath('golden');
});
afterAll(async () => {
  await h?.close();
});

const kept = (json: Awaited<ReturnType<typeof once>>['json']): string[] =>
  json.clusters.filter((c) => c.action !== 'delete' && c.action !== 'skip').map((c) => c.name).sort();

describe('management group walk faults delete nothing', () => {
  for (const row of ROWS) {
    it(row.fault, async () => {
      const name = `row-${rows++}`;
      const {file, text} = await config(name);
      await copyFile(golden, h.registryPath(name));
      h.armProxy.fault = row.rule;
      try {
        if (row.once !== false) {
          const {code, json} = await once(file);
          expect(code).toBe(1);
          expect(json.counts['delete']).toBe(0);
          expect(kept(json)).toEqual(NAMES);
          expect(json.sources.find((s) => s.id === row.source)?.error?.reason, JSON.stringify(json.sources)).toBe(row.reason);
        }

        const service = await start(file, text);
        try {
          expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(NAMES);
          const status = await service.status();
          const failing = status.sources.find((s) => s.id === row.source);
          expect(failing, JSON.stringify(status)).toMatchObject({ok: false, last_error: {reason: row.reason}});
          if (row.source !== ALL) expect(failing).toMatchObject({account: SECOND});
          const metrics = await service.metrics();
          expect(metricValue(metrics, 'kube_discovery_source_errors_total', {reason: row.reason})).toBeGreaterThanOrEqual(1);
          // Bounded labels: no subscription id in any series.
          expect(metrics.split('\n').filter((l) => !l.startsWith('#') && l.includes(SECOND))).toEqual([]);
          expect(service.logs.filter((l) => l['event'] === 'source_failed' && l['source'] === row.source)).toHaveLength(1);
          if (row.source !== ALL) {
            // The other subscription of the group reconciled normally.
            expect((await service.servers()).filter((s) => s.status?.stale).map((s) => s.metadata.name)).toEqual([`b1-aks-eastus-rg-b-${SECOND}`]);
          }

          h.armProxy.fault = undefined;
          await service.cycle();
          const servers = await service.servers();
          expect(servers.map((s) => s.metadata.name).sort()).toEqual(NAMES);
          expect(servers.filter((s) => s.status?.stale).map((s) => s.metadata.name)).toEqual([]);
          expect((await service.status()).sources.filter((s) => !s.ok)).toEqual([]);
        } finally {
          await service.stop();
        }
      } finally {
        h.armProxy.fault = undefined;
      }
    }, 90_000);
  }

  it('a subscription that moved out of the group is deregistered after two successful walks without it (two `once` runs), and only it', async () => {
    const name = `row-${rows++}`;
    const {file} = await config(name);
    await copyFile(golden, h.registryPath(name));
    h.arm.world.managementGroups.placeSubscription(SECOND, 'mg-elsewhere');
    try {
      h.armProxy.fault = when(walk('first'), armError(500, 'InternalServerError'));
      const during = await once(file);
      expect(during.json.counts['delete'] ?? 0).toBe(0);
      h.armProxy.fault = undefined;
      // The first successful walk without it may have raced a move: kept, stale (its mark is in the registry).
      const first = await once(file);
      expect(first.json.counts['delete'] ?? 0).toBe(0);
      expect(first.json.clusters.find((c) => c.name === `b1-aks-eastus-rg-b-${SECOND}`)?.action).toBe('stale');
      // The second (another process: the registry tells it the walk before missed it too) deregisters it.
      const after = await once(file);
      expect(after.code).toBe(0);
      expect(after.json.clusters.filter((c) => c.action === 'delete').map((c) => c.name)).toEqual([`b1-aks-eastus-rg-b-${SECOND}`]);
      expect(kept(after.json)).toEqual(NAMES.filter((n) => !n.endsWith(SECOND)));
    } finally {
      h.armProxy.fault = undefined;
      h.arm.world.managementGroups.placeSubscription(SECOND, 'mg-platform');
    }
  }, 90_000);
});

// From the second cycle of a process on, the subscriptions of the last walk are listed while the
// walk runs (src/clouds/early-listings.ts): the same faults, hitting a running service
// after a clean cycle, must still delete nothing, and a listing must count only after a good walk.
const STEADY_ROWS = ROWS.filter((row) => ['descendants: 500', 'descendants later page: 200 {}', 'descendants: hang', 'descendants later page: an item of an unknown type', 'one subscription of the group: managedClusters 200 cut off mid-JSON', 'one subscription of the group: managedClusters 403'].includes(row.fault));

describe('management group walk faults after a clean cycle (early listings) delete nothing', () => {
  for (const row of STEADY_ROWS) {
    it(row.fault, async () => {
      const name = `steady-${rows++}`;
      const {file, text} = await config(name);
      await copyFile(golden, h.registryPath(name));
      const service = await start(file, text);
      try {
        expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(NAMES);
        h.armProxy.fault = row.rule;
        await service.cycle();
        const servers = await service.servers();
        expect(servers.map((s) => s.metadata.name).sort()).toEqual(NAMES);
        const status = await service.status();
        expect(status.sources.find((s) => s.id === row.source), JSON.stringify(status)).toMatchObject({ok: false, last_error: {reason: row.reason}});
        // A failed walk: what the early listings found is not published; every entry is kept, stale.
        if (row.source === ALL) expect(servers.filter((s) => s.status?.stale).map((s) => s.metadata.name).sort()).toEqual(NAMES);
        else expect(servers.filter((s) => s.status?.stale).map((s) => s.metadata.name)).toEqual([`b1-aks-eastus-rg-b-${SECOND}`]);

        h.armProxy.fault = undefined;
        await service.cycle();
        const recovered = await service.servers();
        expect(recovered.map((s) => s.metadata.name).sort()).toEqual(NAMES);
        expect(recovered.filter((s) => s.status?.stale).map((s) => s.metadata.name)).toEqual([]);
        expect((await service.status()).sources.filter((s) => !s.ok)).toEqual([]);
      } finally {
        h.armProxy.fault = undefined;
        await service.stop();
      }
    }, 90_000);
  }

  it('a subscription that moved out while the service runs is listed early but kept (stale) by the first walk without it, deregistered by the second', async () => {
    const name = `steady-${rows++}`;
    const {file, text} = await config(name);
    await copyFile(golden, h.registryPath(name));
    const service = await start(file, text);
    h.arm.world.managementGroups.placeSubscription(SECOND, 'mg-elsewhere');
    try {
      await service.cycle();
      const b1 = `b1-aks-eastus-rg-b-${SECOND}`;
      expect((await service.servers()).find((s) => s.metadata.name === b1)?.status?.stale).toBe(true);
      await service.cycle();
      expect((await service.servers()).map((s) => s.metadata.name).sort()).toEqual(NAMES.filter((n) => n !== b1));
    } finally {
      h.arm.world.managementGroups.placeSubscription(SECOND, 'mg-platform');
      await service.stop();
    }
  }, 90_000);
});
