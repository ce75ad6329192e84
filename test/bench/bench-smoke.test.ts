/**
 * The bench harness end to end on a tiny scenario (2 regions x 5 clusters, 2 cycles, sqlite
 * keepalive at 10/100 entries, a short token run, no peers): simulator, SDK floor and service
 * in their own processes, report assembly. Keeps `npm run bench` working; its numbers are
 * never asserted against targets here.
 */
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {describe, expect, it} from 'vitest';
import {runBench} from '../../bench/bench.ts';
import {formatMarkdown, judgeTargets} from '../../bench/report.ts';
import type {KeepaliveResult} from '../../bench/keepalive.ts';

const SMOKE = path.resolve(import.meta.dirname, '../../bench/scenarios/smoke.json');

const WORKLOAD_FIELDS = [
  'name', 'description', 'clusters', 'cycles', 'cycle_wall_ms', 'latency_bound_ms', 'rate_limit_bound_ms', 'bound_ms', 'bound_formula',
  'sdk_floor_ms', 'wall_vs_floor', 'wall_vs_bound', 'cpu_ms_per_cluster', 'peak_rss_mb', 'heap_after_gc_mb', 'api_calls_per_cycle', 'throttled_share',
  'registry', 'failed_sources', 'describe_max_in_flight',
];

