/**
 * The cloud simulator: the wire fakes (EKS/STS, ARM, Kubernetes API, a managed-identity
 * endpoint) filled from a scenario, with latency, token-bucket rate limits, failing regions and
 * subscriptions, churn, and a small control API. Used in-process by the bench and as its own
 * process by the demo:
 *
 *   npm run sim -- --scenario bench/scenarios/demo.json [--env-file sim.json] [--control-port N]
 *   (the script is `node bench/sim.ts --`: Node itself reads a bare `--env-file` anywhere on its command line)
 *
 * prints (and writes to --env-file) the environment and config a service needs to reach it.
 * Control API (loopback HTTP): GET / (that description), GET /stats, POST /stats/reset,
 * POST /churn[?percent=P], POST /limits/refill, POST /verify ({keys}) -> missing/unexpected.
 * The credentials it prints are the simulator's own fake ones.
 */
import {mkdtemp, writeFile} from 'node:fs/promises';
import http from 'node:http';
import type {AddressInfo} from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {systemClock, type Clock} from '../src/core/clock.ts';
import {startFakeArm, type ArmFaultHook, type FakeArm} from '../test/fakes/arm-server.ts';
import {ArmWorld} from '../test/fakes/arm-world.ts';
import {combineFaults, failRegion, FakeAwsWorld, startFakeAws, type FakeAws, type FaultHook} from '../test/fakes/aws-fakes.ts';
import {sharedServerTls} from '../test/fakes/tls-ca.ts';
import {armRateLimiter, awsRateLimiter, type ArmRateLimiter, type AwsRateLimiter, type RateLimits} from './rate-limit.ts';
import {accountsOf, loadScenario, regionsOf, type Scenario} from './scenario.ts';
import {startSimIdentity, type SimIdentity} from './sim-identity.ts';
import {startSimKube, type SimKube} from './sim-kube.ts';
import {discoveryRoleArn, SimWorld, subscriptionIdOf, type ChurnResult} from './sim-world.ts';
import {placeInManagementGroups, SIM_ROOT_GROUP} from './mg-world.ts';

/** External id the member accounts' discovery roles require. */
export const SIM_EXTERNAL_ID = 'kube-discovery-sim';

/** What a service needs to reach the simulator, as printed and written to `--env-file`. */
export interface SimDescription {
  readonly scenario: string;
  readonly control_url: string;
  /** Environment for the service process (fake credentials and endpoints). */
  readonly env: Readonly<Record<string, string>>;
  readonly ca_file?: string;
  /** `discovery_service.aws` / `.azure` matchers reaching every simulated account and subscription. */
  readonly matchers: {readonly aws: readonly Record<string, unknown>[]; readonly azure: readonly Record<string, unknown>[]};
  readonly clusters: {readonly total: number; readonly expected: number};
  readonly aws?: {readonly endpoint: string; readonly accounts: readonly string[]; readonly regions: readonly string[]; readonly failing_regions: readonly string[]};
  readonly azure?: {readonly endpoint: string; readonly subscriptions: readonly string[]; readonly failing_subscriptions: readonly string[]};
  readonly kube_servers: number;
}

/** API calls the fakes answered since the last reset. */
export interface SimStats {
  /** Per `service:operation`: calls, throttled answers and other errors. */
  readonly aws: Readonly<Record<string, {calls: number; throttled: number; errors: number}>>;
  readonly aws_calls: number;
  readonly aws_throttled: number;
  readonly arm: Readonly<Record<string, {calls: number; throttled: number; errors: number}>>;
  readonly arm_calls: number;
  readonly arm_throttled: number;
  /** Largest number of DescribeCluster calls in flight at once. */
  readonly describe_max_in_flight: number;
  /** Throttled share of the AWS calls started in the first 2 s after the first call: how hard the limits bite before the SDK's adaptive retry slows down. */
  readonly aws_early_throttled_share: number;
}

