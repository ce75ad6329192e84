// `npm run demo` end to end on a small scenario: the real service against the simulator, the
// kubeconfig the demo writes with `kube-discovery kubeconfig`, and the real kubectl reaching
// one cluster of every kind of context (EKS, AKS with Entra ID, AKS with local accounts) with
// nothing but PATH and HOME in its environment. Then the demo is stopped every way it can end
// (SIGTERM, SIGINT, SIGHUP, its parent dying) and no process of it may be left.
import {execFile, spawn, type ChildProcess} from 'node:child_process';
import {mkdtemp, readdir, readFile, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {parse} from 'yaml';

const execFileAsync = promisify(execFile);
const DEMO = path.resolve(import.meta.dirname, '../../bench/demo.ts');
// Generous: the first cycle runs on a machine other test files keep busy.
const READY_MS = 150_000;

// Seed 2 gives both Entra ID and local-account AKS clusters.
const SCENARIO = {
  name: 'demo-test',
  seed: 2,
  aws: {accounts: 1, regions: ['us-east-1'], clusters_per_region: 2},
  azure: {subscriptions: 1, clusters_per_resource_group: 4, locations: ['eastus'], aad_share: 0.5},
  kube: {servers: 2},
};

let dir: string;
let scenarioFile: string;
let kubectl = false;
const started: ChildProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kd-demo-'));
  scenarioFile = path.join(dir, 'scenario.json');
  await writeFile(scenarioFile, JSON.stringify(SCENARIO));
  kubectl = await execFileAsync('kubectl', ['version', '--client']).then(() => true, () => false);
});

afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  if (dir) await rm(dir, {recursive: true, force: true});
});

interface Demo {
  readonly child: ChildProcess;
  readonly data: string;
  output(): string;
  /** Resolves when the output matches `pattern`; rejects when the demo exits first. */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  readonly exited: Promise<number | string>;
}

