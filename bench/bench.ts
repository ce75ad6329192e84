/**
 * `npm run bench`: runs each workload's scenario in the simulator (in this process) and measures,
 * in separate processes, the service's cycle and the SDK floor against it; then keepalive cost
 * per backend, token rates and /v1/watch watcher memory; optionally the Backstage peer. Prints
 * one JSON report on stdout (a summary table on stderr) and writes it to
 * bench/results/<timestamp>.json, with the README's Markdown table next to it (.md).
 *
 *   npm run bench [-- --workloads W0,W1,W2,W3] [--cycles 6] [--peers] [--profile] [--cold-runs 3]
 *                 [--keepalive-sizes 10,1000,10000] [--backends sqlite,etcd] [--skip keepalive,tokens,watchers]
 *                 [--node-args="--max-semi-space-size=4"] [--env AWS_RETRY_MODE=standard] [--no-write]
 *
 * The service and the SDK floor run with the Node flags the service ships with (`npm start`, the
 * image) unless `--node-args` names others (`--node-args=""`: none); the peer runs with its own defaults.
 *                 [--discovery '{"refresh_interval":"0s"}']
 *   npm run bench -- --markdown bench/results/<timestamp>.json   (reprints a saved run's README table)
 */
import {copyFile, mkdir, mkdtemp, readFile, readdir, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {parseConfig} from '../src/config/load.ts';
import {cycleBounds} from './bounds.ts';
import {runChild} from './child.ts';
import {shippedRuntime} from './memory.ts';
import type {DriverCycle, DriverRequest, DriverResult} from './cycle-driver.ts';
import type {KeepaliveResult, KeepaliveSkipped} from './keepalive.ts';
import {installPeers, runPeer, type PeerInstall} from './peers/peers.ts';
import {summarizeProfile, type ProfileSummary} from './profile.ts';
import {formatMarkdown, formatSummary, judgeTargets, workloadReport, type BenchReport, type WorkloadReport} from './report.ts';
import {loadScenario, type Scenario} from './scenario.ts';
import {scriptArgs, serviceConfig, startSimulator} from './sim.ts';
import type {TokenRate} from './token-rate.ts';
import {measureWatchers, type WatchersReport} from './watchers.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
/**
 * Workloads judged against the peer's cycle wall (W0): their first cycle is measured `coldRuns`
 * times, and a further run describes every cluster every cycle, as the peer does.
 */
const PEER_JUDGED = new Set(['W0']);
const HERE = import.meta.dirname;

/** Options of one bench run. */
export interface BenchOptions {
  /** Workload names (`W0`: bench/scenarios/w0.json|yaml) or scenario file paths. */
  readonly workloads: readonly string[];
  readonly cycles: number;
  readonly peers?: boolean;
  /** Where the peers are installed; default .tmp/peers in the repository (git-ignored). */
  readonly peersDir?: string;
  readonly profile?: boolean;
  /** How many fresh processes measure the first cycle of a workload judged on it (W0); default 3. */
  readonly coldRuns?: number;
  /** Extra Node flags for the measured processes (e.g. `--max-semi-space-size=4`), to try what moves a target. */
  readonly nodeArgs?: readonly string[];
  /** Extra environment for the measured processes (e.g. `AWS_RETRY_MODE=standard`). */
  readonly env?: Readonly<Record<string, string>>;
  readonly keepalive?: {readonly sizes: readonly number[]; readonly backends: readonly string[]; readonly rounds?: number} | false;
  readonly tokens?: {readonly cold: number; readonly cached: number} | false;
  /** `/v1/watch` cost (default 200 watchers at 10,000 entries, 2 rounds); false skips it. */
  readonly watchers?: {readonly entries: number; readonly watchers: number; readonly rounds: number} | false;
  /** Extra `discovery_service` keys for the service under test (`--discovery '{"refresh_interval":"0s"}'`). */
  readonly discovery?: Record<string, unknown>;
  /** Directory for the JSON report; undefined writes none. */
  readonly resultsDir?: string;
  readonly log?: (line: string) => void;
}

/** Finds a workload's scenario file: a path, or `bench/scenarios/<name>.json|yaml|yml`. */
export async function scenarioFile(workload: string): Promise<string> {
  if (/[/\\.]/.test(workload)) return path.resolve(workload);
  const dir = path.join(HERE, 'scenarios');
  const files = await readdir(dir);
  const match = files.find((f) => f.replace(/\.(json|ya?ml)$/, '').toLowerCase() === workload.toLowerCase());
  if (!match) throw new Error(`no scenario for workload ${workload}: expected ${dir}/${workload.toLowerCase()}.json or .yaml; found ${files.join(', ')}`);
  return path.join(dir, match);
}

async function profileOf(dir: string, keepAs: string): Promise<ProfileSummary | undefined> {
  const file = (await readdir(dir).catch(() => [] as string[])).find((f) => f.endsWith('.cpuprofile'));
  if (!file) return undefined;
  // Kept for a closer look (e.g. in Chrome DevTools); the workload's scratch folder is removed.
  await copyFile(path.join(dir, file), keepAs);
  return {...(await summarizeProfile(path.join(dir, file), ROOT)), file: keepAs};
}

async function runWorkload(scenario: Scenario, options: BenchOptions, peers: PeerInstall | undefined, log: (l: string) => void): Promise<{report: WorkloadReport; concurrency: {sources: number; per_region: number}}> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `kd-bench-${scenario.name}-`));
  const sim = await startSimulator(scenario, {dir});
  try {
    log(`${scenario.name}: ${sim.description.clusters.total} clusters (${sim.description.clusters.expected} discoverable)`);
    const configFile = path.join(dir, 'config.yaml');
    const configText = (registry: string, discovery: Record<string, unknown> = {}): string => serviceConfig(sim.description, {
      group: 'bench',
      pollInterval: '1h',
      storage: {type: 'sqlite', path: path.join(dir, registry)},
      log: {level: 'warn', format: 'json'},
      probe: false,
      discovery: {...scenario.service?.discovery, ...options.discovery, ...discovery},
    });
    const text = configText('registry.db');
    await writeFile(configFile, text);
    const config = parseConfig(text, configFile);
    const concurrency = config.discovery_service.concurrency;
    const request = (mode: DriverRequest['mode']): DriverRequest => ({
      mode,
      config: configFile,
      cycles: options.cycles,
      controlUrl: sim.description.control_url,
      ...(scenario.churn ? {churnPercent: scenario.churn.percent} : {}),
    });
    const driver = path.join(HERE, 'cycle-driver.ts');
    const env = {...sim.description.env, ...options.env};
    log(`${scenario.name}: SDK floor`);
    const nodeArgs = options.nodeArgs ?? [];
    const floor = await runChild<DriverResult>(driver, request('floor'), {env, nodeArgs, onProgress: (l) => log(`  ${l}`)});
    if (!floor.ok) throw new Error(`${scenario.name}: the SDK floor run failed: ${floor.reason}`);
    log(`${scenario.name}: service`);
    const profileDir = path.join(dir, 'profile');
    const service = await runChild<DriverResult>(driver, request('service'), {env, nodeArgs: [...nodeArgs, ...(options.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])], onProgress: (l) => log(`  ${l}`)});
    if (!service.ok) throw new Error(`${scenario.name}: the service run failed: ${service.reason}`);
    const peer = peers && ['W0', 'W3'].includes(scenario.name)
      ? (log(`${scenario.name}: peer`), await runPeer(peers, sim, {cycles: options.cycles, tokenIterations: 20_000, log}))
      : undefined;
    // W0 is judged on its first cycle, and one first cycle is one sample on a shared machine: the
    // service starts again in fresh processes, each with a new registry (so each run describes and
    // registers everything), and the report judges the median of all first cycles.
    const coldRuns = PEER_JUDGED.has(scenario.name) ? Math.max(1, options.coldRuns ?? 3) : 1;
    const firstCycles: DriverCycle[] = service.result.cycles.slice(0, 1);
    for (let i = 1; i < coldRuns; i++) {
      log(`${scenario.name}: service, first cycle again (${i + 1}/${coldRuns})`);
      const file = path.join(dir, `config-first-${i}.yaml`);
      await writeFile(file, configText(`registry-first-${i}.db`));
      const again = await runChild<DriverResult>(driver, {...request('service'), config: file, cycles: 1}, {env, nodeArgs, onProgress: (l) => log(`  ${l}`)});
      if (!again.ok) throw new Error(`${scenario.name}: the service's first-cycle run ${i + 1} failed: ${again.reason}`);
      firstCycles.push(...again.result.cycles.slice(0, 1));
    }
    // The same work as the peer's cycle, in a warm process: the service's own warm cycles describe
    // only what changed, so this run sets `refresh_interval: 0s` and every cycle describes every
    // cluster (at least 3 cycles, so there are 2 warm ones).
    let fullDescribe: DriverResult | undefined;
    if (PEER_JUDGED.has(scenario.name)) {
      log(`${scenario.name}: service, every cluster described every cycle`);
      const file = path.join(dir, 'config-full-describe.yaml');
      await writeFile(file, configText('registry-full-describe.db', {refresh_interval: '0s'}));
      const full = await runChild<DriverResult>(driver, {...request('service'), config: file, cycles: Math.max(3, options.cycles)}, {env, nodeArgs, onProgress: (l) => log(`  ${l}`)});
      if (!full.ok) throw new Error(`${scenario.name}: the service's run describing every cluster failed: ${full.reason}`);
      fullDescribe = full.result;
    }
    const profile = options.profile ? await profileOf(profileDir, path.join(os.tmpdir(), `kd-bench-${scenario.name}-service.cpuprofile`)) : undefined;
    const report = workloadReport({
      name: scenario.name,
      description: scenario.description ?? '',
      totalClusters: sim.description.clusters.total,
      bounds: cycleBounds(scenario, {sources: concurrency.sources, perRegion: concurrency.per_region}),
      service: service.result,
      firstCycles,
      ...(fullDescribe ? {fullDescribe} : {}),
      floor: floor.result,
      ...(peer ? {peer} : {}),
      ...(profile ? {profile} : {}),
    });
    return {report, concurrency};
  } finally {
    await sim.close();
    await rm(dir, {recursive: true, force: true});
  }
}

