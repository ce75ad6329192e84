/**
 * `node bench/describe-batching.ts`: how the CPU of W0's SDK calls depends on how many
 * DescribeCluster calls of a region are started together (issue 15, W0 against the peer).
 * Starts the W0 simulator in this process, then runs, alternately and `--reps` times, one child
 * process per cap in `--caps` (a number: calls in flight per region, as
 * `concurrency.per_region`; `all`: every listed cluster of a region at once, as the Backstage
 * peer does). Each child runs the service's EKS clients (same options, `leanSdkClient`, the
 * service's SHA-256) over `--cycles` cycles of ListClusters + DescribeCluster per region, 20
 * regions at once, and prints per cycle: wall, process CPU, main-thread CPU (from
 * /proc/thread-self/stat: the event loop's own time, without V8's helper threads), the most
 * DescribeCluster calls the simulator saw in flight, clusters found and failed regions with the first error.
 *
 *   node bench/describe-batching.ts [--caps 10,100,all,100@20] [--reps 3] [--cycles 3]
 *
 * `N@S` runs cap N with S sockets per region client (default: the service's, CLIENT_SOCKETS).
 *
 * A diagnostic, not a target: the bench's W0 figures come from `npm run bench` only.
 */
import {DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {readFileSync} from 'node:fs';
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import PQueue from 'p-queue';
import {leanSdkClient} from '../src/clouds/aws/lean-sdk.ts';
import {NodeSha256} from '../src/clouds/aws/sha256.ts';
import {CLIENT_SOCKETS, DEFAULT_CONNECT_TIMEOUT_MS} from '../src/clouds/aws/connect-deadline.ts';
import {AwsDispatcher} from '../src/clouds/aws/undici-handler.ts';
import {awsRequestHandler} from '../src/clouds/aws/sources.ts';
import {awsCredentialProvider} from '../src/credentials/aws-credentials.ts';
import {runChild} from './child.ts';
import {listClusterNames} from './list-clusters.ts';
import {loadScenario, regionsOf} from './scenario.ts';
import {scriptArgs, startSimulator, type SimStats} from './sim.ts';

/** Set in the children's environment: the same file runs the measured loop. */
const CHILD_FLAG = 'KD_DESCRIBE_BATCHING_CHILD';

interface ChildRequest {
  readonly cap: number | 'all';
  /** Sockets per region client (default: the service's, CLIENT_SOCKETS). */
  readonly sockets?: number;
  readonly cycles: number;
  readonly regions: readonly string[];
  readonly controlUrl: string;
}

interface ChildCycle {
  readonly wallMs: number;
  readonly cpuMs: number;
  readonly mainThreadMs: number;
  readonly maxInFlight: number;
  readonly calls: number;
  readonly found: number;
  readonly failedRegions: number;
  readonly firstError?: string;
}

/** The calling thread's user + system CPU in ms (clock ticks of 10 ms). */
function threadCpuMs(): number {
  const stat = readFileSync('/proc/thread-self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function control<T>(base: string, method: 'GET' | 'POST', route: string): Promise<T> {
  const res = await fetch(`${base}${route}`, {method});
  if (!res.ok) throw new Error(`simulator ${method} ${route}: expected 200, got ${res.status}`);
  return (await res.json()) as T;
}

async function child(request: ChildRequest): Promise<ChildCycle[]> {
  const env = process.env;
  const clients = new Map(request.regions.map((region) => [region, leanSdkClient(new EKSClient({
    region,
    credentials: awsCredentialProvider({region, env}),
    sha256: NodeSha256,
    // The options of src/clouds/aws/sources.ts.
    maxAttempts: Number(env['AWS_MAX_ATTEMPTS']) || 8,
    retryMode: env['AWS_RETRY_MODE'] ?? 'adaptive',
    requestHandler: awsRequestHandler(20_000, new AwsDispatcher({connectTimeoutMs: DEFAULT_CONNECT_TIMEOUT_MS, answerTimeoutMs: 20_000, connections: request.sockets ?? CLIENT_SOCKETS})),
  }))]));
  const cycles: ChildCycle[] = [];
  for (let i = 0; i < request.cycles; i++) {
    await control(request.controlUrl, 'POST', '/limits/refill');
    await control(request.controlUrl, 'POST', '/stats/reset');
    const started = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    const main = threadCpuMs();
    let found = 0;
    const errors: string[] = [];
    await Promise.all(request.regions.map(async (region) => {
      const client = clients.get(region) as EKSClient;
      const queue = new PQueue({concurrency: request.cap === 'all' ? Infinity : request.cap});
      try {
        const names = await listClusterNames(client);
        await Promise.all(names.map((name) => queue.add(async () => {
          const out = await client.send(new DescribeClusterCommand({name}));
          if (out.cluster?.status === 'ACTIVE' || out.cluster?.status === 'UPDATING') found++;
        })));
      } catch (error) {
        errors.push(`${region}: ${(error as Error).name}: ${(error as Error).message}`);
      }
    }));
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    const used = process.cpuUsage(cpu);
    const mainThreadMs = threadCpuMs() - main;
    const stats = await control<SimStats>(request.controlUrl, 'GET', '/stats');
    cycles.push({
      wallMs,
      cpuMs: (used.user + used.system) / 1000,
      mainThreadMs,
      maxInFlight: stats.describe_max_in_flight,
      calls: stats.aws_calls,
      found,
      failedRegions: errors.length,
      ...(errors[0] ? {firstError: errors[0]} : {}),
    });
  }
  for (const client of clients.values()) client.destroy();
  return cycles;
}

async function main(argv: readonly string[]): Promise<void> {
  if (process.env[CHILD_FLAG] === '1') {
    // runChild passes the request as the argument after `--`.
    const cycles = await child(JSON.parse((argv[0] === '--' ? argv[1] : argv[0]) ?? '{}') as ChildRequest);
    process.stdout.write(`BENCH_RESULT ${JSON.stringify(cycles)}\n`);
    return;
  }
  const {values} = parseArgs({
    args: scriptArgs(argv),
    options: {caps: {type: 'string', default: '10,100,all'}, reps: {type: 'string', default: '3'}, cycles: {type: 'string', default: '3'}},
    strict: true,
  });
  const caps = values.caps.split(',').map((spec): {cap: number | 'all'; sockets?: number; label: string} => {
    const [c = '', s] = spec.split('@');
    const sockets = s === undefined ? undefined : Number(s);
    if (sockets !== undefined && (!Number.isInteger(sockets) || sockets < 1)) throw new Error(`expected the sockets after @ in --caps to be an integer >= 1, got ${spec}`);
    if (c === 'all') return {cap: 'all', label: spec, ...(sockets ? {sockets} : {})};
    const n = Number(c);
    if (!Number.isInteger(n) || n < 1) throw new Error(`expected --caps to be integers >= 1 or "all" (optionally @sockets), got ${spec}`);
    return {cap: n, label: spec, ...(sockets ? {sockets} : {})};
  });
  const scenario = await loadScenario(path.join(import.meta.dirname, 'scenarios/w0.json'));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-describe-batching-'));
  const sim = await startSimulator(scenario, {dir});
  const regions = scenario.aws ? regionsOf(scenario.aws) : [];
  try {
    for (let rep = 0; rep < Number(values.reps); rep++) {
      for (const {cap, sockets, label} of caps) {
        const request: ChildRequest = {cap, ...(sockets ? {sockets} : {}), cycles: Number(values.cycles), regions, controlUrl: sim.description.control_url};
        const result = await runChild<ChildCycle[]>(import.meta.filename, request, {env: {...sim.description.env, [CHILD_FLAG]: '1'}});
        const line = result.ok
          ? result.result.map((c) => `${c.wallMs.toFixed(0)} ms wall, ${c.cpuMs.toFixed(0)} ms CPU, ${c.mainThreadMs} ms main thread, ${c.maxInFlight} in flight, ${c.found}/${c.calls - regions.length} found${c.failedRegions ? `, ${c.failedRegions} regions failed (${c.firstError})` : ''}`).join(' | ')
          : `failed: ${result.reason}`;
        process.stdout.write(`rep ${rep + 1} cap ${label.padEnd(6)} ${line}\n`);
      }
    }
  } finally {
    await sim.close();
    await rm(dir, {recursive: true, force: true});
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`describe-batching: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    },
  );
}
