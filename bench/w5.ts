/**
 * `npm run bench:w5`: the management-group workload. Builds the ManagementGroupWorld
 * (bench/mg-world.ts) behind the wire-level ARM fake (management groups, subscriptions, AKS,
 * latency injected) and a managed-identity endpoint, runs the real service for N cycles in a
 * child process (bench/cycle-driver.ts, so RSS and CPU are the service's own) with one
 * subscription moving into the root group and one moving out before every cycle after the
 * first, and prints a JSON report: cycle wall vs the latency bound, calls by operation, CPU per
 * cluster, peak RSS and false deregistrations.
 *
 *   npm run bench:w5 [-- --scenario bench/scenarios/w5-management-groups.json] [--cycles 4] [--node-args="--max-old-space-size=256"] [--profile-steady FILE.cpuprofile|FILE.heapprofile]
 */
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {startFakeArm, type FakeArm} from '../test/fakes/arm-server.ts';
import {sharedServerTls} from '../test/fakes/tls-ca.ts';
import {runChild} from './child.ts';
import {startControl} from './control-server.ts';
import {summarizeProfile} from './profile.ts';
import type {DriverRequest, DriverResult} from './cycle-driver.ts';
import {ManagementGroupWorld, ROOT_GROUP, mgScenarioSchema, type MgScenario} from './mg-world.ts';
import {startSimIdentity} from './sim-identity.ts';
import {scriptArgs} from './sim.ts';

const HERE = import.meta.dirname;

/** Calls per operation, as the cycle driver reads them from GET /stats. */
function stats(fake: FakeArm): Record<string, unknown> {
  const arm: Record<string, {calls: number; throttled: number; errors: number}> = {};
  for (const r of fake.stats.requests) {
    const op = (arm[r.operation] ??= {calls: 0, throttled: 0, errors: 0});
    op.calls++;
    if (r.status === 429) op.throttled++;
    else if (r.status >= 400 || r.status === 0) op.errors++;
  }
  return {aws: {}, aws_calls: 0, aws_throttled: 0, arm, arm_calls: fake.stats.requests.length, arm_throttled: 0, describe_max_in_flight: 0, aws_early_throttled_share: 0};
}

/**
 * The latency bound of one cycle: the descendants pages (one after the other, next to the
 * subscriptions list pages: the walk runs beside the listing), then every subscription source's
 * managed clusters page(s), plus its listClusterUserCredential rounds (per-subscription queue;
 * cold: every subscription, steady: the one that moved in), spread over the source slots, which
 * a source holds for its list and its credential calls. Denied subscriptions cost one round
 * trip each. Token acquisition (one, cached) is left out.
 */
export function mgBounds(s: MgScenario, world: ManagementGroupWorld): {coldMs: number; steadyMs: number; formula: string} {
  const inside = s.subscriptions;
  const walkPages = Math.max(1, Math.ceil((inside + world.nestedGroups) / s.page_size));
  const listPages = Math.max(1, Math.ceil((inside + s.outside_subscriptions) / s.page_size));
  const planMs = Math.max(walkPages, listPages) * s.latency_ms;
  const n = s.clusters_per_subscription;
  const pages = Math.max(1, Math.ceil(n / s.page_size));
  const listing = world.deniedSubscriptions + (inside - world.deniedSubscriptions) * pages;
  const credentials = (inside - world.deniedSubscriptions) * (n > 0 ? Math.ceil(n / s.concurrency.per_region) : 0);
  // A steady cycle also fetches the kubeconfigs of the subscription that moved into the tree.
  const joined = n > 0 ? Math.ceil(n / s.concurrency.per_region) : 0;
  const steadyMs = planMs + Math.ceil((listing + joined) / s.concurrency.sources) * s.latency_ms;
  const coldMs = planMs + Math.ceil((listing + credentials) / s.concurrency.sources) * s.latency_ms;
  return {
    coldMs,
    steadyMs,
    formula:
      `max(${walkPages} descendants pages, ${listPages} subscriptions pages) x ${s.latency_ms} ms + ${listing} managed-cluster list round trips` +
      ` (cold: + ${credentials} listClusterUserCredential rounds of ${s.concurrency.per_region}; steady: + ${joined} for the subscription that moved in) / ${s.concurrency.sources} sources x ${s.latency_ms} ms`,
  };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : ((s[Math.floor((s.length - 1) / 2)] ?? 0) + (s[Math.ceil((s.length - 1) / 2)] ?? 0)) / 2;
};

