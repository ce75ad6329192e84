/**
 * The bench report: per-workload numbers from the driver runs, keepalive and token rates, the
 * peer, and every target with its value, whether it was met and by how much it was missed.
 * Pure functions over measured data, so the smoke test can check the shape.
 */
import type {Bounds} from './bounds.ts';
import type {DriverCycle, DriverResult} from './cycle-driver.ts';
import type {KeepaliveResult, KeepaliveSkipped} from './keepalive.ts';
import type {PeerReport} from './peers/peer-types.ts';
import type {ProfileSummary} from './profile.ts';
import type {TokenRate} from './token-rate.ts';
import type {WatchersReport} from './watchers.ts';

/** Everything measured for one workload. */
export interface WorkloadReport {
  readonly name: string;
  readonly description: string;
  readonly clusters: {readonly total: number; readonly expected: number; readonly found: number; readonly all_found: boolean; readonly missing_sample: readonly string[]};
  readonly cycles: number;
  /**
   * `cold`: the first cycle of the measured run; `median`: its later cycles'; `first_runs`: the
   * first cycle of every fresh start (the measured run's and, for W0, the extra starts), and
   * `first_median` their median, which W0's target judges.
   */
  readonly cycle_wall_ms: {readonly cold: number; readonly median: number; readonly all: readonly number[]; readonly first_runs: readonly number[]; readonly first_median: number};
  /**
   * Workloads judged against the peer (W0): a run that describes every cluster every cycle
   * (`refresh_interval: 0s`), the work the peer does each cycle. `all`: its cycles' walls;
   * `warm_median`: the median of those after the first; `describes`: DescribeCluster calls per cycle.
   */
  readonly full_describe_wall_ms?: {readonly all: readonly number[]; readonly warm_median: number; readonly describes: readonly number[]};
  /** Against the peer, when it ran: each ratio is ours / the peer's (below 1: we are faster). */
  readonly vs_peer?: {
    /** Our warm cycles describing every cluster against the peer's warm cycles: the same work, both warm (a target). */
    readonly full_describe_warm_vs_peer_warm?: number;
    /** Our first cycles' median against the peer's first cycle: the same work, both cold (a target). */
    readonly first_vs_peer_first: number;
    /** Our first cycles' median against the peer's warm cycles' median: a cold process against a warm one. */
    readonly first_vs_peer_warm: number;
    /** Our later cycles (describing only what changed) against the peer's warm cycles: each side's steady state. */
    readonly steady_vs_peer_warm: number;
  };
  readonly latency_bound_ms: number;
  readonly rate_limit_bound_ms: number;
  readonly bound_ms: number;
  readonly bound_formula: string;
  readonly sdk_floor_ms: {readonly median: number; readonly all: readonly number[]};
  readonly wall_vs_floor: number;
  readonly wall_vs_bound: number;
  readonly cpu_ms_per_cluster: {readonly service: number; readonly floor: number};
  readonly peak_rss_mb: {readonly service: number; readonly floor: number};
  /** Heap really held after the last cycle (a full GC first), MB: what RSS would be without V8's slack. */
  readonly heap_after_gc_mb: {readonly service: number | null; readonly floor: number | null};
  readonly api_calls_per_cycle: {readonly median: number; readonly first_cycle: number; readonly expected: number; readonly floor: number; readonly by_operation: Readonly<Record<string, number>>};
  /**
   * Throttled share of all calls, and of the AWS calls in the first 2 s of the first cycle (before
   * the SDK adapts); `floor_first_cycle_early` is the same for the unshaped SDK floor, which shows
   * how tight the workload's quotas are whatever the service's rate shaping avoids.
   */
  readonly throttled_share: {readonly first_cycle: number; readonly first_cycle_early: number; readonly median: number; readonly floor_first_cycle_early: number};
  readonly registry: {readonly created: number; readonly updated: number; readonly deregistered: number; readonly stale: number};
  readonly failed_sources: number;
  readonly describe_max_in_flight: number;
  readonly peer?: PeerReport;
  readonly profile?: ProfileSummary;
}

