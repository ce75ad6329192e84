/**
 * The driver W4 (bench/w4.ts) and W5 (bench/w5.ts) share: the real service in a child process
 * (bench/cycle-driver.ts, so RSS and CPU are the service's own) against a world in this process,
 * reached through the control server; the calls tally the control server answers; and the report
 * fields both print. Each workload keeps its own world, scenario, bound formula and the fields
 * only it prints.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {runChild} from './child.ts';
import {startControl, type ControlServer, type ControlWorld} from './control-server.ts';
import type {DriverRequest, DriverResult} from './cycle-driver.ts';

const HERE = import.meta.dirname;

/** Calls of one operation, as GET /stats answers them. */
interface OperationTally {
  calls: number;
  throttled: number;
  errors: number;
}

/**
 * The GET /stats answer for a world whose fake speaks one API (`aws` or `arm`): calls per
 * operation, throttled (as `throttled` says) and failed (status 400 and up, or none) apart.
 */
export function callStats<T extends {readonly status: number}>(api: 'aws' | 'arm', calls: Iterable<T>, operationOf: (call: T) => string, throttled: (call: T) => boolean): Record<string, unknown> {
  const byOperation: Record<string, OperationTally> = {};
  let total = 0;
  for (const call of calls) {
    const op = (byOperation[operationOf(call)] ??= {calls: 0, throttled: 0, errors: 0});
    op.calls++;
    total++;
    if (throttled(call)) op.throttled++;
    else if (call.status >= 400 || call.status === 0) op.errors++;
  }
  const counted = {ops: byOperation, calls: total};
  const none = {ops: {}, calls: 0};
  const aws = api === 'aws' ? counted : none;
  const arm = api === 'arm' ? counted : none;
  return {aws: aws.ops, aws_calls: aws.calls, aws_throttled: 0, arm: arm.ops, arm_calls: arm.calls, arm_throttled: 0, describe_max_in_flight: 0, aws_early_throttled_share: 0};
}

/** What runServiceWorkload runs. */
export interface ServiceWorkload<Step extends object> {
  /** The scenario's name, for the error of a failed run. */
  readonly name: string;
  /** Prefix of the run's temporary directory (config, registry, files `env` writes). */
  readonly tmpPrefix: string;
  /** The world as the control server serves it. */
  readonly control: ControlWorld<Step>;
  /** `discovery_service.concurrency` of the service's config. */
  readonly concurrency: unknown;
  /** The matchers of the service's config: `{aws: [...]}` or `{azure: [...]}`. */
  readonly matchers: Record<string, unknown>;
  /** The service's environment; it may write files into the run's directory `dir` (e.g. a CA). */
  readonly env: (dir: string) => Promise<Record<string, string>>;
  /** The line logged before the service starts: what the world holds. */
  readonly banner: string;
  readonly cycles: number;
  readonly nodeArgs?: readonly string[] | undefined;
  /** The environment the service ships with (`npm start`'s, e.g. glibc's allocator settings); the workload's `env` comes on top. */
  readonly runtimeEnv?: Readonly<Record<string, string>> | undefined;
  /** A V8 CPU or heap profile of the steady cycles, written to this file. */
  readonly steadyProfile?: string | undefined;
  readonly log: (line: string) => void;
}

/** What a run measured, and the control server (closed) with the churn steps and verifications it saw. */
export interface ServiceWorkloadRun<Step> {
  readonly result: DriverResult;
  readonly control: ControlServer<Step>;
}

/** Runs the service for `cycles` cycles in a child process against the workload's world. */
export async function runServiceWorkload<Step extends object>(w: ServiceWorkload<Step>): Promise<ServiceWorkloadRun<Step>> {
  const control = await startControl(w.control);
  const dir = await mkdtemp(path.join(os.tmpdir(), w.tmpPrefix));
  try {
    const env = {...w.runtimeEnv, ...(await w.env(dir))};
    const config = {
      version: 'v1',
      discovery_service: {discovery_group: 'bench', poll_interval: '1h', concurrency: w.concurrency, ...w.matchers},
      probe: {enabled: false},
      storage: {type: 'sqlite', path: path.join(dir, 'registry.db')},
      log: {level: 'error', format: 'json'},
    };
    const configFile = path.join(dir, 'config.yaml');
    await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
    w.log(w.banner);
    const request: DriverRequest = {mode: 'service', config: configFile, cycles: w.cycles, controlUrl: control.url, churnPercent: 1, ...(w.steadyProfile === undefined ? {} : {steadyProfile: w.steadyProfile})};
    const outcome = await runChild<DriverResult>(path.join(HERE, 'cycle-driver.ts'), request, {env, nodeArgs: w.nodeArgs ?? [], onProgress: (l) => w.log(`  ${l}`)});
    if (!outcome.ok) throw new Error(`${w.name}: the service run failed: ${outcome.reason}`);
    return {result: outcome.result, control};
  } finally {
    await control.close();
    await rm(dir, {recursive: true, force: true});
  }
}

