/**
 * `npm run bench:memory`: the service alone (SQLite registry, real cycles against the
 * simulator) at several sizes, run with exactly the Node flags `npm start` and the image use
 * (read from package.json), reporting peak RSS and the live heap after a cycle per size — the
 * sizing table of the README.
 *
 * Like the image (deploy/Dockerfile), the measured process runs on a warm Node compile cache
 * (NODE_COMPILE_CACHE, warmed by a small run with the same flags first), so it never loads
 * Node's TypeScript stripper; `--cold` measures without it (what a first `npm start` costs).
 *
 *   npm run bench:memory [-- --sizes 10000,50000] [--cycles 3] [--cold] [--node-args=...]
 */
import {readFile, rm, writeFile, mkdtemp} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {parseArgs} from 'node:util';
import {runChild} from './child.ts';
import type {DriverRequest, DriverResult} from './cycle-driver.ts';
import {loadScenario} from './scenario.ts';
import {serviceConfig, startSimulator} from './sim.ts';

const HERE = import.meta.dirname;

/** The Node flags of `npm start` (package.json), which deploy/Dockerfile repeats. */
export async function shippedNodeFlags(): Promise<string[]> {
  const pkg = JSON.parse(await readFile(path.join(HERE, '..', 'package.json'), 'utf8')) as {scripts: Record<string, string>};
  const start = pkg.scripts['start'] ?? '';
  return start.split(/\s+/).filter((word) => word.startsWith('--') && word.includes('='));
}

/**
 * The environment `npm start` sets before `node` (`NAME=value` words; the image's `ENV` says the
 * same, test/deploy/dockerfile.test.ts): glibc's allocator settings, which move RSS as much as a
 * Node flag does.
 */
export async function shippedEnv(): Promise<Record<string, string>> {
  const pkg = JSON.parse(await readFile(path.join(HERE, '..', 'package.json'), 'utf8')) as {scripts: Record<string, string>};
  const words = (pkg.scripts['start'] ?? '').split(/\s+/);
  const node = words.indexOf('node');
  return Object.fromEntries(words.slice(0, Math.max(0, node)).map((w) => /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(w)).filter((m) => m !== null).map((m) => [m[1] as string, m[2] as string]));
}

/** The flags and environment the service ships with, or only the flags `--node-args` gives (no environment then). */
export async function shippedRuntime(nodeArgsOption: string | undefined): Promise<{nodeArgs: string[]; env: Record<string, string>}> {
  if (nodeArgsOption !== undefined) return {nodeArgs: nodeArgsOption.split(/\s+/).filter(Boolean), env: {}};
  return {nodeArgs: await shippedNodeFlags(), env: await shippedEnv()};
}

/** One size's figures. */
export interface MemoryRow {
  readonly clusters: number;
  readonly peak_rss_mb: number;
  /** Live heap after the last cycle (full GC, service running, report dropped). */
  readonly heap_after_gc_mb: number | null;
  readonly cycle_wall_ms: readonly number[];
  readonly registered: number;
}

async function measure(clusters: number, cycles: number, nodeArgs: readonly string[], compileCache: string | undefined, runtimeEnv: Readonly<Record<string, string>> = {}): Promise<MemoryRow> {
  const regions = 20;
  const scenario = await loadScenario(
    await writeScenario({name: `M${clusters}`, seed: 7, aws: {accounts: 1, regions, clusters_per_region: Math.ceil(clusters / regions), page_size: 100, latency_ms: 20}}),
  );
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-memory-'));
  const sim = await startSimulator(scenario, {dir});
  try {
    const configFile = path.join(dir, 'config.yaml');
    await writeFile(
      configFile,
      serviceConfig(sim.description, {group: 'bench', pollInterval: '1h', storage: {type: 'sqlite', path: path.join(dir, 'registry.db')}, log: {level: 'warn', format: 'json'}, probe: false}),
    );
    const request: DriverRequest = {mode: 'service', config: configFile, cycles, controlUrl: sim.description.control_url};
    const env = {...runtimeEnv, ...sim.description.env, ...(compileCache ? {NODE_COMPILE_CACHE: compileCache} : {})};
    const out = await runChild<DriverResult>(path.join(HERE, 'cycle-driver.ts'), request, {env, nodeArgs, onProgress: (l) => process.stderr.write(`  ${l}\n`)});
    if (!out.ok) throw new Error(out.reason);
    const r = out.result;
    return {
      clusters: sim.description.clusters.total,
      peak_rss_mb: Math.round(r.maxRssKb / 102.4) / 10,
      heap_after_gc_mb: r.liveAfterCycleMb?.['heapUsed'] ?? null,
      cycle_wall_ms: r.cycles.map((c) => Math.round(c.wallMs)),
      registered: r.cycles.at(-1)?.verdict.found ?? 0,
    };
  } finally {
    await sim.close();
    await rm(dir, {recursive: true, force: true});
  }
}

async function writeScenario(scenario: unknown): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-memory-scenario-'));
  const file = path.join(dir, 'scenario.json');
  await writeFile(file, JSON.stringify(scenario));
  return file;
}

if (import.meta.main) {
  const {values} = parseArgs({
    args: process.argv.slice(2).filter((a) => a !== '--'),
    options: {sizes: {type: 'string', default: '10000'}, cycles: {type: 'string', default: '3'}, 'node-args': {type: 'string'}, cold: {type: 'boolean', default: false}},
  });
  const {nodeArgs, env: runtimeEnv} = await shippedRuntime(values['node-args']);
  // The cache is keyed by Node version and flags: a run with the same flags fills it for the measured ones.
  const compileCache = values.cold ? undefined : path.join(os.tmpdir(), 'kube-discovery-bench-compile-cache');
  if (compileCache) {
    process.stderr.write(`memory: warming the compile cache (${compileCache})\n`);
    await measure(20, 1, nodeArgs, compileCache, runtimeEnv);
  }
  const rows: MemoryRow[] = [];
  for (const size of values.sizes.split(',').map(Number)) {
    process.stderr.write(`memory: ${size} clusters, ${Object.entries(runtimeEnv).map(([k, v]) => `${k}=${v} `).join('')}node ${nodeArgs.join(' ') || '(no flags)'}${compileCache ? ', warm compile cache' : ', cold (no compile cache)'}\n`);
    const row = await measure(size, Number(values.cycles), nodeArgs, compileCache, runtimeEnv);
    process.stderr.write(`  peak RSS ${row.peak_rss_mb} MB, heap after GC ${row.heap_after_gc_mb} MB, cycles ${row.cycle_wall_ms.join(' / ')} ms, ${row.registered} registered\n`);
    rows.push(row);
  }
  process.stdout.write(`${JSON.stringify({node_args: nodeArgs, env: runtimeEnv, compile_cache: compileCache !== undefined, rows}, null, 2)}\n`);
}