/** One target: the measured value against the goal. */
export interface Target {
  readonly name: string;
  readonly value: number | boolean | null;
  readonly target: string;
  readonly met: boolean | null;
  /** "missed by X%" (or why it could not be judged); absent when met. */
  readonly missed_by?: string;
}

/** The whole report. */
export interface BenchReport {
  readonly benchmark: 'kube-discovery';
  readonly started_at: string;
  readonly duration_s: number;
  readonly node: string;
  readonly machine: {readonly cpus: number; readonly cpu_model: string; readonly memory_gb: number};
  readonly settings: {readonly cycles: number; readonly concurrency: {readonly sources: number; readonly per_region: number}};
  readonly workloads: readonly WorkloadReport[];
  readonly keepalive: readonly (KeepaliveResult | KeepaliveSkipped)[];
  readonly tokens: TokenRate | {readonly skipped: string};
  /** `/v1/watch` cost: 200 watchers at 10,000 entries (bench/watchers.ts). */
  readonly watchers: WatchersReport | {readonly skipped: string};
  readonly targets: readonly Target[];
}

/** Median of a list (lower middle for even lengths); 0 when empty. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : (s[Math.floor((s.length - 1) / 2)] ?? 0);
}

const round = (x: number, digits = 1): number => Math.round(x * 10 ** digits) / 10 ** digits;

/** The cycles after the first (connections open, registry warm), or the first when there is only one. */
function warm<T>(xs: readonly T[]): readonly T[] {
  return xs.length > 1 ? xs.slice(1) : xs;
}