/** Runs W5 and returns its report. */
export async function runManagementGroupWorkload(scenario: MgScenario, options: {cycles: number; nodeArgs?: readonly string[]; steadyProfile?: string; log?: (l: string) => void}): Promise<Record<string, unknown>> {
  const log = options.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const world = new ManagementGroupWorld(scenario);
  const identity = await startSimIdentity();
  const fake = await startFakeArm({
    world: world.arm,
    latencyMs: scenario.latency_ms,
    pageSize: scenario.page_size,
    fault: world.fault,
    acceptToken: (token) => identity.resourceOf(token) === 'https://management.azure.com',
  });
  const control = await startControl({stats: () => stats(fake), resetStats: () => fake.stats.reset(), churn: () => ({step: world.joinAndLeave(), created: 0, deleted: 0}), expectedKeys: () => world.expectedKeys(), graceKeys: () => world.graceKeys(), departedKeys: () => world.departedKeys()});
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-bench-w5-'));
  try {
    const caFile = path.join(dir, 'ca.pem');
    await writeFile(caFile, (await sharedServerTls()).caPem);
    const config = {
      version: 'v1',
      discovery_service: {
        discovery_group: 'bench',
        poll_interval: '1h',
        concurrency: scenario.concurrency,
        azure: [{types: ['aks'], management_groups: [ROOT_GROUP], resource_manager_endpoint: fake.url}],
      },
      probe: {enabled: false},
      storage: {type: 'sqlite', path: path.join(dir, 'registry.db')},
      log: {level: 'error', format: 'json'},
    };
    const configFile = path.join(dir, 'config.yaml');
    await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
    log(`${scenario.name}: ${scenario.subscriptions} subscriptions (${world.deniedSubscriptions} denying) in ${world.nestedGroups} nested groups under ${ROOT_GROUP}, ${scenario.outside_subscriptions} outside, ${world.size} clusters, ${world.expectedKeys().size} discoverable`);
    const request: DriverRequest = {mode: 'service', config: configFile, cycles: options.cycles, controlUrl: control.url, churnPercent: 1, ...(options.steadyProfile === undefined ? {} : {steadyProfile: options.steadyProfile})};
    const env = {...identity.env, NODE_EXTRA_CA_CERTS: caFile, AWS_EC2_METADATA_DISABLED: 'true'};
    const outcome = await runChild<DriverResult>(path.join(HERE, 'cycle-driver.ts'), request, {env, nodeArgs: options.nodeArgs ?? [], onProgress: (l) => log(`  ${l}`)});
    if (!outcome.ok) throw new Error(`${scenario.name}: the service run failed: ${outcome.reason}`);
    const cycles = outcome.result.cycles;
    const bounds = mgBounds(scenario, world);
    const walls = cycles.map((c) => Math.round(c.wallMs));
    const steady = walls.slice(1);
    const perCluster = cycles.map((c) => (c.cpuUserMs + c.cpuSystemMs) / Math.max(1, c.verdict.expected));
    // A deregistration is false unless its entry was registered before the cycle and its
    // subscription was moved out of the group by a step (`departed`: the one that moved out two
    // cycles ago, once the second walk without it has confirmed it); a denying subscription's is false. An expected cluster not registered counts
    // too, and so does one still registered that should not be: the moved-out subscription's
    // clusters only on the cycle right after its move (the one walk of grace, `graced`).
    const falseDeregistrations = cycles.reduce((n, c, i) => n + Math.max(0, (c.counts?.delete ?? 0) - (control.verifications[i]?.departed ?? 0)) + c.verdict.missing + c.verdict.unexpected, 0);
    const byOperation = (i: number): Record<string, number> =>
      Object.fromEntries(Object.entries((cycles[i]?.stats.arm ?? {}) as Record<string, {calls: number}>).map(([op, v]) => [op, v.calls]).sort());
    const steadyMedian = median(steady);
    return {
      name: scenario.name,
      description: scenario.description ?? '',
      subscriptions: {under_group: scenario.subscriptions, denying: world.deniedSubscriptions, outside: scenario.outside_subscriptions, nested_groups: world.nestedGroups, moved: control.steps},
      clusters: {
        total: world.size,
        expected_last: cycles.at(-1)?.verdict.expected ?? 0,
        found_last: cycles.at(-1)?.verdict.found ?? 0,
        unexpected_last: cycles.at(-1)?.verdict.unexpected ?? 0,
        // Clusters of the subscription that moved out before the last cycle, kept one walk (stale).
        kept_one_walk_last: control.verifications.at(-1)?.graced ?? 0,
      },
      cycle_wall_ms: {cold: walls[0] ?? 0, steady_median: steadyMedian, all: walls},
      latency_bound_ms: {cold: bounds.coldMs, steady: bounds.steadyMs, formula: bounds.formula},
      wall_vs_bound: {cold: bounds.coldMs > 0 ? round2((walls[0] ?? 0) / bounds.coldMs) : null, steady: bounds.steadyMs > 0 ? round2(steadyMedian / bounds.steadyMs) : null},
      calls_by_operation: {first_cycle: byOperation(0), steady: byOperation(cycles.length - 1)},
      cpu_ms_per_cluster: {cold: round3(perCluster[0] ?? 0), steady_median: round3(median(perCluster.slice(1)))},
      // The latency bound assumes a free CPU; the service's own CPU per cycle says how far that holds on this machine.
      service_cpu_ms: cycles.map((c) => Math.round(c.cpuUserMs + c.cpuSystemMs)),
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
    await identity.close();
    await rm(dir, {recursive: true, force: true});
  }
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
      scenario: {type: 'string', default: path.join(HERE, 'scenarios', 'w5-management-groups.json')},
      cycles: {type: 'string', default: '4'},
      'node-args': {type: 'string', default: ''},
      'profile-steady': {type: 'string'},
    },
    strict: true,
  });
  const cycles = Number(values.cycles);
  if (!Number.isInteger(cycles) || cycles < 2) throw new Error(`expected --cycles to be an integer >= 2 (one cold, then steady ones), got ${values.cycles}`);
  const scenario = mgScenarioSchema.parse(JSON.parse(await readFile(values.scenario, 'utf8')));
  const report = await runManagementGroupWorkload(scenario, {cycles, nodeArgs: values['node-args'].split(' ').filter(Boolean), ...(values['profile-steady'] === undefined ? {} : {steadyProfile: path.resolve(values['profile-steady'])})});
  if (values['profile-steady'] !== undefined && !values['profile-steady'].endsWith('.heapprofile')) process.stderr.write(`${JSON.stringify(await summarizeProfile(path.resolve(values['profile-steady']), path.join(HERE, '..'), 25), null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`bench:w5: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