/** Result of comparing what a service registered with what exists. */
export interface SimVerdict {
  readonly expected: number;
  readonly found: number;
  readonly missing: number;
  readonly unexpected: number;
  readonly missing_sample: readonly string[];
}

/** A running simulator. */
export interface Simulator {
  readonly scenario: Scenario;
  readonly world: SimWorld;
  readonly aws?: FakeAws;
  readonly arm?: FakeArm;
  readonly kube?: SimKube;
  readonly identity: SimIdentity;
  readonly awsLimiter?: AwsRateLimiter;
  readonly armLimiter?: ArmRateLimiter;
  readonly description: SimDescription;
  churn(percent?: number): ChurnResult;
  refillLimits(): void;
  stats(): SimStats;
  resetStats(): void;
  verify(foundKeys: Iterable<string>): SimVerdict;
  close(): Promise<void>;
}

/** Options of startSimulator. */
export interface SimulatorOptions {
  readonly clock?: Clock;
  /** Control API port (default: any free one). */
  readonly controlPort?: number;
  /** Where the CA file goes (default: a new temp dir). */
  readonly dir?: string;
  /** Faults decided per request before the scenario's own (bench/chaos.ts switches them on and off). */
  readonly faults?: {readonly aws?: FaultHook; readonly arm?: ArmFaultHook};
}