/** A cycle's latency bounds and how they were computed. */
export interface CycleBounds {
  readonly coldMs: number;
  readonly steadyMs: number;
  readonly formula: string;
}

/** What workloadReport puts together. */
export interface WorkloadReportParts {
  /** The workload's own leading fields (name, description, its world, `clusters`), printed first. */
  readonly head: Record<string, unknown>;
  readonly result: DriverResult;
  readonly bounds: CycleBounds;
  /** Which of the cycle's call stats `calls_by_operation` counts. */
  readonly api: 'aws' | 'arm';
  /** The workload's CPU-per-cycle field, printed after `cpu_ms_per_cluster`. */
  readonly cpu: Record<string, unknown>;
  readonly falseDeregistrations: number;
}

/** The printed report: the workload's head, then the fields W4 and W5 share, with its CPU field in place, then the targets. */
export function workloadReport(parts: WorkloadReportParts): Record<string, unknown> {
  const {result, bounds, falseDeregistrations} = parts;
  const cycles = result.cycles;
  const walls = cycles.map((c) => Math.round(c.wallMs));
  const steadyMedian = median(walls.slice(1));
  const perCluster = cycles.map((c) => (c.cpuUserMs + c.cpuSystemMs) / Math.max(1, c.verdict.expected));
  const byOperation = (i: number): Record<string, number> =>
    Object.fromEntries(Object.entries((cycles[i]?.stats[parts.api] ?? {}) as Record<string, {calls: number}>).map(([op, v]) => [op, v.calls]).sort());
  // A zero bound (no latency) has no ratio; JSON prints null for it either way.
  const ratio = (wall: number, bound: number): number | null => (bound > 0 ? round2(wall / bound) : null);
  return {
    ...parts.head,
    cycle_wall_ms: {cold: walls[0] ?? 0, steady_median: steadyMedian, all: walls},
    latency_bound_ms: {cold: bounds.coldMs, steady: bounds.steadyMs, formula: bounds.formula},
    wall_vs_bound: {cold: ratio(walls[0] ?? 0, bounds.coldMs), steady: ratio(steadyMedian, bounds.steadyMs)},
    calls_by_operation: {first_cycle: byOperation(0), steady: byOperation(cycles.length - 1)},
    cpu_ms_per_cluster: {cold: round3(perCluster[0] ?? 0), steady_median: round3(median(perCluster.slice(1)))},
    ...parts.cpu,
    peak_rss_mb: Math.round(result.maxRssKb / 1024),
    heap_after_gc_mb: result.memoryAfterGcMb?.['heapUsed'] ?? null,
    registry: cycles.map((c) => c.counts),
    failed_sources: cycles.map((c) => c.failedSources ?? 0),
    false_deregistrations: falseDeregistrations,
    targets: {
      zero_false_deregistrations: falseDeregistrations === 0,
      peak_rss_at_most_320_mb: result.maxRssKb / 1024 <= 320,
      steady_cycle_within_1_5x_bound: steadyMedian <= 1.5 * bounds.steadyMs,
      steady_cycle_within_5_minutes: steadyMedian < 300_000,
    },
  };
}

/** Median of a list (the mean of the two middle values for even lengths); 0 when empty. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : ((s[Math.floor((s.length - 1) / 2)] ?? 0) + (s[Math.ceil((s.length - 1) / 2)] ?? 0)) / 2;
}

/** The CPU time (user + system) of a driver cycle, ms; 0 without one. */
export function cpuOf(cycle: {readonly cpuUserMs: number; readonly cpuSystemMs: number} | undefined): number {
  return cycle ? cycle.cpuUserMs + cycle.cpuSystemMs : 0;
}

/** `--cycles` of a workload: an integer >= 2 (one cold cycle, then steady ones). */
export function cyclesOption(value: string): number {
  const cycles = Number(value);
  if (!Number.isInteger(cycles) || cycles < 2) throw new Error(`expected --cycles to be an integer >= 2 (one cold, then steady ones), got ${value}`);
  return cycles;
}

/** Runs a workload's `main` and exits: 0 when it finished, 1 with the stack on stderr when it threw. */
export function runMain(label: string, main: (argv: readonly string[]) => Promise<void>): void {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`${label}: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
