/**
 * `npm run bench:w5`: the management-group workload. Builds the ManagementGroupWorld
 * (bench/mg-world.ts) behind the wire-level ARM fake (management groups, subscriptions, AKS,
 * latency injected) and a managed-identity endpoint, runs the real service for N cycles in a
 * child process (bench/cycle-driver.ts, so RSS and CPU are the service's own) with one
 * subscription moving into the root group and one moving out before every cycle after the
 * first, and prints a JSON report: cycle wall vs the latency bound, calls by operation, CPU per
 * cluster, peak RSS and false deregistrations.
 *
 * Without --node-args the service runs with the Node flags of `npm start` (the image's).
 *
 *   npm run bench:w5 [-- --scenario bench/scenarios/w5-management-groups.json] [--cycles 4] [--node-args="--max-old-space-size=256"] [--profile-steady FILE.cpuprofile|FILE.heapprofile]
 */
import {readFile, writeFile} from 'node:fs/promises';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {startFakeArm, type FakeArm} from '../test/fakes/arm-server.ts';
import {sharedServerTls} from '../test/fakes/tls-ca.ts';
import {shippedRuntime} from './memory.ts';
import {summarizeProfile} from './profile.ts';
import {ManagementGroupWorld, ROOT_GROUP, mgScenarioSchema, type MgScenario} from './mg-world.ts';
import {callStats, cpuOf, cyclesOption, runMain, runServiceWorkload, workloadReport} from './service-workload.ts';
import {startSimIdentity} from './sim-identity.ts';
import {scriptArgs} from './sim.ts';

const HERE = import.meta.dirname;

/** Calls per operation, as the cycle driver reads them from GET /stats. */
function stats(fake: FakeArm): Record<string, unknown> {
  return callStats('arm', fake.stats.requests, (r) => r.operation, (r) => r.status === 429);
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

/** Runs W5 and returns its report. */
export async function runManagementGroupWorkload(scenario: MgScenario, options: {cycles: number; nodeArgs?: readonly string[]; /** The shipped environment (`npm start`'s). */ runtimeEnv?: Readonly<Record<string, string>>; steadyProfile?: string; log?: (l: string) => void}): Promise<Record<string, unknown>> {
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
  try {
    const {result, control} = await runServiceWorkload({
      name: scenario.name,
      tmpPrefix: 'kd-bench-w5-',
      control: {stats: () => stats(fake), resetStats: () => fake.stats.reset(), churn: () => ({step: world.joinAndLeave(), created: 0, deleted: 0}), expectedKeys: () => world.expectedKeys(), graceKeys: () => world.graceKeys(), departedKeys: () => world.departedKeys()},
      concurrency: scenario.concurrency,
      matchers: {azure: [{types: ['aks'], management_groups: [ROOT_GROUP], resource_manager_endpoint: fake.url}]},
      env: async (dir) => {
        const caFile = path.join(dir, 'ca.pem');
        await writeFile(caFile, (await sharedServerTls()).caPem);
        return {...identity.env, NODE_EXTRA_CA_CERTS: caFile, AWS_EC2_METADATA_DISABLED: 'true'};
      },
      banner: `${scenario.name}: ${scenario.subscriptions} subscriptions (${world.deniedSubscriptions} denying) in ${world.nestedGroups} nested groups under ${ROOT_GROUP}, ${scenario.outside_subscriptions} outside, ${world.size} clusters, ${world.expectedKeys().size} discoverable`,
      cycles: options.cycles,
      nodeArgs: options.nodeArgs,
      runtimeEnv: options.runtimeEnv,
      steadyProfile: options.steadyProfile,
      log,
    });
    const cycles = result.cycles;
    // A deregistration is false unless its entry was registered before the cycle and its
    // subscription was moved out of the group by a step (`departed`: the one that moved out two
    // cycles ago, once the second walk without it has confirmed it); a denying subscription's is false. An expected cluster not registered counts
    // too, and so does one still registered that should not be: the moved-out subscription's
    // clusters only on the cycle right after its move (the one walk of grace, `graced`).
    const falseDeregistrations = cycles.reduce((n, c, i) => n + Math.max(0, (c.counts?.delete ?? 0) - (control.verifications[i]?.departed ?? 0)) + c.verdict.missing + c.verdict.unexpected, 0);
    return workloadReport({
      head: {
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
      },
      result,
      bounds: mgBounds(scenario, world),
      api: 'arm',
      // The latency bound assumes a free CPU; the service's own CPU per cycle says how far that holds on this machine.
      cpu: {service_cpu_ms: cycles.map((c) => Math.round(cpuOf(c)))},
      falseDeregistrations,
    });
  } finally {
    await fake.close();
    await identity.close();
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const {values} = parseArgs({
    args: scriptArgs(argv),
    options: {
      scenario: {type: 'string', default: path.join(HERE, 'scenarios', 'w5-management-groups.json')},
      cycles: {type: 'string', default: '4'},
      'node-args': {type: 'string'},
      'profile-steady': {type: 'string'},
    },
    strict: true,
  });
  const cycles = cyclesOption(values.cycles);
  const scenario = mgScenarioSchema.parse(JSON.parse(await readFile(values.scenario, 'utf8')));
  // Without --node-args the service runs with the flags it ships with, as W4 and bench:memory do.
  const {nodeArgs, env: runtimeEnv} = await shippedRuntime(values['node-args']);
  const report = await runManagementGroupWorkload(scenario, {cycles, nodeArgs, runtimeEnv, ...(values['profile-steady'] === undefined ? {} : {steadyProfile: path.resolve(values['profile-steady'])})});
  if (values['profile-steady'] !== undefined && !values['profile-steady'].endsWith('.heapprofile')) process.stderr.write(`${JSON.stringify(await summarizeProfile(path.resolve(values['profile-steady']), path.join(HERE, '..'), 25), null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

if (import.meta.main) runMain('bench:w5', main);