/** Builds the worlds of `scenario` and starts every fake it needs on loopback. */
export async function startSimulator(scenario: Scenario, options: SimulatorOptions = {}): Promise<Simulator> {
  const clock = options.clock ?? systemClock;
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async (): Promise<void> => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  };
  try {
    const awsWorld = new FakeAwsWorld({clock});
    const armWorld = new ArmWorld();
    const world = new SimWorld(scenario, awsWorld, armWorld);
    const identity = await startSimIdentity();
    closers.push(() => identity.close());

    const accounts = scenario.aws ? accountsOf(scenario.aws) : [];
    const management = accounts[0];
    const key = {accessKeyId: 'AKIASIMULATOR0000001', secretAccessKey: 'simulator-fake-secret-key-not-a-real-one'};
    for (const account of accounts) {
      awsWorld.addAccount(account, account === management ? {accessKeys: [{...key, arn: `arn:aws:iam::${account}:user/kube-discovery`}]} : {});
      if (account !== management && management) {
        awsWorld.addRole({arn: discoveryRoleArn(account), externalId: SIM_EXTERNAL_ID, trust: [management]});
      }
    }
    const subscriptions = scenario.azure ? Array.from({length: scenario.azure.subscriptions}, (_, i) => subscriptionIdOf(i)) : [];
    for (const sub of subscriptions) armWorld.addSubscription({subscriptionId: sub, displayName: `sim-${sub.slice(-4)}`});
    if (scenario.azure?.management_groups) placeInManagementGroups(armWorld, subscriptions, scenario.azure.management_groups);

    let aws: FakeAws | undefined;
    let awsLimiter: AwsRateLimiter | undefined;
    if (scenario.aws) {
      awsLimiter = scenario.aws.rate_limits ? awsRateLimiter({clock, limits: rateLimits(scenario.aws.rate_limits)}) : undefined;
      const failures: FaultHook[] = scenario.aws.fail_regions.map((r) => failRegion(r, scenario.aws?.fail_code));
      aws = await startFakeAws({world: awsWorld, latencyMs: scenario.aws.latency_ms, pageSize: scenario.aws.page_size, fault: combineFaults(options.faults?.aws, ...failures, awsLimiter?.hook)});
      closers.push(() => aws?.close() ?? Promise.resolve());
    }

    let arm: FakeArm | undefined;
    let armLimiter: ArmRateLimiter | undefined;
    if (scenario.azure) {
      armLimiter = scenario.azure.rate_limits ? armRateLimiter({clock, limits: rateLimits(scenario.azure.rate_limits)}) : undefined;
      const failing = new Set(world.failingSubscriptions());
      const fault: ArmFaultHook = (ctx) =>
        options.faults?.arm?.(ctx) ?? (ctx.subscription !== undefined && failing.has(ctx.subscription.toLowerCase()) ? {status: 403} : armLimiter?.hook(ctx));
      arm = await startFakeArm({
        world: armWorld,
        latencyMs: scenario.azure.latency_ms,
        pageSize: scenario.azure.page_size,
        fault,
        acceptToken: (token) => identity.resourceOf(token) === 'https://management.azure.com',
      });
      closers.push(() => arm?.close() ?? Promise.resolve());
    }

    // The servers run before the clusters exist: clusters carry their API endpoints from the start.
    const planned = world.plan();
    let kube: SimKube | undefined;
    if (scenario.kube) {
      kube = await startSimKube({clusters: planned, sharedServers: scenario.kube.servers, aws: awsWorld, ...(aws ? {stsUrl: aws.url} : {}), arm: armWorld, identity});
      closers.push(() => kube?.close() ?? Promise.resolve());
    }
    world.populate(planned, kube);

    let caFile: string | undefined;
    if (arm || kube) {
      const dir = options.dir ?? (await mkdtemp(path.join(os.tmpdir(), 'kd-sim-')));
      caFile = path.join(dir, 'sim-ca.pem');
      await writeFile(caFile, (await sharedServerTls()).caPem);
    }

    let timer: NodeJS.Timeout | undefined;
    const described: {value?: SimDescription} = {};
    const sim: Simulator = {
      scenario,
      world,
      ...(aws ? {aws} : {}),
      ...(arm ? {arm} : {}),
      ...(kube ? {kube} : {}),
      identity,
      ...(awsLimiter ? {awsLimiter} : {}),
      ...(armLimiter ? {armLimiter} : {}),
      get description(): SimDescription {
        if (!described.value) throw new Error('simulator description read before the simulator finished starting');
        return described.value;
      },
      churn: (percent) => world.churn(percent ?? scenario.churn?.percent ?? 5),
      refillLimits() {
        awsLimiter?.buckets.refill();
        armLimiter?.buckets.refill();
      },
      stats: () => collectStats(aws, arm),
      resetStats() {
        aws?.stats.reset();
        arm?.stats.reset();
        awsLimiter?.buckets.resetStats();
        armLimiter?.buckets.resetStats();
      },
      verify: (found) => verify(world.expectedKeys(), found),
      async close() {
        if (timer) clearInterval(timer);
        await closeAll();
      },
    };
    const control = await startControl(sim, options.controlPort ?? 0);
    closers.push(control.close);
    described.value = describe(sim, {controlUrl: control.url, caFile, management, accounts, subscriptions, key});
    if (scenario.churn?.every_seconds) {
      timer = setInterval(() => sim.churn(), scenario.churn.every_seconds * 1000);
      timer.unref();
    }
    return sim;
  } catch (error) {
    await closeAll();
    throw error;
  }
}

function rateLimits(limits: Readonly<Record<string, {rate_per_second: number; burst: number}>>): RateLimits {
  return Object.fromEntries(Object.entries(limits).map(([op, l]) => [op, {ratePerSecond: l.rate_per_second, burst: l.burst}]));
}

