/**
 * `node bench/azure-call-cpu.ts`: the CPU the AKS list path spends per steady cycle, measured
 * alone. W5's world (bench/mg-world.ts) behind the wire-level ARM fake runs in a child process;
 * this process plans the `management_groups` matcher with the real `AzureSources` (shared HTTP
 * pool, the service's metrics policy) and runs every subscription source `--cycles` times over
 * 100 slots, printing per cycle the sources, clusters, ARM calls, this process's CPU and the CPU
 * per call. No inventory, no registry: what is left is the plan and the fetchers.
 *
 *   node bench/azure-call-cpu.ts [--scenario bench/scenarios/w5-management-groups.json] [--cycles 6] [--sdk-only]
 *
 * `--sdk-only` sends every list page through the SDK's pipeline (no short path, lean-get.ts);
 * `--compare` runs both in this process, one cycle each in turn (the same machine load for both),
 * and prints the median steady CPU of each.
 *
 * Run it with the service's Node flags to see their GC cost: `node --max-semi-space-size=12 bench/azure-call-cpu.ts`.
 */
import {fork} from 'node:child_process';
import {readFile} from 'node:fs/promises';
import path from 'node:path';
import {parseArgs} from 'node:util';
import PQueue from 'p-queue';
import {AzureSources} from '../src/clouds/azure/sources.ts';
import {azureMetricsPolicies} from '../src/observability/azure-policy.ts';
import {Metrics} from '../src/observability/metrics.ts';
import {startFakeArm} from '../test/fakes/arm-server.ts';
import {fakeTokenCredential} from '../test/fakes/arm-token-credential.ts';
import {ManagementGroupWorld, ROOT_GROUP, mgScenarioSchema} from './mg-world.ts';

/** The child: the fake and its world, until the parent goes. */
async function serve(file: string): Promise<void> {
  const scenario = mgScenarioSchema.parse(JSON.parse(await readFile(file, 'utf8')));
  const world = new ManagementGroupWorld(scenario);
  const fake = await startFakeArm({world: world.arm, latencyMs: scenario.latency_ms, pageSize: scenario.page_size, fault: world.fault});
  process.send?.({url: fake.url, caPem: fake.caPem, sources: scenario.concurrency.sources});
  process.on('disconnect', () => void fake.close().then(() => process.exit(0)));
}

async function main(): Promise<void> {
  const {values} = parseArgs({
    options: {scenario: {type: 'string', default: path.join(import.meta.dirname, 'scenarios', 'w5-management-groups.json')}, cycles: {type: 'string', default: '6'}, 'sdk-only': {type: 'boolean', default: false}, compare: {type: 'boolean', default: false}, serve: {type: 'boolean', default: false}},
    strict: true,
  });
  if (values.serve) return serve(values.scenario);

  const child = fork(import.meta.filename, ['--serve', '--scenario', values.scenario], {execArgv: [], stdio: 'inherit'});
  const ready = await new Promise<{url: string; caPem: string; sources: number}>((resolve) => child.once('message', (m) => resolve(m as never)));
  const metrics = new Metrics();
  let calls = 0;
  const build = (lean: boolean): AzureSources =>
    new AzureSources({
      credential: fakeTokenCredential(),
      leanListReads: lean,
      clientOptions: {
        tlsOptions: {ca: ready.caPem},
        // The service's metrics policy, counting the calls on the way.
        additionalPolicies: azureMetricsPolicies({
          cloudApiCall: (call) => {
            calls++;
            metrics.cloudApiCall(call);
          },
        }),
      },
    });
  const modes = values.compare ? [{name: 'lean', sources: build(true)}, {name: 'sdk', sources: build(false)}] : [{name: values['sdk-only'] ? 'sdk' : 'lean', sources: build(!values['sdk-only'])}];
  const steady: Record<string, number[]> = {};
  const matcher = {types: ['aks'], subscriptions: ['*'], management_groups: [ROOT_GROUP], resource_groups: ['*'], regions: ['*'], resource_manager_endpoint: ready.url};
  for (let round = 0; round < Number(values.cycles) * modes.length; round++) {
    const cycle = Math.floor(round / modes.length);
    const {name, sources} = modes[round % modes.length] as (typeof modes)[number];
    const before = calls;
    const cpu = process.cpuUsage();
    const started = performance.now();
    const planned = await sources.plan([matcher]);
    const queue = new PQueue({concurrency: ready.sources});
    const controller = new AbortController();
    let clusters = 0;
    let failed = 0;
    await Promise.all(
      planned.fetchers.map((f) =>
        queue.add(async () => {
          const result = await f.fetch(controller.signal);
          clusters += result.clusters.length;
          if (!result.ok) failed++;
        }),
      ),
    );
    const wall = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const cpuMs = (used.user + used.system) / 1000;
    const n = calls - before;
    if (cycle > 0) (steady[name] ??= []).push(Math.round(cpuMs));
    process.stdout.write(
      `${JSON.stringify({mode: name, cycle: cycle + 1, sources: planned.fetchers.length, failed: failed + planned.failed.length, clusters, calls: n, wall_ms: Math.round(wall), cpu_ms: Math.round(cpuMs), cpu_ms_per_call: Math.round((cpuMs / Math.max(1, n)) * 1000) / 1000, rss_mb: Math.round(process.memoryUsage.rss() / 1048576)})}\n`,
    );
  }
  const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  process.stdout.write(`${JSON.stringify({steady_cpu_ms_median: Object.fromEntries(Object.entries(steady).map(([k, v]) => [k, median(v)]))})}\n`);
  child.disconnect();
  process.exit(0);
}

await main();