describe('npm run bench', () => {
  it('measures a tiny workload in separate processes and reports every field, with every cluster found', async () => {
    const lines: string[] = [];
    const report = await runBench({
      workloads: [SMOKE],
      cycles: 2,
      keepalive: {sizes: [10, 100], backends: ['sqlite'], rounds: 3},
      tokens: {cold: 300, cached: 3000},
      watchers: {entries: 30, watchers: 3, rounds: 1},
      log: (line) => lines.push(line),
    });

    expect(Object.keys(report)).toEqual(['benchmark', 'started_at', 'duration_s', 'node', 'machine', 'settings', 'workloads', 'keepalive', 'tokens', 'watchers', 'targets']);
    const [w] = report.workloads;
    expect(Object.keys(w ?? {})).toEqual(WORKLOAD_FIELDS);
    if (!w) return;
    // The service registered exactly the simulator's clusters in every cycle; nothing was removed.
    expect(w.clusters).toMatchObject({total: 10, expected: 10, found: 10, all_found: true});
    expect(w.registry).toMatchObject({created: 10, deregistered: 0});
    expect(w.cycles).toBe(2);
    expect(w.cycle_wall_ms.all).toHaveLength(2);
    expect(w.sdk_floor_ms.all).toHaveLength(2);
    // 2 regions x (3 ListClusters pages of 2 + 5 DescribeCluster): what the fake counted is what the bound assumes.
    expect(w.api_calls_per_cycle).toMatchObject({expected: 16, floor: 16});
    // A warm cycle is incremental: every list page, the tag pages, and DescribeCluster only for
    // clusters the tag read does not vouch for (the simulator leaves some untagged).
    const ops = w.api_calls_per_cycle.by_operation;
    expect(ops['eks:ListClusters']).toBe(6);
    expect(ops['tagging:GetResources']).toBeGreaterThanOrEqual(2);
    expect(ops['eks:DescribeCluster'] ?? 0).toBeLessThan(10);
    expect(w.api_calls_per_cycle.median).toBe(Object.values(ops).reduce((a, b) => a + b, 0));
    for (const value of [w.cycle_wall_ms.median, w.sdk_floor_ms.median, w.latency_bound_ms, w.cpu_ms_per_cluster.service, w.cpu_ms_per_cluster.floor, w.peak_rss_mb.service, w.wall_vs_floor]) {
      expect(value).toBeGreaterThan(0);
    }

    const keepalive = report.keepalive.filter((k): k is KeepaliveResult => 'entries' in k);
    expect(keepalive.map((k) => [k.backend, k.entries, k.calls_per_round])).toEqual([['sqlite', 10, 1], ['sqlite', 100, 1]]);
    expect(report.tokens).toMatchObject({cold_mints_per_second: expect.any(Number), cached_gets_per_second: expect.any(Number)});
    // Watcher memory: the watchers left, and what the server still holds after a full GC is reported.
    expect(report.watchers).toMatchObject({entries: 30, watchers: 3, rounds: [expect.objectContaining({after_they_left_live_mb: expect.any(Number)})]});
    expect(formatMarkdown(report)).toContain('| smoke');

    // Every target is listed with its value and verdict; those of workloads not run say so.
    expect(report.targets.length).toBeGreaterThanOrEqual(13);
    for (const t of report.targets) {
      expect(t).toHaveProperty('target');
      expect(t.met === null ? t.missed_by : t.value).toBeDefined();
    }
    expect(report.targets.find((t) => t.name.startsWith('token mints'))?.value).toBe((report.tokens as {cold_mints_per_second: number}).cold_mints_per_second);
    expect(lines.some((l) => l.startsWith('smoke: 10 clusters'))).toBe(true);
  }, 120_000);

  it('measures W0 like the peer: the first cycle in fresh starts, and warm cycles describing every cluster', async () => {
    // The smoke world under W0's name: W0's target is its first cycle, so the bench starts the
    // service again, each time with a new registry, and the report keeps every first cycle.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-bench-first-'));
    try {
      const scenario = {...(JSON.parse(await readFile(SMOKE, 'utf8')) as object), name: 'W0'};
      const file = path.join(dir, 'w0-small.json');
      await writeFile(file, JSON.stringify(scenario));
      const lines: string[] = [];
      const report = await runBench({workloads: [file], cycles: 2, coldRuns: 3, keepalive: false, tokens: false, watchers: false, log: (line) => lines.push(line)});
      const [w] = report.workloads;
      if (!w) throw new Error('no workload in the report');
      expect(w.cycle_wall_ms.first_runs).toHaveLength(3);
      expect(w.cycle_wall_ms.first_runs[0]).toBe(w.cycle_wall_ms.cold);
      const sorted = [...w.cycle_wall_ms.first_runs].sort((a, b) => a - b);
      expect(w.cycle_wall_ms.first_median).toBe(sorted[1]);
      // Each fresh start registered every cluster (a new registry: nothing carried over).
      expect(w.clusters).toMatchObject({expected: 10, found: 10, all_found: true});
      expect(lines.filter((l) => l.includes('first cycle again'))).toHaveLength(2);
      // The peer's work at the same warmth: a further run in which every cycle describes every cluster.
      expect(lines.filter((l) => l.includes('every cluster described every cycle'))).toHaveLength(1);
      expect(w.full_describe_wall_ms?.all).toHaveLength(3);
      expect(w.full_describe_wall_ms?.describes).toEqual([10, 10, 10]);
      // Without the peer there is nothing to compare: the targets say so instead of a value.
      expect(report.targets.filter((t) => t.name.startsWith('W0 ') && t.name.includes('/ peer'))).toEqual([
        expect.objectContaining({name: 'W0 cycle wall, every cluster described (warm median) / peer warm wall', met: null}),
        expect.objectContaining({name: 'W0 first cycle wall (median of 3 starts) / peer first cycle wall', met: null}),
      ]);
      expect(w.vs_peer).toBeUndefined();

      // With a peer, both are judged; a "describe everything" run that did not describe everything is no comparison.
      const peer = {ran: true, peer: 'backstage', versions: {}, wall_ms_median: 1000, wall_ms_all: [2000, 1000, 1000], api_calls_per_cycle: 12, clusters_found: 10, clusters_expected: 10, found_all: true, failed_locations: 0, cpu_ms_per_cluster: 1, peak_rss_mb: 100, token_mints_per_second: 1, notes: []} as const;
      const fast = {...w, full_describe_wall_ms: {all: [900, 500, 400], warm_median: 400, describes: [10, 10, 10]}, vs_peer: {full_describe_warm_vs_peer_warm: 0.4, first_vs_peer_first: 0.45, first_vs_peer_warm: 0.9, steady_vs_peer_warm: 0.05}, peer};
      const judged = (x: typeof fast) => judgeTargets([x], [], {skipped: 'not run'}).filter((t) => t.name.startsWith('W0 ') && t.name.includes('/ peer'));
      expect(judged(fast).map((t) => [t.value, t.met])).toEqual([[0.4, true], [0.45, true]]);
      const partial = {...fast, full_describe_wall_ms: {...fast.full_describe_wall_ms, describes: [10, 4, 10]}};
      expect(judged(partial)[0]).toMatchObject({met: false, missed_by: 'a warm cycle described fewer than 10 clusters (10 / 4 / 10)'});
    } finally {
      await rm(dir, {recursive: true, force: true});
    }
  }, 120_000);
});