function describe(
  sim: Simulator,
  ctx: {controlUrl: string; caFile: string | undefined; management: string | undefined; accounts: string[]; subscriptions: string[]; key: {accessKeyId: string; secretAccessKey: string}},
): SimDescription {
  const {scenario} = sim;
  const regions = scenario.aws ? regionsOf(scenario.aws) : [];
  const env: Record<string, string> = {
    // Keep the SDKs' credential chains away from the machine's own profiles and metadata services.
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: '/nonexistent/kube-discovery-sim/config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/kube-discovery-sim/credentials',
    ...sim.identity.env,
    ...(ctx.caFile ? {NODE_EXTRA_CA_CERTS: ctx.caFile} : {}),
  };
  if (sim.aws) {
    Object.assign(env, sim.aws.env, {AWS_ACCESS_KEY_ID: ctx.key.accessKeyId, AWS_SECRET_ACCESS_KEY: ctx.key.secretAccessKey, AWS_REGION: regions[0] ?? 'us-east-1'});
  }
  const aws = ctx.accounts.map((account) => ({
    types: ['eks'],
    regions,
    tags: {'*': '*'},
    ...(account === ctx.management ? {} : {assume_role_arn: discoveryRoleArn(account), external_id: SIM_EXTERNAL_ID}),
  }));
  const groups = scenario.azure?.management_groups ? {management_groups: [SIM_ROOT_GROUP]} : {};
  const azure = sim.arm ? [{types: ['aks'], subscriptions: ['*'], ...groups, resource_groups: ['*'], regions: ['*'], tags: {'*': '*'}, resource_manager_endpoint: sim.arm.url}] : [];
  return {
    scenario: scenario.name,
    control_url: ctx.controlUrl,
    env,
    ...(ctx.caFile ? {ca_file: ctx.caFile} : {}),
    matchers: {aws, azure},
    clusters: {total: sim.world.size, expected: sim.world.expectedKeys().size},
    ...(sim.aws ? {aws: {endpoint: sim.aws.url, accounts: ctx.accounts, regions, failing_regions: scenario.aws?.fail_regions ?? []}} : {}),
    ...(sim.arm ? {azure: {endpoint: sim.arm.url, subscriptions: ctx.subscriptions, failing_subscriptions: sim.world.failingSubscriptions()}} : {}),
    kube_servers: sim.kube?.servers.length ?? 0,
  };
}

/** A complete service config reaching the simulator (YAML), for the demo and the bench's driver. */
export function serviceConfig(
  description: SimDescription,
  options: {group: string; pollInterval: string; storage: Record<string, unknown>; listenAddr?: string; log?: {level: string; format: string}; probe?: boolean; discovery?: Record<string, unknown>},
): string {
  const doc = {
    version: 'v1',
    discovery_service: {
      discovery_group: options.group,
      poll_interval: options.pollInterval,
      aws: description.matchers.aws,
      azure: description.matchers.azure,
      // Extra discovery_service keys (bench --discovery), e.g. refresh_interval: 0s to describe every cycle.
      ...options.discovery,
    },
    kubernetes_service: {labels: {'simulated': 'true'}},
    ...(options.probe === false ? {probe: {enabled: false}} : {}),
    storage: options.storage,
    ...(options.listenAddr ? {http: {listen_addr: options.listenAddr}} : {}),
    log: options.log ?? {level: 'info', format: 'json'},
  };
  // JSON is YAML: no quoting surprises for keys like "*".
  return `${JSON.stringify(doc, null, 2)}\n`;
}

const EARLY_WINDOW_MS = 2000;

function collectStats(aws: FakeAws | undefined, arm: FakeArm | undefined): SimStats {
  const awsOps: Record<string, {calls: number; throttled: number; errors: number}> = {};
  let awsThrottled = 0;
  for (const call of aws?.stats.calls ?? []) {
    const op = (awsOps[`${call.service}:${call.operation}`] ??= {calls: 0, throttled: 0, errors: 0});
    op.calls++;
    if (call.code && /throttl/i.test(call.code)) {
      op.throttled++;
      awsThrottled++;
    } else if (call.status >= 400 || call.status === 0) {
      op.errors++;
    }
  }
  const armOps: Record<string, {calls: number; throttled: number; errors: number}> = {};
  let armThrottled = 0;
  for (const r of arm?.stats.requests ?? []) {
    const op = (armOps[r.operation] ??= {calls: 0, throttled: 0, errors: 0});
    op.calls++;
    if (r.status === 429) {
      op.throttled++;
      armThrottled++;
    } else if (r.status >= 400 || r.status === 0) {
      op.errors++;
    }
  }
  const calls = aws?.stats.calls ?? [];
  const first = calls[0]?.startedAt ?? 0;
  const early = calls.filter((c) => c.startedAt - first < EARLY_WINDOW_MS);
  return {
    aws: awsOps,
    aws_calls: calls.length,
    aws_throttled: awsThrottled,
    arm: armOps,
    arm_calls: arm?.stats.requests.length ?? 0,
    arm_throttled: armThrottled,
    describe_max_in_flight: aws?.stats.maxInFlight({operation: 'DescribeCluster'}) ?? 0,
    aws_early_throttled_share: early.length === 0 ? 0 : early.filter((c) => c.code !== undefined && /throttl/i.test(c.code)).length / early.length,
  };
}

