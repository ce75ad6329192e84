/**
 * `npm run bench:w4`: the organization workload. Builds the OrgWorld (bench/org-world.ts) behind
 * the wire-level AWS fake (Organizations, STS, EKS, latency injected), runs the real service for
 * N cycles in a child process (bench/cycle-driver.ts, so RSS and CPU are the service's own) with
 * one account joining and one leaving before every cycle after the first, and prints a JSON
 * report: cycle wall vs the latency bound, calls by operation, CPU per cluster, peak RSS and
 * false deregistrations.
 *
 *   npm run bench:w4 [-- --scenario bench/scenarios/w4-organization.json] [--cycles 4] [--node-args="--max-old-space-size=256"] [--cold] [--profile-steady FILE.cpuprofile|FILE.heapprofile]
 *
 * Without --node-args the service runs with the Node flags it ships with (`npm start`, the image):
 * the peak RSS target is about the service as deployed. Like the image and `bench:memory`, the
 * service runs on a warm Node compile cache (warmed by a tiny organization with the same flags
 * first), so it never loads Node's TypeScript stripper; `--cold` measures without it.
 */
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {startFakeAws, type FakeAws} from '../test/fakes/aws-fakes.ts';
import {runChild} from './child.ts';
import {startControl} from './control-server.ts';
import type {DriverRequest, DriverResult} from './cycle-driver.ts';
import {EXTERNAL_ID, MANAGEMENT_KEY, OrgWorld, ROLE_NAME, orgScenarioSchema, type OrgScenario} from './org-world.ts';
import {shippedNodeFlags} from './memory.ts';
import {summarizeProfile} from './profile.ts';
import {scriptArgs} from './sim.ts';

const HERE = import.meta.dirname;

/** Calls per `service:operation`, as the cycle driver reads them from GET /stats. */
function stats(fake: FakeAws): Record<string, unknown> {
  const aws: Record<string, {calls: number; throttled: number; errors: number}> = {};
  let calls = 0;
  for (const call of fake.stats.calls) {
    const op = (aws[`${call.service}:${call.operation}`] ??= {calls: 0, throttled: 0, errors: 0});
    op.calls++;
    calls++;
    if (call.code && /throttl/i.test(call.code)) op.throttled++;
    else if (call.status >= 400 || call.status === 0) op.errors++;
  }
  return {aws, aws_calls: calls, aws_throttled: 0, arm: {}, arm_calls: 0, arm_throttled: 0, describe_max_in_flight: 0, aws_early_throttled_share: 0};
}

/**
 * The latency bound of one cycle: the organization walk's critical path (or its calls over the
 * walk's 4 slots), the AssumeRole rounds (every account cold, only the refusing ones warm), then
 * every (account, region) source's ListClusters page(s) and second round trip (cold: the describe
 * round; steady: the tag read, plus describes of what changed) spread over the source slots.
 * It counts latency only: a process that needs more CPU per cycle than this cannot meet it on
 * one thread, which is why the report also prints the cycle's CPU time.
 */
export function orgBounds(s: OrgScenario, world: OrgWorld): {coldMs: number; steadyMs: number; formula: string} {
  const ps = s.page_size;
  const leaves = s.child_units > 0 ? s.top_units * s.child_units : s.top_units;
  const perLeaf = Math.ceil(s.accounts / leaves);
  const walkCalls = 2 + 1 + s.top_units + (s.child_units > 0 ? s.top_units * s.child_units : 0) + leaves * Math.ceil(perLeaf / ps) + Math.ceil(s.top_units / ps);
  const depth = 2 + Math.ceil(s.top_units / ps) + (s.child_units > 0 ? Math.ceil(s.child_units / ps) : 0) + Math.ceil(perLeaf / ps);
  const walkMs = Math.max(depth, Math.ceil(walkCalls / 4)) * s.latency_ms;
  const assumable = s.accounts - world.deniedAccounts;
  const coldAssumeMs = Math.ceil(s.accounts / 20) * s.latency_ms;
  const steadyAssumeMs = world.deniedAccounts > 0 ? Math.ceil(world.deniedAccounts / 20) * s.latency_ms : 0;
  const perAccount = Math.floor(s.clusters / s.accounts);
  let chainMs = 0;
  for (let r = 0; r < s.regions.length; r++) {
    const n = Math.floor(perAccount / s.regions.length) + (r < perAccount % s.regions.length ? 1 : 0);
    chainMs += (Math.ceil(Math.max(n, 1) / ps) + (n > 0 ? Math.ceil(n / s.concurrency.per_region) : 0)) * s.latency_ms;
  }
  const eksMs = (assumable * chainMs) / s.concurrency.sources;
  return {
    coldMs: Math.round(walkMs + coldAssumeMs + eksMs),
    steadyMs: Math.round(walkMs + steadyAssumeMs + eksMs),
    formula:
      `walk max(${depth} sequential, ${walkCalls} calls / 4) x ${s.latency_ms} ms + AssumeRole ceil(accounts / 20) rounds (cold: ${s.accounts}, steady: ${world.deniedAccounts} refusing)` +
      ` + ${assumable} accounts x (per region: list page + describe round or tag read) = ${chainMs} ms each / ${s.concurrency.sources} sources`,
  };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : ((s[Math.floor((s.length - 1) / 2)] ?? 0) + (s[Math.ceil((s.length - 1) / 2)] ?? 0)) / 2;
};