/** Builds a workload's report from the service and floor runs. */
export function workloadReport(input: {
  name: string;
  description: string;
  totalClusters: number;
  bounds: Bounds;
  service: DriverResult;
  /** The first cycle of every fresh start, the measured run's first; default: the measured run's. */
  firstCycles?: readonly DriverCycle[];
  /** A run describing every cluster every cycle (W0), to compare with the peer's warm cycles. */
  fullDescribe?: DriverResult;
  floor: DriverResult;
  peer?: PeerReport;
  profile?: ProfileSummary;
}): WorkloadReport {
  const {service, floor, bounds} = input;
  const cycles = service.cycles;
  const last = cycles.at(-1);
  const walls = cycles.map((c) => c.wallMs);
  const warmWall = median(warm(walls));
  const floorWalls = floor.cycles.map((c) => c.wallMs);
  const floorMedian = median(warm(floorWalls));
  const expected = last?.verdict.expected ?? 0;
  const cpuPerCluster = (cs: readonly DriverCycle[]): number =>
    round(median(warm(cs).map((c) => (c.cpuUserMs + c.cpuSystemMs) / Math.max(1, c.verdict.expected))), 3);
  const calls = (c: DriverCycle): number => c.stats.aws_calls + c.stats.arm_calls;
  const throttled = (c: DriverCycle): number => (c.stats.aws_throttled + c.stats.arm_throttled) / Math.max(1, calls(c));
  const medianCycle = [...warm(cycles)].sort((a, b) => calls(a) - calls(b))[Math.floor((warm(cycles).length - 1) / 2)];
  const sum = (key: 'create' | 'update' | 'delete' | 'stale'): number => cycles.reduce((a, c) => a + (c.counts?.[key] ?? 0), 0);
  const firstCycles = input.firstCycles ?? cycles.slice(0, 1);
  const firstMedian = median(firstCycles.map((c) => c.wallMs));
  const allFound = cycles.length > 0 && [...cycles, ...firstCycles].every((c) => c.verdict.missing === 0 && c.verdict.unexpected === 0);
  const peer = input.peer?.ran ? input.peer : undefined;
  const ratio = (a: number, b: number | undefined): number => round(a / Math.max(1e-9, b ?? 0), 3);
  const full = input.fullDescribe?.cycles;
  const fullWarm = full && full.length > 1 ? median(warm(full.map((c) => c.wallMs))) : undefined;
  return {
    name: input.name,
    description: input.description,
    clusters: {total: input.totalClusters, expected, found: last?.verdict.found ?? 0, all_found: allFound, missing_sample: cycles.flatMap((c) => c.verdict.missing_sample).slice(0, 5)},
    cycles: cycles.length,
    cycle_wall_ms: {cold: round(walls[0] ?? 0), median: round(warmWall), all: walls.map((w) => round(w)), first_runs: firstCycles.map((c) => round(c.wallMs)), first_median: round(firstMedian)},
    ...(full ? {full_describe_wall_ms: {all: full.map((c) => round(c.wallMs)), warm_median: round(fullWarm ?? 0), describes: full.map(describeCalls)}} : {}),
    ...(peer
      ? {
          vs_peer: {
            ...(fullWarm === undefined ? {} : {full_describe_warm_vs_peer_warm: ratio(fullWarm, peer.wall_ms_median)}),
            first_vs_peer_first: ratio(firstMedian, peer.wall_ms_all[0]),
            first_vs_peer_warm: ratio(firstMedian, peer.wall_ms_median),
            steady_vs_peer_warm: ratio(warmWall, peer.wall_ms_median),
          },
        }
      : {}),
    latency_bound_ms: round(bounds.latencyMs),
    rate_limit_bound_ms: round(bounds.rateLimitMs),
    bound_ms: round(bounds.boundMs),
    bound_formula: bounds.formula,
    sdk_floor_ms: {median: round(floorMedian), all: floorWalls.map((w) => round(w))},
    wall_vs_floor: round(warmWall / Math.max(1e-9, floorMedian), 3),
    wall_vs_bound: round(warmWall / Math.max(1e-9, bounds.boundMs), 3),
    cpu_ms_per_cluster: {service: cpuPerCluster(cycles), floor: cpuPerCluster(floor.cycles)},
    peak_rss_mb: {service: round(service.maxRssKb / 1024), floor: round(floor.maxRssKb / 1024)},
    heap_after_gc_mb: {service: service.memoryAfterGcMb?.['heapUsed'] ?? null, floor: floor.memoryAfterGcMb?.['heapUsed'] ?? null},
    api_calls_per_cycle: {
      median: medianCycle ? calls(medianCycle) : 0,
      first_cycle: cycles[0] ? calls(cycles[0]) : 0,
      expected: bounds.calls,
      floor: median(warm(floor.cycles).map(calls)),
      by_operation: Object.fromEntries(Object.entries({...medianCycle?.stats.aws, ...medianCycle?.stats.arm}).map(([op, s]) => [op, s.calls])),
    },
    throttled_share: {
      first_cycle: round(cycles[0] ? throttled(cycles[0]) : 0, 3),
      first_cycle_early: round(cycles[0]?.stats.aws_early_throttled_share ?? 0, 3),
      median: round(median(warm(cycles).map(throttled)), 3),
      floor_first_cycle_early: round(floor.cycles[0]?.stats.aws_early_throttled_share ?? 0, 3),
    },
    registry: {created: sum('create'), updated: sum('update'), deregistered: sum('delete'), stale: sum('stale')},
    failed_sources: Math.max(0, ...cycles.map((c) => c.failedSources ?? 0)),
    describe_max_in_flight: Math.max(0, ...cycles.map((c) => c.stats.describe_max_in_flight)),
    ...(input.peer ? {peer: input.peer} : {}),
    ...(input.profile ? {profile: input.profile} : {}),
  };
}

/** DescribeCluster calls of a cycle, over every account and region. */
function describeCalls(cycle: DriverCycle): number {
  return Object.entries(cycle.stats.aws).reduce((n, [op, s]) => n + (op.endsWith(':DescribeCluster') ? s.calls : 0), 0);
}