/** Runs the whole bench and returns the report (written to `resultsDir` when given). */
export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const startedAt = new Date();
  const started = process.hrtime.bigint();
  let peers: PeerInstall | undefined;
  if (options.peers) {
    peers = await installPeers(options.peersDir ?? path.join(ROOT, '.tmp/peers')).catch((error: unknown) => ({ok: false, reason: `could not prepare the peer folder: ${(error as Error).message}`}) as const);
    if (!peers.ok) log(`peers not available: ${peers.reason}`);
  }
  const workloads: WorkloadReport[] = [];
  let concurrency = {sources: 20, per_region: 10};
  for (const name of options.workloads) {
    const scenario = await loadScenario(await scenarioFile(name));
    const result = await runWorkload(scenario, options, peers, log);
    workloads.push(result.report);
    concurrency = result.concurrency;
  }
  let keepalive: (KeepaliveResult | KeepaliveSkipped)[] = [];
  if (options.keepalive !== false) {
    const k = options.keepalive ?? {sizes: [10, 1000, 10_000], backends: ['sqlite', 'etcd']};
    log(`keepalive: ${k.backends.join(', ')} at ${k.sizes.join(', ')} entries`);
    const outcome = await runChild<(KeepaliveResult | KeepaliveSkipped)[]>(path.join(HERE, 'keepalive.ts'), k, {env: {}, onProgress: log});
    keepalive = outcome.ok ? outcome.result : k.backends.map((backend) => ({backend, skipped: outcome.reason}));
  }
  let tokens: TokenRate | {skipped: string} = {skipped: 'not run (--skip tokens)'};
  if (options.tokens !== false) {
    log('token rate');
    const outcome = await runChild<TokenRate>(path.join(HERE, 'token-rate.ts'), options.tokens ?? {cold: 20_000, cached: 500_000}, {env: {}, onProgress: log});
    tokens = outcome.ok ? outcome.result : {skipped: outcome.reason};
  }
  let watchers: WatchersReport | {skipped: string} = {skipped: 'not run (--skip watchers)'};
  if (options.watchers !== false) {
    const w = options.watchers ?? {entries: 10_000, watchers: 200, rounds: 2};
    log(`watchers: ${w.watchers} at ${w.entries} entries, ${w.rounds} round(s)`);
    watchers = await measureWatchers(w).catch((error: unknown) => ({skipped: `failed: ${(error as Error).message}`}));
  }
  const cpus = os.cpus();
  const report: BenchReport = {
    benchmark: 'kube-discovery',
    started_at: startedAt.toISOString(),
    duration_s: Math.round(Number(process.hrtime.bigint() - started) / 1e8) / 10,
    node: process.version,
    machine: {cpus: cpus.length, cpu_model: cpus[0]?.model ?? 'unknown', memory_gb: Math.round(os.totalmem() / 1e8) / 10},
    settings: {cycles: options.cycles, concurrency},
    workloads,
    keepalive,
    tokens,
    watchers,
    targets: judgeTargets(workloads, keepalive, tokens, watchers),
  };
  if (options.resultsDir) {
    await mkdir(options.resultsDir, {recursive: true});
    const file = path.join(options.resultsDir, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    await writeFile(file.replace(/\.json$/, '.md'), formatMarkdown(report));
    log(`report written to ${path.relative(process.cwd(), file)} (README table: ${path.relative(process.cwd(), file.replace(/\.json$/, '.md'))})`);
  }
  return report;
}