/** Runs W4 and returns its report. */
export async function runOrgWorkload(
  scenario: OrgScenario,
  options: {cycles: number; nodeArgs?: readonly string[]; log?: (l: string) => void; /** NODE_COMPILE_CACHE of the service. */ compileCache?: string; /** A CPU profile of the steady cycles goes here. */ steadyProfile?: string},
): Promise<Record<string, unknown>> {
  const log = options.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const world = new OrgWorld(scenario);
  const fake = await startFakeAws({world: world.aws, latencyMs: scenario.latency_ms, pageSize: scenario.page_size});
  const control = await startControl({stats: () => stats(fake), resetStats: () => fake.stats.reset(), churn: () => ({step: world.joinAndLeave(), created: 1, deleted: 1}), expectedKeys: () => world.expectedKeys()});
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-bench-w4-'));
  try {
    const config = {
      version: 'v1',
      discovery_service: {
        discovery_group: 'bench',
        poll_interval: '1h',
        concurrency: scenario.concurrency,
        aws: [{
          types: ['eks'],
          regions: scenario.regions,
          assume_role_name: ROLE_NAME,
          external_id: EXTERNAL_ID,
          organization: {organization_id: world.org.id, organizational_units: {include: ['*'], exclude: []}},
        }],
      },
      probe: {enabled: false},
      storage: {type: 'sqlite', path: path.join(dir, 'registry.db')},
      log: {level: 'error', format: 'json'},
    };
    const configFile = path.join(dir, 'config.yaml');
    await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
    log(`${scenario.name}: ${scenario.accounts} accounts (${world.deniedAccounts} refusing AssumeRole) in ${scenario.top_units * Math.max(1, scenario.child_units)} OUs x ${scenario.regions.length} regions, ${world.size} clusters, ${world.expectedKeys().size} discoverable`);
    const request: DriverRequest = {mode: 'service', config: configFile, cycles: options.cycles, controlUrl: control.url, churnPercent: 1, ...(options.steadyProfile === undefined ? {} : {steadyProfile: options.steadyProfile})};
    const env = {
      ...fake.env,
      AWS_ACCESS_KEY_ID: MANAGEMENT_KEY.accessKeyId,
      AWS_SECRET_ACCESS_KEY: MANAGEMENT_KEY.secretAccessKey,
      AWS_REGION: 'us-east-1',
      AWS_EC2_METADATA_DISABLED: 'true',
      ...(options.compileCache ? {NODE_COMPILE_CACHE: options.compileCache} : {}),
    };
    const outcome = await runChild<DriverResult>(path.join(HERE, 'cycle-driver.ts'), request, {env, nodeArgs: options.nodeArgs ?? [], onProgress: (l) => log(`  ${l}`)});
    if (!outcome.ok) throw new Error(`${scenario.name}: the service run failed: ${outcome.reason}`);
    const cycles = outcome.result.cycles;
    const bounds = orgBounds(scenario, world);
    const walls = cycles.map((c) => Math.round(c.wallMs));
    const steady = walls.slice(1);
    const perCluster = cycles.map((c) => (c.cpuUserMs + c.cpuSystemMs) / Math.max(1, c.verdict.expected));
    const leaverClusters = Math.floor(scenario.clusters / scenario.accounts);
    // A deregistration is false unless its account left; the leaver's clusters are the only rightful ones.
    const falseDeregistrations = cycles.reduce((n, c, i) => n + Math.max(0, (c.counts?.delete ?? 0) - (i === 0 ? 0 : leaverClusters)) + c.verdict.missing, 0);
    const byOperation = (i: number): Record<string, number> =>
      Object.fromEntries(Object.entries((cycles[i]?.stats.aws ?? {}) as Record<string, {calls: number}>).map(([op, v]) => [op, v.calls]).sort());
    const steadyMedian = median(steady);
    return {
      name: scenario.name,
      description: scenario.description ?? '',
      node_args: options.nodeArgs ?? [],
      compile_cache: options.compileCache !== undefined,
      accounts: {members: scenario.accounts, refusing_assume_role: world.deniedAccounts, joined_and_left: control.steps},
      clusters: {total: world.size, expected_last: cycles.at(-1)?.verdict.expected ?? 0, found_last: cycles.at(-1)?.verdict.found ?? 0},
      cycle_wall_ms: {cold: walls[0] ?? 0, steady_median: steadyMedian, all: walls},
      latency_bound_ms: {cold: bounds.coldMs, steady: bounds.steadyMs, formula: bounds.formula},
      wall_vs_bound: {cold: round2((walls[0] ?? 0) / bounds.coldMs), steady: round2(steadyMedian / bounds.steadyMs)},
      calls_by_operation: {first_cycle: byOperation(0), steady: byOperation(cycles.length - 1)},
      cpu_ms_per_cluster: {cold: round3(perCluster[0] ?? 0), steady_median: round3(median(perCluster.slice(1)))},
      // The service's own CPU per cycle (one thread): a wall below it is impossible whatever the latency.
      cycle_cpu_ms: {cold: Math.round(cpuOf(cycles[0])), steady_median: Math.round(median(cycles.slice(1).map(cpuOf)))},
      peak_rss_mb: Math.round(outcome.result.maxRssKb / 1024),
      heap_after_gc_mb: outcome.result.memoryAfterGcMb?.['heapUsed'] ?? null,
      registry: cycles.map((c) => c.counts),
      failed_sources: cycles.map((c) => c.failedSources ?? 0),
      false_deregistrations: falseDeregistrations,
      targets: {
        zero_false_deregistrations: falseDeregistrations === 0,
        peak_rss_at_most_320_mb: outcome.result.maxRssKb / 1024 <= 320,
        steady_cycle_within_1_5x_bound: steadyMedian <= 1.5 * bounds.steadyMs,
        steady_cycle_within_5_minutes: steadyMedian < 300_000,
      },
    };
  } finally {
    await control.close();
    await fake.close();
    await rm(dir, {recursive: true, force: true});
  }
}