/** A "value ≤ limit" or "value ≥ limit" target. */
export function numericTarget(name: string, value: number | undefined, op: '<=' | '>=', limit: number, unit = ''): Target {
  const target = `${op === '<=' ? '≤' : '≥'} ${limit}${unit}`;
  if (value === undefined || !Number.isFinite(value)) return {name, value: null, target, met: null, missed_by: 'not measured in this run'};
  const met = op === '<=' ? value <= limit : value >= limit;
  const missed = op === '<=' ? (value / limit - 1) * 100 : (1 - value / limit) * 100;
  return {name, value: round(value, 3), target, met, ...(met ? {} : {missed_by: `${round(missed)}%`})};
}

function booleanTarget(name: string, value: boolean | undefined, target: string, why?: string): Target {
  if (value === undefined) return {name, value: null, target, met: null, missed_by: 'not measured in this run'};
  return {name, value, target, met: value, ...(value ? {} : {missed_by: why ?? 'not met'})};
}

/** Every target of the issue, judged against the report's numbers. */
export function judgeTargets(
  workloads: readonly WorkloadReport[],
  keepalive: readonly (KeepaliveResult | KeepaliveSkipped)[],
  tokens: TokenRate | {skipped: string},
  watchers: WatchersReport | {skipped: string} = {skipped: 'not run'},
): Target[] {
  const w = (name: string): WorkloadReport | undefined => workloads.find((x) => x.name === name);
  const w1 = w('W1');
  const w3 = w('W3');
  const out: Target[] = [
    numericTarget('W1 cycle wall / SDK floor', w1?.wall_vs_floor, '<=', 1.25, '×'),
    numericTarget('W1 CPU per cluster per steady-state cycle (ms)', w1?.cpu_ms_per_cluster.service, '<=', 0.15, ' ms'),
    numericTarget('W1 peak RSS with 10,000 registered (MB)', w1?.peak_rss_mb.service, '<=', 256, ' MB'),
    numericTarget('W1 API calls per steady-state cycle', w1?.api_calls_per_cycle.median, '<=', 505),
    booleanTarget(
      'W3 every cluster found, zero deregistrations',
      w3 ? w3.clusters.all_found && w3.registry.deregistered === 0 : undefined,
      'true',
      w3 ? `${w3.clusters.expected - w3.clusters.found} missing, ${w3.registry.deregistered} deregistered` : undefined,
    ),
    numericTarget('W3 quotas throttle an unshaped client (SDK floor, first 2 s)', w3?.throttled_share.floor_first_cycle_early, '>=', 0.2),
    numericTarget('W3 cycle wall / rate-limit bound', w3?.wall_vs_bound, '<=', 1.3, '×'),
  ];
  for (const backend of ['sqlite', 'etcd']) {
    const results = keepalive.filter((k): k is KeepaliveResult => 'entries' in k && k.backend === backend);
    const small = results.find((k) => k.entries === 10);
    const large = results.find((k) => k.entries === 10_000);
    const skipped = keepalive.find((k): k is KeepaliveSkipped => 'skipped' in k && k.backend === backend);
    const t = numericTarget(`keepalive ${backend}: cost at 10,000 / cost at 10`, small && large ? large.round_us / Math.max(1, small.round_us) : undefined, '<=', 2, '×');
    out.push(skipped ? {...t, missed_by: `not measured: ${skipped.skipped}`} : t);
  }
  const rate = 'skipped' in tokens ? undefined : tokens;
  out.push(numericTarget('token mints per second, cold', rate?.cold_mints_per_second, '>=', 20_000, '/s'));
  out.push(numericTarget('token gets per second, cached', rate?.cached_gets_per_second, '>=', 500_000, '/s'));
  for (const name of ['W0', 'W3']) {
    const x = w(name);
    const peer = x?.peer;
    const peerRan = peer && peer.ran;
    out.push(booleanTarget(
      `${name}: finds 100% of clusters (peer found ${peerRan ? `${peer.clusters_found}/${peer.clusters_expected}` : 'n/a'})`,
      x ? x.clusters.all_found : undefined,
      'true',
      x ? `found ${x.clusters.found}/${x.clusters.expected}` : undefined,
    ));
  }
  const w0 = w('W0');
  const w0peer = w0?.peer?.ran ? w0.peer : undefined;
  // The peer describes every cluster every cycle; our own warm cycles describe only what changed,
  // which would flatter the comparison. So W0's cycle wall is judged on the same work at the same
  // warmth: warm cycles describing every cluster against the peer's warm cycles, and our first
  // cycle (the median of the fresh starts) against the peer's first. A cold start against the
  // peer's warm cycles is reported beside them (vs_peer.first_vs_peer_warm), not judged.
  const full = w0?.full_describe_wall_ms;
  const fullTarget = numericTarget('W0 cycle wall, every cluster described (warm median) / peer warm wall', w0 && w0peer ? w0.vs_peer?.full_describe_warm_vs_peer_warm : undefined, '<=', 1, '×');
  const describedAll = full !== undefined && w0 !== undefined && warm(full.describes).every((n) => n >= w0.clusters.expected);
  out.push(full && fullTarget.met !== null && !describedAll ? {...fullTarget, met: false, missed_by: `a warm cycle described fewer than ${w0?.clusters.expected} clusters (${full.describes.join(' / ')})`} : fullTarget);
  out.push(numericTarget(`W0 first cycle wall${w0 && w0.cycle_wall_ms.first_runs.length > 1 ? ` (median of ${w0.cycle_wall_ms.first_runs.length} starts)` : ''} / peer first cycle wall`, w0 && w0peer ? w0.vs_peer?.first_vs_peer_first : undefined, '<=', 1, '×'));
  const watch = 'skipped' in watchers ? undefined : watchers;
  const healthzP99 = watch ? Math.max(...watch.rounds.map((r) => r.healthz_ms.p99)) : undefined;
  out.push(numericTarget(`200 watchers at 10,000 entries: added RSS (MB)${watch && watch.entries !== 10_000 ? ` [measured at ${watch.watchers} x ${watch.entries}]` : ''}`, watch?.added_rss_mb, '<=', 64, ' MB'));
  out.push(numericTarget('watchers: /healthz p99 while they take snapshots (ms)', healthzP99, '<=', 50, ' ms'));
  // Judged on the stricter baseline: idle after the same memory-reducing collection the server runs once they left.
  out.push(numericTarget('watchers: RSS after they left / idle', watch === undefined ? undefined : Math.max(watch.after_vs_idle, watch.after_vs_idle_after_reclaim), '<=', 1.1, '×'));
  out.push(numericTarget('watchers: live heap + external after they left / idle', watch?.live_after_vs_idle, '<=', 1.1, '×'));
  return out;
}

