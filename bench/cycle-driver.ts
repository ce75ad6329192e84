/**
 * The bench's measured process, started once per workload and mode by bench.ts:
 *
 * - `service`: the real service (`startService`: discovery, registry, heartbeat, inventory,
 *   metrics; probes off, HTTP on a free loopback port) runs N cycles, each started with
 *   `trigger()`;
 * - `floor`: a bare loop issuing the same SDK calls (ListClusters to the last page, then
 *   DescribeCluster per name) with the same clients, retry settings and concurrency, and no
 *   other work: the best the SDK allows.
 *
 * Before each cycle it asks the simulator to churn (after the first cycle, when asked), refill
 * its rate-limit buckets (the minutes between real cycles) and reset its call counters; after
 * it, it reads the simulator's counters and has it check the registered clusters. It prints one
 * line `BENCH_RESULT {json}` on stdout: timings, CPU, peak RSS, API calls, verdicts.
 *
 *   node bench/cycle-driver.ts -- '{"mode":"service","config":"...","cycles":5,"controlUrl":"..."}'
 */
import {DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {readFile, writeFile} from 'node:fs/promises';
import {Session} from 'node:inspector/promises';
import PQueue from 'p-queue';
import {pino} from 'pino';
import type {KubeServer} from '../heartbeats/kube-server.ts';
import {processIo} from '../src/cli/io.ts';
import {awsRequestHandler} from '../src/clouds/aws/sources.ts';
import {parseConfig} from '../src/config/load.ts';
import type {Config} from '../src/config/schema.ts';
import {systemClock} from '../src/core/clock.ts';
import {awsCredentialProvider} from '../src/credentials/aws-credentials.ts';
import type {CycleReport} from '../src/discovery/cycle.ts';
import {createLogger} from '../src/observability/logger.ts';
import {startService, type RunningService} from '../src/service/service.ts';
import {listClusterNames} from './list-clusters.ts';
import type {SimStats, SimVerdict} from './sim.ts';
import {clusterKey} from './sim-world.ts';

/** What bench.ts asks the driver to do. */
export interface DriverRequest {
  readonly mode: 'service' | 'floor';
  /** Service config file (YAML/JSON). */
  readonly config: string;
  readonly cycles: number;
  /** The simulator's control API. */
  readonly controlUrl: string;
  /** Churn this percentage before every cycle but the first (0: none). */
  readonly churnPercent?: number;
  /** Service mode: a V8 CPU profile (or, for a `.heapprofile` file, a sampling allocation profile) of the steady cycles, all but the first. */
  readonly steadyProfile?: string;
}

/** One measured cycle. */
export interface DriverCycle {
  readonly wallMs: number;
  /** The cycle's own duration as the service measured it (service mode). */
  readonly reportMs?: number;
  readonly cpuUserMs: number;
  readonly cpuSystemMs: number;
  readonly stats: SimStats;
  /** Registered (service) or described ACTIVE/UPDATING (floor) clusters vs. the simulator's truth. */
  readonly verdict: SimVerdict;
  readonly counts?: CycleReport['counts'];
  readonly result?: string;
  readonly failedSources?: number;
}

/** What the driver prints after `BENCH_RESULT `. */
export interface DriverResult {
  readonly mode: DriverRequest['mode'];
  readonly cycles: readonly DriverCycle[];
  /** `process.resourceUsage().maxRSS`, KiB. */
  readonly maxRssKb: number;
  /** `process.memoryUsage()` after the last cycle, MB. */
  readonly memoryMb: Readonly<Record<string, number>>;
  /** The same after a full GC (when run with --expose-gc), after the service stopped. */
  readonly memoryAfterGcMb?: Readonly<Record<string, number>>;
  /**
   * Service mode, with --expose-gc: `process.memoryUsage()` after a full GC once the last cycle
   * completed, the service still running (inventory, heartbeat, discovery state) and the cycle's
   * report dropped: the live heap a running service holds between cycles.
   */
  readonly liveAfterCycleMb?: Readonly<Record<string, number>>;
}

async function control<T>(base: string, method: 'GET' | 'POST', route: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${route}`, {method, ...(body === undefined ? {} : {body: JSON.stringify(body), headers: {'content-type': 'application/json'}})});
  if (!res.ok) throw new Error(`simulator ${method} ${route}: expected 200, got ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

async function beforeCycle(request: DriverRequest, index: number): Promise<void> {
  if (index > 0 && (request.churnPercent ?? 0) > 0) await control(request.controlUrl, 'POST', `/churn?percent=${request.churnPercent}`);
  await control(request.controlUrl, 'POST', '/limits/refill');
  await control(request.controlUrl, 'POST', '/stats/reset');
}

function cpuMs(start: NodeJS.CpuUsage): {cpuUserMs: number; cpuSystemMs: number} {
  const d = process.cpuUsage(start);
  return {cpuUserMs: d.user / 1000, cpuSystemMs: d.system / 1000};
}

function elapsedMs(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function keyOf(server: KubeServer): string {
  const spec = server.spec.cluster.spec;
  if (spec.aws) return clusterKey({cloud: 'AWS', account: spec.aws.account_id, region: spec.aws.region, name: spec.aws.name});
  const az = spec.azure;
  return clusterKey({cloud: 'Azure', account: az?.subscription_id ?? '', resourceGroup: az?.resource_group ?? '', region: '', name: az?.resource_name ?? server.metadata.name});
}

async function runService(request: DriverRequest, config: Config, live: {mb?: Record<string, number>}): Promise<DriverCycle[]> {
  const logger = createLogger({level: config.log.level, format: 'json', destination: pino.destination(2)});
  const cycles: DriverCycle[] = [];
  await beforeCycle(request, 0);
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  // The first cycle starts with the service, as in production.
  const service = await startService({config, io: processIo, clock: systemClock, logger, listenAddr: '127.0.0.1:0'});
  try {
    await measuredCycles(request, service, cycles, {started, cpu});
    // Measured once the cycles' frames are gone: the last report is the driver's, not the service's.
    const gc = (globalThis as {gc?: () => void}).gc;
    if (gc) {
      gc();
      live.mb = megabytes(process.memoryUsage());
    }
  } finally {
    await service.stop({deregister: false, graceMs: 1000});
  }
  return cycles;
}

/**
 * What the driver keeps of a cycle's report. The report itself (every plan item's document, every
 * source's result) held in the driver's frame through the next cycle would count the driver's
 * memory as the service's: the peak RSS measured is the service's alone.
 */
interface ReportSummary {
  readonly durationMs: number;
  readonly counts: CycleReport['counts'];
  readonly result: string;
  readonly failedSources: number;
}

function summarize(report: CycleReport): ReportSummary {
  return {durationMs: report.durationMs, counts: report.counts, result: report.result, failedSources: report.sources.filter((s) => !s.ok).length};
}

/** Keys of the registered clusters, from a list that is garbage as soon as this returns. */
function registeredKeys(service: RunningService): string[] {
  return service.inventory.list().map(keyOf);
}

/** Runs the service's cycles (the first one already started with it), recording each in `cycles`. */
async function measuredCycles(request: DriverRequest, service: RunningService, cycles: DriverCycle[], first: {started: bigint; cpu: NodeJS.CpuUsage}): Promise<void> {
  let {started, cpu} = first;
  // Summarised as the report arrives: the report never enters this function's frame.
  let next = service.nextCycle().then(summarize);
  let profiler: Session | undefined;
  const windows: [number, number][] = [];
  for (let i = 0; i < request.cycles; i++) {
    if (i > 0) {
      await beforeCycle(request, i);
      if (i === 1 && request.steadyProfile !== undefined) profiler = await startProfiler(request.steadyProfile.endsWith('.heapprofile'));
      next = service.nextCycle().then(summarize);
      started = process.hrtime.bigint();
      cpu = process.cpuUsage();
      service.trigger();
    }
    const report = await next;
    const wallMs = elapsedMs(started);
    if (profiler) windows.push([Number(started / 1000n), Number(process.hrtime.bigint() / 1000n)]);
    const usage = cpuMs(cpu);
    const stats = await control<SimStats>(request.controlUrl, 'GET', '/stats');
    const verdict = await control<SimVerdict>(request.controlUrl, 'POST', '/verify', {keys: registeredKeys(service)});
    cycles.push({
      wallMs,
      reportMs: report.durationMs,
      ...usage,
      stats,
      verdict,
      counts: report.counts,
      result: report.result,
      failedSources: report.failedSources,
    });
    process.stderr.write(`[driver] service cycle ${i + 1}/${request.cycles}: ${wallMs.toFixed(0)} ms, ${(usage.cpuUserMs + usage.cpuSystemMs).toFixed(0)} ms CPU, ${verdict.found}/${verdict.expected} registered, peak RSS so far ${Math.round(process.resourceUsage().maxRSS / 1024)} MB\n`);
  }
  if (profiler && request.steadyProfile !== undefined) {
    if (request.steadyProfile.endsWith('.heapprofile')) {
      const {profile} = await profiler.post('HeapProfiler.getSamplingProfile');
      await writeFile(request.steadyProfile, JSON.stringify(profile));
    } else {
      const {profile} = await profiler.post('Profiler.stop');
      await writeFile(request.steadyProfile, JSON.stringify({...profile, cycleWindowsUs: windows}));
    }
    profiler.disconnect();
  }
}

/** Starts V8's sampling profiler in this process (the steady cycles' profile, without the cold one). */
async function startProfiler(heap = false): Promise<Session> {
  const session = new Session();
  session.connect();
  if (heap) {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true});
    return session;
  }
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return session;
}

/** The SDK floor: same clients and concurrency as the service's AWS sources, nothing else. */
async function runFloor(request: DriverRequest, config: Config): Promise<DriverCycle[]> {
  const ds = config.discovery_service;
  const env = process.env;
  const sources = ds.aws.flatMap((m) => m.regions.map((region) => ({region, roleArn: m.assume_role_arn, externalId: m.external_id})));
  const clients = new Map<string, EKSClient>();
  const describeQueues = new Map<string, PQueue>();
  for (const s of sources) {
    const credentials = awsCredentialProvider({region: s.region, env, ...(s.roleArn ? {roleArn: s.roleArn} : {}), ...(s.externalId ? {externalId: s.externalId} : {})});
    clients.set(`${s.region}|${s.roleArn ?? ''}`, new EKSClient({
      region: s.region,
      credentials,
      // The settings of src/clouds/aws/sources.ts, so retries and throttling behave the same.
      maxAttempts: Number(env['AWS_MAX_ATTEMPTS']) || 8,
      retryMode: env['AWS_RETRY_MODE'] ?? 'adaptive',
      requestHandler: awsRequestHandler(ds.request_timeout),
    }));
    if (!describeQueues.has(s.region)) describeQueues.set(s.region, new PQueue({concurrency: ds.concurrency.per_region}));
  }
  const cycles: DriverCycle[] = [];
  for (let i = 0; i < request.cycles; i++) {
    await beforeCycle(request, i);
    const started = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    const found: string[] = [];
    let failed = 0;
    const sourceQueue = new PQueue({concurrency: ds.concurrency.sources});
    await Promise.all(sources.map((s) => sourceQueue.add(async () => {
      const client = clients.get(`${s.region}|${s.roleArn ?? ''}`) as EKSClient;
      const queue = describeQueues.get(s.region) as PQueue;
      try {
        const names = await listClusterNames(client);
        await Promise.all(names.map((name) => queue.add(async () => {
          const out = await client.send(new DescribeClusterCommand({name}));
          const c = out.cluster;
          const account = c?.arn?.split(':')[4] ?? '';
          if (c?.status === 'ACTIVE' || c?.status === 'UPDATING') found.push(clusterKey({cloud: 'AWS', account, region: s.region, name}));
        })));
      } catch {
        failed++;
      }
    })));
    const wallMs = elapsedMs(started);
    const usage = cpuMs(cpu);
    const stats = await control<SimStats>(request.controlUrl, 'GET', '/stats');
    const verdict = await control<SimVerdict>(request.controlUrl, 'POST', '/verify', {keys: found});
    cycles.push({wallMs, ...usage, stats, verdict, failedSources: failed});
    process.stderr.write(`[driver] floor cycle ${i + 1}/${request.cycles}: ${wallMs.toFixed(0)} ms, ${(usage.cpuUserMs + usage.cpuSystemMs).toFixed(0)} ms CPU, ${verdict.found}/${verdict.expected} described\n`);
  }
  for (const client of clients.values()) client.destroy();
  return cycles;
}

function megabytes(usage: NodeJS.MemoryUsage): Record<string, number> {
  return Object.fromEntries(Object.entries(usage).map(([k, v]) => [k, Math.round(v / 1e5) / 10]));
}

async function main(argv: readonly string[]): Promise<void> {
  const raw = argv[0] === '--' ? argv[1] : argv[0];
  if (!raw) throw new Error('usage: node bench/cycle-driver.ts -- <request JSON>; expected a request, got none');
  const request = JSON.parse(raw) as DriverRequest;
  const config = parseConfig(await readFile(request.config, 'utf8'), request.config);
  const live: {mb?: Record<string, number>} = {};
  const cycles = request.mode === 'service' ? await runService(request, config, live) : await runFloor(request, config);
  const memoryMb = megabytes(process.memoryUsage());
  const gc = (globalThis as {gc?: () => void}).gc;
  gc?.();
  const result: DriverResult = {
    mode: request.mode,
    cycles,
    maxRssKb: process.resourceUsage().maxRSS,
    memoryMb,
    ...(gc ? {memoryAfterGcMb: megabytes(process.memoryUsage())} : {}),
    ...(live.mb ? {liveAfterCycleMb: live.mb} : {}),
  };
  process.stdout.write(`BENCH_RESULT ${JSON.stringify(result)}\n`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    // Open SDK sockets or timers must not keep a finished measurement alive.
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`cycle-driver: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