function cpuOf(cycle: {cpuUserMs: number; cpuSystemMs: number} | undefined): number {
  return cycle ? cycle.cpuUserMs + cycle.cpuSystemMs : 0;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

async function main(argv: readonly string[]): Promise<void> {
  const {values} = parseArgs({
    args: scriptArgs(argv),
    options: {
      scenario: {type: 'string', default: path.join(HERE, 'scenarios', 'w4-organization.json')},
      cycles: {type: 'string', default: '4'},
      'node-args': {type: 'string'},
      cold: {type: 'boolean', default: false},
      'profile-steady': {type: 'string'},
    },
    strict: true,
  });
  const cycles = Number(values.cycles);
  if (!Number.isInteger(cycles) || cycles < 2) throw new Error(`expected --cycles to be an integer >= 2 (one cold, then steady ones), got ${values.cycles}`);
  const scenario = orgScenarioSchema.parse(JSON.parse(await readFile(values.scenario, 'utf8')));
  const nodeArgs = values['node-args'] !== undefined ? values['node-args'].split(' ').filter(Boolean) : await shippedNodeFlags();
  // The cache is keyed by Node version and flags: a tiny organization run with the same flags fills it.
  const compileCache = values.cold ? undefined : path.join(os.tmpdir(), 'kube-discovery-bench-compile-cache');
  if (compileCache) {
    process.stderr.write(`w4: warming the compile cache (${compileCache})\n`);
    const tiny = {...scenario, name: `${scenario.name}-warm-up`, accounts: 2, top_units: 1, child_units: 1, regions: scenario.regions.slice(0, 2), clusters: 4, denied_share: 0};
    await runOrgWorkload(tiny, {cycles: 2, nodeArgs, compileCache, log: () => undefined});
  }
  const steadyProfile = values['profile-steady'] === undefined ? undefined : path.resolve(values['profile-steady']);
  const report = await runOrgWorkload(scenario, {cycles, nodeArgs, ...(compileCache ? {compileCache} : {}), ...(steadyProfile === undefined ? {} : {steadyProfile})});
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  if (steadyProfile !== undefined && !steadyProfile.endsWith('.heapprofile')) process.stderr.write(`${JSON.stringify(await summarizeProfile(steadyProfile, path.join(HERE, '..'), 40), null, 2)}\n`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`bench:w4: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
