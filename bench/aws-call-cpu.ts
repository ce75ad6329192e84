/**
 * `node bench/aws-call-cpu.ts`: the CPU the AWS call path spends per SDK call, measured alone.
 * An organization of `--accounts` members (bench/org-world.ts) behind the wire-level AWS fake runs
 * in a child process; this process plans the organization matcher with the real `AwsSources`
 * (shared region clients, per-call identities, tag reads, the service's metrics middleware) and
 * runs every (account, region) source `--cycles` times over 100 slots, printing per cycle the
 * calls made, this process's CPU and the CPU per call. No inventory, no registry: what is left is
 * the call path the EKS/tagging sources share with single-account matchers.
 *
 *   node bench/aws-call-cpu.ts [--accounts 200] [--cycles 4] [--latency 20]
 *
 * Run it with the service's Node flags to see their GC cost: `node --max-semi-space-size=12 bench/aws-call-cpu.ts`.
 */
import {fork} from 'node:child_process';
import {writeFile} from 'node:fs/promises';
import {Session} from 'node:inspector/promises';
import {PerformanceObserver, constants as perfConstants} from 'node:perf_hooks';
import {parseArgs} from 'node:util';
import PQueue from 'p-queue';
import {AwsSources} from '../src/clouds/aws/sources.ts';
import {Metrics} from '../src/observability/metrics.ts';
import {instrumentAwsClient} from '../src/observability/aws-middleware.ts';
import {startFakeAws} from '../test/fakes/aws-fakes.ts';
import {EXTERNAL_ID, MANAGEMENT_KEY, OrgWorld, ROLE_NAME, orgScenarioSchema} from './org-world.ts';

const REGIONS = ['us-east-1', 'us-east-2', 'us-west-1', 'us-west-2', 'ca-central-1', 'sa-east-1', 'eu-west-1', 'eu-west-2', 'eu-west-3', 'eu-central-1', 'eu-north-1', 'ap-northeast-1', 'ap-northeast-2', 'ap-northeast-3', 'ap-south-1', 'ap-southeast-1', 'ap-southeast-2'];

function scenario(accounts: number, latencyMs: number) {
  return orgScenarioSchema.parse({
    name: 'aws-call-cpu',
    seed: 404,
    accounts,
    top_units: 4,
    child_units: 5,
    regions: REGIONS,
    clusters: accounts * 20,
    latency_ms: latencyMs,
    page_size: 20,
    denied_share: 0.02,
    concurrency: {sources: 100, per_region: 10},
  });
}

/** The child: the fake and its world, until the parent goes. */
async function serve(accounts: number, latencyMs: number): Promise<void> {
  const s = scenario(accounts, latencyMs);
  const world = new OrgWorld(s);
  const fake = await startFakeAws({world: world.aws, latencyMs: s.latency_ms, pageSize: s.page_size});
  process.send?.({env: fake.env, organizationId: world.org.id});
  process.on('disconnect', () => void fake.close().then(() => process.exit(0)));
}

async function main(): Promise<void> {
  const {values} = parseArgs({
    options: {accounts: {type: 'string', default: '200'}, cycles: {type: 'string', default: '4'}, latency: {type: 'string', default: '20'}, serve: {type: 'boolean', default: false}, 'heap-profile': {type: 'string'}},
    strict: true,
  });
  const accounts = Number(values.accounts);
  const latencyMs = Number(values.latency);
  if (values.serve) return serve(accounts, latencyMs);

  const child = fork(import.meta.filename, ['--serve', '--accounts', String(accounts), '--latency', String(latencyMs)], {execArgv: [], stdio: 'inherit'});
  const ready = await new Promise<{env: Record<string, string>; organizationId: string}>((resolve) => child.once('message', (m) => resolve(m as never)));
  const env = {...ready.env, AWS_ACCESS_KEY_ID: MANAGEMENT_KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: MANAGEMENT_KEY.secretAccessKey, AWS_REGION: 'us-east-1', AWS_EC2_METADATA_DISABLED: 'true'};
  Object.assign(process.env, env);
  const metrics = new Metrics();
  let calls = 0;
  const sources = new AwsSources({
    env,
    perRegionConcurrency: 10,
    // The service's metrics middleware, counting the calls on the way.
    onClient: (client) =>
      instrumentAwsClient(client, {
        cloudApiCall: (call) => {
          calls++;
          metrics.cloudApiCall(call);
        },
      }),
  });
  const matcher = {
    types: ['eks'],
    regions: REGIONS,
    assume_role_name: ROLE_NAME,
    external_id: EXTERNAL_ID,
    organization: {organization_id: ready.organizationId, organizational_units: {include: ['*'], exclude: []}},
  };
  // GC pauses of this process, per cycle: what the calls' garbage costs.
  const gc = {ms: 0, scavenges: 0, scavengeMs: 0, majors: 0};
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.ms += entry.duration;
      const kind = (entry as {detail?: {kind?: number}}).detail?.kind;
      if (kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) {
        gc.scavenges++;
        gc.scavengeMs += entry.duration;
      } else if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) gc.majors++;
    }
  }).observe({entryTypes: ['gc']});
  // A sampling allocation profile of the cycles after the second (`--heap-profile FILE`): what a steady call allocates.
  const heapProfile = values['heap-profile'];
  let session: Session | undefined;
  for (let cycle = 0; cycle < Number(values.cycles); cycle++) {
    if (heapProfile !== undefined && cycle === 2) {
      session = new Session();
      session.connect();
      await session.post('HeapProfiler.enable');
      await session.post('HeapProfiler.startSampling', {samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true});
    }
    const before = calls;
    const gcBefore = {...gc};
    const cpu = process.cpuUsage();
    const started = performance.now();
    const planned = await sources.plan([matcher]);
    const queue = new PQueue({concurrency: 100});
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
    process.stdout.write(
      `${JSON.stringify({cycle: cycle + 1, sources: planned.fetchers.length, failed: failed + planned.failed.length, clusters, calls: n, wall_ms: Math.round(wall), cpu_ms: Math.round(cpuMs), cpu_ms_per_call: Math.round((cpuMs / Math.max(1, n)) * 1000) / 1000, gc_ms: Math.round(gc.ms - gcBefore.ms), scavenges: gc.scavenges - gcBefore.scavenges, scavenge_ms: Math.round(gc.scavengeMs - gcBefore.scavengeMs), majors: gc.majors - gcBefore.majors, rss_mb: Math.round(process.memoryUsage.rss() / 1048576)})}\n`,
    );
  }
  if (session && heapProfile !== undefined) {
    const {profile} = (await session.post('HeapProfiler.stopSampling')) as {profile: unknown};
    await writeFile(heapProfile, JSON.stringify(profile));
    session.disconnect();
  }
  child.disconnect();
  process.exit(0);
}

await main();
