/**
 * `npm run bench:w5` end to end on a tiny world: the real service in its own process with one
 * `management_groups` matcher, against the ARM fake's nested groups. Checks what the bench
 * reports about correctness (every cluster under the group, none outside, the leaving
 * subscription's clusters and nothing else deregistered — one cycle late, after the second walk
 * without it — denied subscriptions failing alone);
 * timings are never asserted.
 */
import {describe, expect, it} from 'vitest';
import {mgScenarioSchema} from '../../bench/mg-world.ts';
import {runManagementGroupWorkload} from '../../bench/w5.ts';

const TINY = mgScenarioSchema.parse({
  name: 'W5-smoke',
  subscriptions: 8,
  outside_subscriptions: 3,
  top_groups: 2,
  child_groups: 2,
  clusters_per_subscription: 2,
  page_size: 3,
  denied_share: 0.25,
  concurrency: {sources: 4, per_region: 2},
});

describe('npm run bench:w5', () => {
  it('registers exactly the clusters under the group each cycle and deregisters only those of the subscription that moved out, one walk later', async () => {
    const report = (await runManagementGroupWorkload(TINY, {cycles: 3, log: () => undefined})) as {
      subscriptions: {denying: number; moved: {leftClusters: number}[]};
      clusters: {total: number; expected_last: number; found_last: number; unexpected_last: number; kept_one_walk_last: number};
      calls_by_operation: {first_cycle: Record<string, number>; steady: Record<string, number>};
      registry: {create: number; delete: number}[];
      failed_sources: number[];
      false_deregistrations: number;
    };

    // 8 under the group (2 denying) and 3 outside, 2 clusters each: 12 discoverable of 22; the 2
    // of the subscription that moved out before the last cycle are still held (one walk of grace).
    expect(report.clusters).toEqual({total: 22, expected_last: 12, found_last: 12, unexpected_last: 0, kept_one_walk_last: 2});
    expect(report.subscriptions.denying).toBe(2);
    expect(report.failed_sources).toEqual([2, 2, 2]);
    expect(report.false_deregistrations).toBe(0);
    // Cycle 1 creates the 12; each later cycle one subscription moved in (created at once) and one
    // moved out: kept by the first walk without it, deregistered by the second (cycle 3 deletes cycle 2's).
    expect(report.registry.map((c) => [c.create, c.delete])).toEqual([[12, 0], [2, 0], [2, 2]]);
    expect(report.subscriptions.moved.map((m) => m.leftClusters)).toEqual([2, 2]);
    // 6 nested groups + 8 subscriptions, 3 to a page: 5 descendants pages every cycle.
    expect(report.calls_by_operation.first_cycle['managementGroups.descendants']).toBe(5);
    expect(report.calls_by_operation.steady['managementGroups.descendants']).toBe(5);
  }, 120_000);
});