async function main(argv: readonly string[]): Promise<void> {
  const {values} = parseArgs({
    args: scriptArgs(argv),
    options: {
      'workloads': {type: 'string', default: 'W0,W1,W2,W3'},
      'cycles': {type: 'string', default: '6'},
      'peers': {type: 'boolean', default: false},
      'cold-runs': {type: 'string', default: '3'},
      'profile': {type: 'boolean', default: false},
      'keepalive-sizes': {type: 'string', default: '10,1000,10000'},
      'backends': {type: 'string', default: 'sqlite,etcd'},
      'skip': {type: 'string', default: ''},
      'no-write': {type: 'boolean', default: false},
      'node-args': {type: 'string'},
      'env': {type: 'string', multiple: true, default: []},
      'discovery': {type: 'string'},
      'markdown': {type: 'string'},
    },
    strict: true,
  });
  if (values.markdown !== undefined) {
    // Reprints the README table of a saved report (bench/results/<timestamp>.json) without running anything.
    process.stdout.write(formatMarkdown(JSON.parse(await readFile(values.markdown, 'utf8')) as BenchReport));
    return;
  }
  const cycles = Number(values.cycles);
  if (!Number.isInteger(cycles) || cycles < 1) throw new Error(`expected --cycles to be an integer >= 1, got ${values.cycles}`);
  const coldRuns = Number(values['cold-runs']);
  if (!Number.isInteger(coldRuns) || coldRuns < 1) throw new Error(`expected --cold-runs to be an integer >= 1, got ${values['cold-runs']}`);
  // The service as it ships (`npm start`, the image: its flags and environment) unless `--node-args` names flags.
  const runtime = await shippedRuntime(values['node-args']);
  const skip = new Set(values.skip.split(',').filter(Boolean));
  const report = await runBench({
    workloads: values.workloads.split(',').filter(Boolean),
    cycles,
    peers: values.peers,
    profile: values.profile,
    coldRuns,
    nodeArgs: runtime.nodeArgs,
    env: Object.fromEntries([...Object.entries(runtime.env), ...values.env.map((kv) => {
      const i = kv.indexOf('=');
      if (i < 1) throw new Error(`expected --env NAME=VALUE, got ${kv}`);
      return [kv.slice(0, i), kv.slice(i + 1)];
    })]),
    keepalive: skip.has('keepalive') ? false : {sizes: values['keepalive-sizes'].split(',').map(Number), backends: values.backends.split(',').filter(Boolean)},
    tokens: skip.has('tokens') ? false : {cold: 20_000, cached: 500_000},
    watchers: skip.has('watchers') ? false : {entries: 10_000, watchers: 200, rounds: 2},
    ...(values.discovery ? {discovery: JSON.parse(values.discovery) as Record<string, unknown>} : {}),
    ...(values['no-write'] ? {} : {resultsDir: path.join(HERE, 'results')}),
  });
  process.stderr.write(`\n${formatSummary(report)}`);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`bench: ${(error as Error).message}\n`);
      process.exit(1);
    },
  );
}