function startDemo(name: string): Demo {
  const data = path.join(dir, name);
  const child = spawn(process.execPath, [DEMO, '--', '--scenario', scenarioFile, '--port', '0', '--data', data], {
    env: {PATH: process.env['PATH'] ?? '', HOME: dir},
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer): void => {
    out += chunk.toString('utf8');
    for (const l of listeners) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return {
    child,
    data,
    output: () => out,
    exited,
    waitFor(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const m = out.match(pattern);
          if (m) {
            cleanup();
            resolve(m);
          }
          return m !== null;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no ${String(pattern)} from the demo within ${timeoutMs} ms; output:\n${out}`));
        }, timeoutMs);
        const cleanup = (): void => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        if (check()) return;
        listeners.add(check);
        void exited.then(() => {
          if (!check()) {
            cleanup();
            reject(new Error(`the demo exited before ${String(pattern)}; output:\n${out}`));
          }
        });
      });
    },
  };
}

/** Pids of every live descendant of `pid`, from /proc. */
async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z' && fields[1]) parents.set(Number(entry), Number(fields[1]));
  }
  const found: number[] = [];
  const walk = (p: number): void => {
    for (const [child, parent] of parents) {
      if (parent === p) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return found;
}

/** Whether `pid` still runs (a zombie waiting to be reaped does not). */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat !== undefined && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** Resolves once none of `pids` runs; the demo stops its service within a few seconds, the budget is for a loaded machine. */
async function gone(pids: readonly number[], budgetMs = 60_000): Promise<number[]> {
  const deadline = Date.now() + budgetMs;
  for (;;) {
    const left = [];
    for (const pid of pids) if (await alive(pid)) left.push(pid);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('npm run demo', () => {
  it('writes a kubeconfig with which kubectl reaches an EKS, an Entra ID AKS and a local-account AKS cluster; SIGTERM stops everything', async (ctx) => {
    if (!kubectl) {
      if (process.env['CI']) throw new Error('kubectl is required in CI (expected it on PATH)');
      ctx.skip('kubectl is not installed');
    }
    const demo = startDemo('term');
    const banner = await demo.waitFor(/service: +(http:\/\/127\.0\.0\.1:\d+)/, READY_MS);
    const url = banner[1] ?? '';
    expect(demo.output()).toContain(`${url}/v1/kube_servers`);
    expect(demo.output()).toContain(`${url}/v1/watch`);
    expect(demo.output()).toMatch(/kubectl --kubeconfig \S+demo-kubeconfig\.yaml/);
    await demo.waitFor(/kubeconfig: \d+ contexts in \S+; try +kubectl --kubeconfig/, READY_MS);

    // Every entry knows when it was first registered (the AGE of `ls`), also after the probe rewrote its health.
    const listed = (await (await fetch(`${url}/v1/kube_servers?limit=1000`)).json()) as {items: {status?: {discovered_at?: string; target_health?: {status: string}}}[]};
    expect(listed.items.length).toBeGreaterThan(0);
    for (const item of listed.items) expect(Date.parse(item.status?.discovered_at ?? '')).toBeGreaterThan(0);

    const file = path.join(demo.data, 'demo-kubeconfig.yaml');
    const doc = parse(await readFile(file, 'utf8')) as {users: {name: string; user: {exec: {args: string[]}}}[]};
    const kind = (args: string[]): string => (args.includes('eks') ? 'eks' : args.includes('--server-id') ? 'aks-entra' : 'aks-local');
    const byKind = new Map<string, string>();
    for (const u of doc.users) if (!byKind.has(kind(u.user.exec.args))) byKind.set(kind(u.user.exec.args), u.name);
    expect([...byKind.keys()].sort()).toEqual(['aks-entra', 'aks-local', 'eks']);

    for (const [k, context] of byKind) {
      const {stdout} = await execFileAsync('kubectl', ['--kubeconfig', file, '--context', context, 'get', '--raw', '/version'], {
        env: {PATH: process.env['PATH'] ?? '', HOME: dir, KUBECACHEDIR: path.join(dir, 'kube-cache')},
        timeout: 60_000,
      }).catch((error: {stderr?: string}) => {
        throw new Error(`kubectl --context ${context} (${k}) failed: ${error.stderr ?? String(error)}`);
      });
      expect(JSON.parse(stdout), `${k} context ${context}`).toMatchObject({gitVersion: 'v1.31.2'});
    }

    const tree = await descendants(demo.child.pid ?? 0);
    expect(tree.length).toBeGreaterThan(0);
    demo.child.kill('SIGTERM');
    expect(await demo.exited).toBe(0);
    expect(await gone(tree)).toEqual([]);
  }, 400_000);

  it.each(['SIGINT', 'SIGHUP'] as const)('stops the service and the simulator on %s', async (signal) => {
    const demo = startDemo(signal);
    await demo.waitFor(/kubeconfig: \d+ contexts/, READY_MS);
    const tree = await descendants(demo.child.pid ?? 0);
    expect(tree.length).toBeGreaterThan(0);

    demo.child.kill(signal);

    expect(await demo.exited).toBe(0);
    expect(demo.output()).toContain(`${signal}: stopping the service and the simulator`);
    expect(await gone(tree)).toEqual([]);
  }, 300_000);

  it('stops when its parent process dies without a word (kill -9 of npm, a closed terminal emulator)', async () => {
    const parent = spawn(
      process.execPath,
      ['-e', `const c = require('node:child_process').spawn(process.execPath, ${JSON.stringify([DEMO, '--', '--scenario', scenarioFile, '--port', '0', '--data', path.join(dir, 'orphan')])}, {stdio: ['ignore', 'inherit', 'inherit']}); console.log('demo pid ' + c.pid);`],
      {env: {PATH: process.env['PATH'] ?? '', HOME: dir}, stdio: ['ignore', 'pipe', 'pipe']},
    );
    started.push(parent);
    let out = '';
    const seen = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the demo did not get ready; output:\n${out}`)), READY_MS);
      const onData = (chunk: Buffer): void => {
        out += chunk.toString('utf8');
        if (/kubeconfig: \d+ contexts/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      parent.stdout.on('data', onData);
      parent.stderr.on('data', onData);
    });
    await seen;
    const demoPid = Number(/demo pid (\d+)/.exec(out)?.[1]);
    const tree = [demoPid, ...(await descendants(demoPid))];
    expect(tree.length).toBeGreaterThan(1);

    parent.kill('SIGKILL');

    expect(await gone(tree)).toEqual([]);
  }, 300_000);
});