function verify(expected: Set<string>, foundKeys: Iterable<string>): SimVerdict {
  const found = new Set(foundKeys);
  const missing = [...expected].filter((k) => !found.has(k));
  const unexpected = [...found].filter((k) => !expected.has(k)).length;
  return {expected: expected.size, found: found.size, missing: missing.length, unexpected, missing_sample: missing.slice(0, 5)};
}

async function startControl(sim: Simulator, port: number): Promise<{url: string; close: () => Promise<void>}> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const reply = (status: number, body: unknown): void => {
      res.writeHead(status, {'content-type': 'application/json'});
      res.end(`${JSON.stringify(body)}\n`);
    };
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const route = `${req.method} ${url.pathname}`;
      try {
        switch (route) {
          case 'GET /': return reply(200, sim.description);
          case 'GET /stats': return reply(200, sim.stats());
          case 'POST /stats/reset': sim.resetStats(); return reply(200, {reset: true});
          case 'POST /churn': {
            const p = url.searchParams.get('percent');
            return reply(200, sim.churn(p === null ? undefined : Number(p)));
          }
          case 'POST /limits/refill': sim.refillLimits(); return reply(200, {refilled: true});
          case 'POST /verify': {
            const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as {keys?: unknown};
            if (!Array.isArray(body.keys)) return reply(400, {error: 'expected a JSON body {"keys": [...]}'});
            return reply(200, sim.verify(body.keys.map(String)));
          }
          default:
            return reply(404, {error: `no route ${route}; known: GET /, GET /stats, POST /stats/reset, POST /churn, POST /limits/refill, POST /verify`});
        }
      } catch (error) {
        return reply(500, {error: (error as Error).message});
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Arguments after a leading `--`: npm scripts pass one so Node itself does not read `--env-file` (it scans the whole command line for it). */
export function scriptArgs(argv: readonly string[]): string[] {
  return argv[0] === '--' ? argv.slice(1) : [...argv];
}

async function main(argv: readonly string[]): Promise<void> {
  const {values} = parseArgs({
    args: scriptArgs(argv),
    options: {scenario: {type: 'string', short: 's'}, 'env-file': {type: 'string'}, 'control-port': {type: 'string'}},
    strict: true,
  });
  if (!values.scenario) throw new Error('usage: node bench/sim.ts --scenario FILE [--env-file FILE] [--control-port N]; expected --scenario, got none');
  const scenario = await loadScenario(values.scenario);
  const sim = await startSimulator(scenario, values['control-port'] ? {controlPort: Number(values['control-port'])} : {});
  const text = JSON.stringify(sim.description, null, 2);
  if (values['env-file']) await writeFile(values['env-file'], `${text}\n`, {mode: 0o600});
  process.stdout.write(`${text}\n`);
  process.stderr.write(`simulator "${scenario.name}" running: ${sim.description.clusters.total} clusters; control API ${sim.description.control_url}; Ctrl-C stops it\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await sim.close();
}

if (import.meta.main) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`sim: ${(error as Error).message}\n`);
    process.exitCode = 1;
  });
}