/** A fixed-width summary for people (the JSON is the report). */
export function formatSummary(report: BenchReport): string {
  const lines: string[] = [];
  const pad = (s: string, n: number): string => (s.length >= n ? s : s + ' '.repeat(n - s.length));
  lines.push(`kube-discovery bench, ${report.started_at}, ${report.duration_s} s, node ${report.node}, ${report.machine.cpus} CPUs`);
  lines.push(pad('workload', 9) + pad('found', 14) + pad('1st ms', 9) + pad('wall ms', 10) + pad('floor ms', 10) + pad('bound ms', 10) + pad('cpu/cl ms', 11) + pad('rss MB', 8) + pad('heap MB', 9) + pad('calls', 8) + pad('thrott.', 9) + 'peer');
  for (const w of report.workloads) {
    const peer = w.peer ? (w.peer.ran ? `${w.peer.wall_ms_median} ms, ${w.peer.clusters_found}/${w.peer.clusters_expected}` : `not run: ${w.peer.reason}`) : '';
    lines.push(
      pad(w.name, 9) + pad(`${w.clusters.found}/${w.clusters.expected}`, 14) + pad(String(w.cycle_wall_ms.first_median), 9) + pad(String(w.cycle_wall_ms.median), 10) + pad(String(w.sdk_floor_ms.median), 10) +
        pad(String(w.bound_ms), 10) + pad(String(w.cpu_ms_per_cluster.service), 11) + pad(String(w.peak_rss_mb.service), 8) + pad(String(w.heap_after_gc_mb.service ?? '-'), 9) +
        pad(String(w.api_calls_per_cycle.median), 8) + pad(String(w.throttled_share.first_cycle_early), 9) + peer,
    );
  }
  for (const w of report.workloads) {
    if (!w.vs_peer || !w.peer?.ran) continue;
    lines.push(`${w.name} against the peer: ${peerComparison(w)}`);
  }
  if ('skipped' in report.watchers) lines.push(`watchers: ${report.watchers.skipped}`);
  else {
    const x = report.watchers;
    lines.push(`watchers: ${x.watchers} at ${x.entries} entries: +${x.added_rss_mb} MB RSS (idle ${x.idle.rss_mb}), after they left ${x.after_vs_idle}x idle RSS (${x.after_vs_idle_after_reclaim}x idle after a reclaim; reclaim pause ${x.rounds.map((r) => r.reclaim_pause_ms ?? 'none').join(' / ')} ms), ${x.live_after_vs_idle}x idle live memory; /healthz p99 ${x.rounds.map((r) => r.healthz_ms.p99).join(' / ')} ms`);
  }
  lines.push('targets:');
  for (const t of report.targets) {
    const mark = t.met === null ? '  ?' : t.met ? ' ok' : 'MISS';
    lines.push(`  ${pad(mark, 5)}${pad(t.name, 62)} ${pad(String(t.value), 10)} ${t.target}${t.missed_by ? ` (missed by ${t.missed_by})` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

const thousands = (n: number): string => Math.round(n).toLocaleString('en-US');

/** The walls and ratios of a workload against the peer, in one sentence (the summary and the README). */
function peerComparison(w: WorkloadReport): string {
  const v = w.vs_peer;
  if (!v || !w.peer?.ran) return 'the peer did not run';
  const full = w.full_describe_wall_ms;
  const walls = [
    `the peer's cycles ${w.peer.wall_ms_all.join(' / ')} ms`,
    ...(full ? [`ours describing every cluster ${full.all.join(' / ')} ms (${full.describes.join(' / ')} DescribeCluster calls)`] : []),
    `our first cycles ${w.cycle_wall_ms.first_runs.join(' / ')} ms (median ${w.cycle_wall_ms.first_median})`,
    `our later cycles ${w.cycle_wall_ms.all.slice(1).join(' / ')} ms`,
  ];
  const ratios = [
    ...(v.full_describe_warm_vs_peer_warm === undefined ? [] : [`every cluster described, warm / peer warm ${v.full_describe_warm_vs_peer_warm}x`]),
    `first / peer first ${v.first_vs_peer_first}x`,
    `first / peer warm ${v.first_vs_peer_warm}x`,
    `steady / peer warm ${v.steady_vs_peer_warm}x`,
  ];
  return `${walls.join(', ')}; ${ratios.join(', ')}`;
}

function callsByOperation(ops: Readonly<Record<string, number>>): string {
  return Object.entries(ops)
    .filter(([, n]) => n > 0)
    .map(([op, n]) => `${thousands(n)} ${op.replace(/^[a-z]+:/, '')}`)
    .join(', ');
}

/** The README's bench table (Markdown), from one report. */
export function formatMarkdown(report: BenchReport): string {
  const lines = [
    `One run, ${report.started_at}, ${report.duration_s} s, node ${report.node}, ${report.machine.cpus} CPUs (${report.machine.cpu_model}):`,
    '',
    '| workload | found | first cycle | warm cycle (median) | SDK floor | bound | API calls per warm cycle | CPU per cluster (warm) | peak RSS | live heap after a cycle | throttled (service / floor, first 2 s) | Backstage peer |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const w of report.workloads) {
    const peer = w.peer === undefined ? '' : w.peer.ran
      ? `${thousands(w.peer.wall_ms_median)} ms (first ${thousands(w.peer.wall_ms_all[0] ?? 0)}), ${thousands(w.peer.clusters_found)}/${thousands(w.peer.clusters_expected)}, ${thousands(w.peer.api_calls_per_cycle)} calls, ${w.peer.cpu_ms_per_cluster} ms/cluster, ${w.peer.peak_rss_mb} MB`
      : `not run: ${w.peer.reason}`;
    const calls = `${thousands(w.api_calls_per_cycle.median)} (${callsByOperation(w.api_calls_per_cycle.by_operation)}); first ${thousands(w.api_calls_per_cycle.first_cycle)}`;
    lines.push(
      `| ${w.name} | ${thousands(w.clusters.found)}/${thousands(w.clusters.expected)}${w.registry.deregistered ? `, ${thousands(w.registry.deregistered)} deregistered` : ''} | ${thousands(w.cycle_wall_ms.cold)} ms | ${thousands(w.cycle_wall_ms.median)} ms | ${thousands(w.sdk_floor_ms.median)} ms | ${thousands(w.bound_ms)} ms | ${calls} | ${w.cpu_ms_per_cluster.service} ms | ${w.peak_rss_mb.service} MB | ${w.heap_after_gc_mb.service ?? '-'} MB | ${w.throttled_share.first_cycle_early} / ${w.throttled_share.floor_first_cycle_early} | ${peer} |`,
    );
  }
  for (const w of report.workloads) if (w.vs_peer && w.peer?.ran) lines.push('', `${w.name} against the peer: ${peerComparison(w)}.`);
  if (!('skipped' in report.watchers)) {
    const x = report.watchers;
    lines.push('', `Watchers (\`/v1/watch\`, ${x.watchers} watchers at ${thousands(x.entries)} entries, ${x.rounds.length} rounds): idle RSS ${x.idle.rss_mb} MB (${x.idle.rss_after_reclaim_mb} MB after a memory-reducing collection), +${x.added_rss_mb} MB with them; after they left and the server's reclaim (pause ${x.rounds.map((r) => `${r.reclaim_pause_ms ?? 'none'} ms`).join(' / ')}) ${x.after_vs_idle}× idle RSS, ${x.after_vs_idle_after_reclaim}× the reclaimed idle (${x.last_vs_first_round}× after round 2 vs round 1) and ${x.live_after_vs_idle}× idle live memory (heap + external after a full GC); /healthz p99 ${x.rounds.map((r) => `${r.healthz_ms.p99} ms`).join(' / ')}, server event-loop delay p99 ${x.rounds.map((r) => `${r.server_event_loop_delay_ms.p99} ms`).join(' / ')}; all snapshots in ${x.rounds.map((r) => `${(r.all_snapshots_ms / 1000).toFixed(1)} s`).join(' / ')}.`);
  }
  const keep = report.keepalive.filter((k): k is KeepaliveResult => 'entries' in k);
  if (keep.length > 0) lines.push('', `Keepalive per round: ${keep.map((k) => `${k.backend} ${k.entries}: ${k.round_us} µs, ${k.calls_per_round} call(s)`).join('; ')}.`);
  if (!('skipped' in report.tokens)) lines.push(`Tokens: ${thousands(report.tokens.cold_mints_per_second)} cold mints/s, ${thousands(report.tokens.cached_gets_per_second)} cached gets/s.`);
  lines.push('', 'Targets:', '');
  for (const t of report.targets) lines.push(`- ${t.met === null ? '?' : t.met ? '✓' : '✗'} ${t.name}: ${t.value} (${t.target})${t.missed_by ? ` — missed by ${t.missed_by}` : ''}`);
  return `${lines.join('\n')}\n`;
}
