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
import {readFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {startFakeAws, type FakeAws} from '../test/fakes/aws-fakes.ts';
import {EXTERNAL_ID, MANAGEMENT_KEY, OrgWorld, ROLE_NAME, orgScenarioSchema, type OrgScenario} from './org-world.ts';
import {shippedRuntime} from './memory.ts';
import {summarizeProfile} from './profile.ts';
import {callStats, cpuOf, cyclesOption, median, runMain, runServiceWorkload, workloadReport} from './service-workload.ts';
import {scriptArgs} from './sim.ts';

const HERE = import.meta.dirname;

const round3 = (x: number): number => Math.round(x * 1000) / 1000;
const callsOf = (c: {readonly stats: object}): number => Math.max(1, Number((c.stats as Record<string, unknown>)['aws_calls'] ?? 0));
const fakeCpuOf = (c: {readonly stats: object}): number => Number((c.stats as Record<string, unknown>)['fake_cpu_ms'] ?? 0);

/**
 * Calls per `service:operation`, as the cycle driver reads them from GET /stats, with the CPU
 * this (the bench's) process spent since the last reset: the fake serving and verifying them.
 */
function stats(fake: FakeAws, since: NodeJS.CpuUsage): Record<string, unknown> {
  const cpu = process.cpuUsage(since);
  return {
    ...callStats('aws', fake.stats.calls, (call) => `${call.service}:${call.operation}`, (call) => call.code !== undefined && /throttl/i.test(call.code)),
    fake_cpu_ms: Math.round((cpu.user + cpu.system) / 1000),
  };
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

/** Runs W4 and returns its report. */
export async function runOrgWorkload(
  scenario: OrgScenario,
  options: {cycles: number; nodeArgs?: readonly string[]; /** The shipped environment (`npm start`'s). */ runtimeEnv?: Readonly<Record<string, string>>; log?: (l: string) => void; /** NODE_COMPILE_CACHE of the service. */ compileCache?: string; /** A CPU profile of the steady cycles goes here. */ steadyProfile?: string},
): Promise<Record<string, unknown>> {
  const log = options.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const world = new OrgWorld(scenario);
  const fake = await startFakeAws({world: world.aws, latencyMs: scenario.latency_ms, pageSize: scenario.page_size});
  let fakeCpuSince = process.cpuUsage();
  try {
    const {result, control} = await runServiceWorkload({
      name: scenario.name,
      tmpPrefix: 'kd-bench-w4-',
      control: {stats: () => stats(fake, fakeCpuSince), resetStats: () => { fake.stats.reset(); fakeCpuSince = process.cpuUsage(); }, churn: () => ({step: world.joinAndLeave(), created: 1, deleted: 1}), expectedKeys: () => world.expectedKeys()},
      concurrency: scenario.concurrency,
      matchers: {
        aws: [{
          types: ['eks'],
          regions: scenario.regions,
          assume_role_name: ROLE_NAME,
          external_id: EXTERNAL_ID,
          organization: {organization_id: world.org.id, organizational_units: {include: ['*'], exclude: []}},
        }],
      },
      env: async () => ({
        ...fake.env,
        AWS_ACCESS_KEY_ID: MANAGEMENT_KEY.accessKeyId,
        AWS_SECRET_ACCESS_KEY: MANAGEMENT_KEY.secretAccessKey,
        AWS_REGION: 'us-east-1',
        AWS_EC2_METADATA_DISABLED: 'true',
        ...(options.compileCache ? {NODE_COMPILE_CACHE: options.compileCache} : {}),
      }),
      banner: `${scenario.name}: ${scenario.accounts} accounts (${world.deniedAccounts} refusing AssumeRole) in ${scenario.top_units * Math.max(1, scenario.child_units)} OUs x ${scenario.regions.length} regions, ${world.size} clusters, ${world.expectedKeys().size} discoverable`,
      cycles: options.cycles,
      nodeArgs: options.nodeArgs,
      runtimeEnv: options.runtimeEnv,
      steadyProfile: options.steadyProfile,
      log,
    });
    const cycles = result.cycles;
    const leaverClusters = Math.floor(scenario.clusters / scenario.accounts);
    // A deregistration is false unless its account left; the leaver's clusters are the only rightful ones.
    const falseDeregistrations = cycles.reduce((n, c, i) => n + Math.max(0, (c.counts?.delete ?? 0) - (i === 0 ? 0 : leaverClusters)) + c.verdict.missing, 0);
    return workloadReport({
      head: {
        name: scenario.name,
        description: scenario.description ?? '',
        node_args: options.nodeArgs ?? [],
        env: options.runtimeEnv ?? {},
        compile_cache: options.compileCache !== undefined,
        accounts: {members: scenario.accounts, refusing_assume_role: world.deniedAccounts, joined_and_left: control.steps},
        clusters: {total: world.size, expected_last: cycles.at(-1)?.verdict.expected ?? 0, found_last: cycles.at(-1)?.verdict.found ?? 0},
      },
      result,
      bounds: orgBounds(scenario, world),
      api: 'aws',
      // The service's own CPU per cycle (one thread): a wall below it is impossible whatever the latency.
      cpu: {
        cycle_cpu_ms: {cold: Math.round(cpuOf(cycles[0])), steady_median: Math.round(median(cycles.slice(1).map(cpuOf)))},
        // Per request the fake answered: the service's CPU, and the bench process's (the fake, which a 2-core machine shares with it).
        cpu_ms_per_call: {steady_median: round3(median(cycles.slice(1).map((c) => cpuOf(c) / callsOf(c)))), all: cycles.map((c) => round3(cpuOf(c) / callsOf(c)))},
        fake_cpu_ms_per_call: {steady_median: round3(median(cycles.slice(1).map((c) => fakeCpuOf(c) / callsOf(c)))), all: cycles.map((c) => round3(fakeCpuOf(c) / callsOf(c)))},
      },
      falseDeregistrations,
    });
  } finally {
    await fake.close();
  }
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
  const cycles = cyclesOption(values.cycles);
  const scenario = orgScenarioSchema.parse(JSON.parse(await readFile(values.scenario, 'utf8')));
  const {nodeArgs, env: runtimeEnv} = await shippedRuntime(values['node-args']);
  // The cache is keyed by Node version and flags: a tiny organization run with the same flags fills it.
  const compileCache = values.cold ? undefined : path.join(os.tmpdir(), 'kube-discovery-bench-compile-cache');
  if (compileCache) {
    process.stderr.write(`w4: warming the compile cache (${compileCache})\n`);
    const tiny = {...scenario, name: `${scenario.name}-warm-up`, accounts: 2, top_units: 1, child_units: 1, regions: scenario.regions.slice(0, 2), clusters: 4, denied_share: 0};
    await runOrgWorkload(tiny, {cycles: 2, nodeArgs, runtimeEnv, compileCache, log: () => undefined});
  }
  const steadyProfile = values['profile-steady'] === undefined ? undefined : path.resolve(values['profile-steady']);
  const report = await runOrgWorkload(scenario, {cycles, nodeArgs, runtimeEnv, ...(compileCache ? {compileCache} : {}), ...(steadyProfile === undefined ? {} : {steadyProfile})});
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  if (steadyProfile !== undefined && !steadyProfile.endsWith('.heapprofile')) process.stderr.write(`${JSON.stringify(await summarizeProfile(steadyProfile, path.join(HERE, '..'), 40), null, 2)}\n`);
}

if (import.meta.main) runMain('bench:w4', main);
