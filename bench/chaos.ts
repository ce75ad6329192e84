/**
 * Whole-process chaos run: looks for any way to lose a cluster across real process restarts.
 *
 *   nice -n 10 node bench/chaos.ts [--minutes 30] [--round-seconds 180] [--backends sqlite,etcd] [--seed 1] [--out DIR]
 *
 * A fixed simulated world (EKS + AKS clusters, no churn, no failing region) never changes, so any
 * `delete` a reader sees and any cluster missing from a listing after the first full registration
 * is a loss. Each round starts a fresh backend (one SQLite file both processes open, or a real
 * etcd reached through a cuttable TCP proxy per replica) and two `kube-discovery start` replicas
 * with a short heartbeat TTL, then injects faults at random until the round ends: SIGKILL (also
 * during the first cycle, and for longer than the TTL while the other runs on), SIGTERM, SIGSTOP
 * for a while then SIGCONT, SIGHUP (a cycle now), etcd SIGKILL and restart, the replica's etcd connection cut or held, the cloud answering errors,
 * malformed pages or hanging, and the cloud's connections cut or held. An observer watches
 * `/v1/watch` and polls `/v1/kube_servers` on each replica. At a round's end every fault is
 * healed and both replicas must serve every cluster again.
 *
 * Prints one JSON report (rounds, faults by kind, losses with the faults around them) and writes
 * it, the fault timeline and each replica's logs to --out (default .tmp/chaos-<time>). Exit code 1
 * when a loss was seen. Talks to loopback only.
 */
import {spawn, type ChildProcess} from 'node:child_process';
import {createWriteStream, type WriteStream} from 'node:fs';
import {mkdir, rm, writeFile} from 'node:fs/promises';
import path from 'node:path';
import {parseArgs} from 'node:util';
import type {ArmFault, ArmFaultHook} from '../test/fakes/arm-server.ts';
import type {FaultAction, FaultHook} from '../test/fakes/aws-faults.ts';
import {startEtcd, type TestEtcd} from '../test/helpers/etcd.ts';
import {startTcpProxy, type TcpProxy} from '../test/helpers/tcp-proxy.ts';
import {scenarioSchema} from './scenario.ts';
import {scriptArgs, startSimulator, type Simulator} from './sim.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const CLI = path.join(ROOT, 'src/cli/main.ts');
const GROUP = 'chaos';
/** The shortest TTL the config accepts: expiries happen within a round. */
const TTL_MS = 30_000;

type Backend = 'sqlite' | 'etcd';

/** One injected fault, as the timeline records it. */
interface FaultRecord {
  readonly t: number;
  readonly round: number;
  readonly kind: string;
  readonly target?: string;
  readonly ms?: number;
}

/** One observed loss. */
interface Loss {
  readonly t: number;
  readonly round: number;
  readonly backend: Backend;
  readonly replica: string;
  readonly how: 'watch-delete' | 'missing-from-listing' | 'missing-at-round-end';
  readonly names: readonly string[];
  /** Longest stretch (ms) before the loss in which no replica process was running and un-stopped. */
  readonly longestNoReplicaMs: number;
}

const {values} = parseArgs({
  args: scriptArgs(process.argv.slice(2)),
  options: {
    minutes: {type: 'string', default: '30'},
    'round-seconds': {type: 'string', default: '180'},
    backends: {type: 'string', default: 'sqlite,etcd'},
    seed: {type: 'string', default: String(Date.now() % 100_000)},
    out: {type: 'string'},
  },
  strict: true,
});

// A small seeded generator: a run can be repeated with --seed (the processes' timing still varies).
let seed = Number(values.seed) >>> 0 || 1;
const random = (): number => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let x = seed;
  x = Math.imul(x ^ (x >>> 15), x | 1);
  x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};
const between = (lo: number, hi: number): number => Math.round(lo + random() * (hi - lo));
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const started = Date.now();
const outDir = values.out ?? path.join(ROOT, '.tmp', `chaos-${new Date(started).toISOString().replace(/[:.]/g, '-')}`);
const backends = values.backends.split(',').map((b) => b.trim()) as Backend[];
for (const b of backends) if (b !== 'sqlite' && b !== 'etcd') throw new Error(`--backends: expected sqlite and/or etcd, got ${b}`);

const faults: FaultRecord[] = [];
const losses: Loss[] = [];
let round = 0;
let timeline: WriteStream;
const note = (kind: string, extra: Omit<FaultRecord, 't' | 'round' | 'kind'> = {}): void => {
  const record = {t: Date.now() - started, round, kind, ...extra};
  faults.push(record);
  timeline.write(`${JSON.stringify(record)}\n`);
};

// The cloud's switchable faults: while `cloudFault` is set, that share of requests is spoiled.
let cloudFault: {share: number; aws: FaultAction; arm: ArmFault} | undefined;
const awsFault: FaultHook = () => (cloudFault && random() < cloudFault.share ? cloudFault.aws : undefined);
const armFault: ArmFaultHook = () => (cloudFault && random() < cloudFault.share ? cloudFault.arm : undefined);

/** A replica: its config, and its current process if any. */
class Replica {
  child: ChildProcess | undefined;
  port: number | undefined;
  stopped = false;
  incarnation = 0;
  #log: WriteStream | undefined;
  readonly name: string;
  readonly configFile: string;
  readonly env: NodeJS.ProcessEnv;
  constructor(name: string, configFile: string, env: NodeJS.ProcessEnv) {
    this.name = name;
    this.configFile = configFile;
    this.env = env;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.running) return;
    this.incarnation++;
    this.port = undefined;
    this.stopped = false;
    this.#log = createWriteStream(path.join(outDir, `round${round}-${this.name}.log`), {flags: 'a'});
    this.#log.write(`=== incarnation ${this.incarnation} at ${Date.now() - started} ms\n`);
    const child = spawn(process.execPath, [CLI, 'start', '-c', this.configFile], {cwd: ROOT, env: this.env, stdio: ['ignore', 'pipe', 'pipe']});
    const log = this.#log;
    let tail = '';
    const scan = (c: Buffer): void => {
      log.write(c);
      if (this.port !== undefined) return;
      tail = (tail + c.toString('utf8')).slice(-4000);
      const m = /serving on http:\/\/127\.0\.0\.1:(\d+)/.exec(tail);
      if (m && child === this.child) this.port = Number(m[1]);
    };
    child.stdout.on('data', scan);
    child.stderr.on('data', scan);
    this.child = child;
  }

  signal(sig: NodeJS.Signals): void {
    if (!this.running) return;
    this.child?.kill(sig);
    if (sig === 'SIGSTOP') this.stopped = true;
    if (sig === 'SIGCONT') this.stopped = false;
  }

  /** Resolves when `child` (default: the current process) has exited. */
  async exited(child = this.child): Promise<void> {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise((r) => child.once('exit', r));
  }

  async kill(): Promise<void> {
    if (this.stopped) this.signal('SIGCONT');
    this.signal('SIGKILL');
    await this.exited();
  }
}

/** GET JSON from a replica; undefined when it is down or answers non-200. */
async function getJson<T>(r: Replica, p: string, timeoutMs = 5000): Promise<T | undefined> {
  if (r.port === undefined || !r.running || r.stopped) return undefined;
  try {
    const res = await fetch(`http://127.0.0.1:${r.port}${p}`, {signal: AbortSignal.timeout(timeoutMs)});
    if (res.status !== 200) {
      await res.body?.cancel();
      return undefined;
    }
    return (await res.json()) as T;
  } catch {
    return undefined;
  }
}

/** Every name the replica serves (following pages), or undefined when any page failed. */
async function listNames(r: Replica): Promise<Set<string> | undefined> {
  const names = new Set<string>();
  let token: string | undefined;
  for (;;) {
    const page = await getJson<{items: {metadata: {name: string}}[]; next_page_token?: string}>(r, `/v1/kube_servers?limit=1000${token ? `&next_page_token=${encodeURIComponent(token)}` : ''}`);
    if (!page) return undefined;
    for (const s of page.items) names.add(s.metadata.name);
    if (!page.next_page_token) return names;
    token = page.next_page_token;
  }
}

/** Watches one replica's /v1/watch for as long as `active()`, reconnecting; calls onDelete per delete event. */
async function watchLoop(r: Replica, active: () => boolean, onDelete: (name: string) => void): Promise<void> {
  while (active()) {
    if (r.port === undefined || !r.running) {
      await sleep(500);
      continue;
    }
    const controller = new AbortController();
    const stopper = setInterval(() => {
      if (!active() || !r.running) controller.abort();
    }, 500);
    try {
      const res = await fetch(`http://127.0.0.1:${r.port}/v1/watch`, {signal: controller.signal});
      if (res.status !== 200 || !res.body) {
        await res.body?.cancel();
        await sleep(1000);
        continue;
      }
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, {stream: true});
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(frame)?.[1];
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (event === 'delete' && data) onDelete((JSON.parse(data) as {name: string}).name);
        }
      }
    } catch {
      // The replica went away or the watch was aborted: reconnect.
    } finally {
      clearInterval(stopper);
    }
    await sleep(500);
  }
}

/** Time (ms) since the last moment a replica process was running and not stopped; tracked by sampling. */
class Liveness {
  #lastLive = Date.now();
  longest = 0;
  sample(replicas: readonly Replica[]): void {
    const now = Date.now();
    if (replicas.some((r) => r.running && !r.stopped)) this.#lastLive = now;
    this.longest = Math.max(this.longest, now - this.#lastLive);
  }
  get currentGap(): number {
    return Date.now() - this.#lastLive;
  }
}

async function runRound(sim: Simulator, backend: Backend, seconds: number): Promise<{faults: number}> {
  round++;
  const dir = path.join(outDir, `round${round}`);
  await mkdir(dir, {recursive: true});
  const d = sim.description;
  let etcd: TestEtcd | undefined;
  const etcdProxies: TcpProxy[] = [];
  const closers: (() => Promise<void>)[] = [];
  // Each replica reaches AWS through its own proxy, so one can be cut off while the other is not.
  // ARM is reached directly: its pages link back to its own address, which a proxy would not be;
  // ARM's connection faults come from the fault hook (reset, hang) instead.
  const cloudProxies: TcpProxy[] = [];
  const replicas: Replica[] = [];
  for (const name of ['r1', 'r2']) {
    const aws = await startTcpProxy(d.aws?.endpoint ?? '');
    closers.push(() => aws.close());
    cloudProxies.push(aws);
    let storage: Record<string, unknown>;
    if (backend === 'etcd') {
      etcd ??= await startEtcd();
      const proxy = await startTcpProxy(etcd.endpoint);
      etcdProxies.push(proxy);
      closers.push(() => proxy.close());
      storage = {type: 'etcd', endpoints: [proxy.endpoint], session_ttl: '5s'};
    } else {
      storage = {type: 'sqlite', path: path.join(dir, 'registry.db')};
    }
    const env: NodeJS.ProcessEnv = {PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', KUBE_DISCOVERY_REPLICA: name};
    for (const [k, v] of Object.entries(d.env)) env[k] = d.aws && v === d.aws.endpoint ? aws.endpoint : v;
    const config = {
      version: 'v1',
      discovery_service: {
        discovery_group: GROUP,
        poll_interval: '10s',
        request_timeout: '3s',
        cycle_timeout: '9s',
        aws: d.matchers.aws,
        azure: d.matchers.azure,
      },
      probe: {enabled: false},
      heartbeat: {ttl: `${TTL_MS / 1000}s`},
      storage,
      http: {listen_addr: '127.0.0.1:0'},
      log: {level: 'info', format: 'json'},
    };
    const configFile = path.join(dir, `${name}.yaml`);
    await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
    replicas.push(new Replica(name, configFile, env));
  }
  const [r1, r2] = replicas as [Replica, Replica];
  const liveness = new Liveness();
  let baseline: Set<string> | undefined;
  // A replica is held to the baseline once it served it: until then it serves what the registry held
  // when it opened (a SQLite file opened empty next to the other process's first cycle), no loss.
  const served = new Set<string>();
  // The replica kept down for longer than the TTL, if any: the other one is then spared kills and stops.
  let longDown: Replica | undefined;
  let active = true;
  const reported = new Set<string>();
  const loss = (replica: string, how: Loss['how'], names: readonly string[]): void => {
    // One report per (replica, how, name set) keeps a lasting gap from flooding the report.
    const key = `${replica}:${how}:${names.slice(0, 20).join(',')}`;
    if (reported.has(key)) return;
    reported.add(key);
    const l: Loss = {t: Date.now() - started, round, backend, replica, how, names: names.slice(0, 20), longestNoReplicaMs: liveness.currentGap > 0 ? liveness.longest : 0};
    losses.push(l);
    timeline.write(`${JSON.stringify({loss: l})}\n`);
    process.stderr.write(`LOSS round ${round} (${backend}) ${replica} ${how}: ${names.length} names, e.g. ${names.slice(0, 3).join(', ')}\n`);
  };

  const watches = replicas.map((r) => watchLoop(r, () => active, (name) => loss(r.name, 'watch-delete', [name])));
  const poller = (async () => {
    while (active) {
      liveness.sample(replicas);
      for (const r of replicas) {
        const names = await listNames(r);
        if (!names) continue;
        if (!baseline && names.size >= d.clusters.expected) {
          baseline = names;
          served.add(r.name);
          note('baseline', {target: r.name, ms: names.size});
        } else if (baseline && !served.has(r.name)) {
          if ([...baseline].every((n) => names.has(n))) served.add(r.name);
        } else if (baseline) {
          const missing = [...baseline].filter((n) => !names.has(n));
          if (missing.length > 0) loss(r.name, 'missing-from-listing', missing);
        }
      }
      await sleep(1000);
    }
  })();

  r1.start();
  r2.start();
  note('start', {target: `${backend}`});
  // Faults begin before the first full registration on purpose: the first cycle is the riskiest.
  const end = Date.now() + seconds * 1000;
  const pending: Promise<unknown>[] = [];
  let count = 0;
  const later = (ms: number, fn: () => unknown): void => {
    pending.push(sleep(ms).then(fn));
  };
  const other = (r: Replica): Replica => (r === r1 ? r2 : r1);
  while (Date.now() < end) {
    await sleep(between(1500, 7000));
    liveness.sample(replicas);
    const r = pick(replicas);
    const kinds = ['kill9', 'kill9', 'kill9-past-ttl', 'sigterm', 'sigstop', 'sighup', 'kill-first-cycle', 'cloud-errors', 'cloud-malformed', 'cloud-hang', 'cloud-cut', 'cloud-hold'];
    if (backend === 'etcd') kinds.push('etcd-kill', 'etcd-cut', 'etcd-hold', 'etcd-cut');
    let kind = pick(kinds);
    // While one replica is down past the TTL, the other must live: its faults are the harmless kinds.
    if (longDown && (r === other(longDown) || r === longDown) && ['kill9', 'kill9-past-ttl', 'sigterm', 'sigstop', 'kill-first-cycle'].includes(kind)) kind = 'sighup';
    if (kind === 'kill9-past-ttl' && (longDown || !(other(r).running && !other(r).stopped))) kind = 'sighup';
    // Keep a replica alive: the loss the run hunts is not "every replica down for longer than the TTL".
    const otherUp = other(r).running && !other(r).stopped;
    count++;
    switch (kind) {
      case 'kill9':
      case 'sigterm': {
        if (!r.running) {
          r.start();
          note('restart', {target: r.name});
          break;
        }
        const downMs = otherUp ? between(0, 15_000) : between(0, 3000);
        note(kind, {target: r.name, ms: downMs});
        if (r.stopped) r.signal('SIGCONT');
        r.signal(kind === 'kill9' ? 'SIGKILL' : 'SIGTERM');
        // Waits for this process, not whichever runs by then (another fault may have restarted it).
        const child = r.child;
        later(downMs, async () => {
          await r.exited(child);
          if (active && !r.running) r.start();
        });
        break;
      }
      case 'kill9-past-ttl': {
        // A process gone for longer than the TTL (a rollout rolled back, a node lost) while the other runs on.
        const downMs = TTL_MS + between(5000, 20_000);
        note(kind, {target: r.name, ms: downMs});
        longDown = r;
        await r.kill();
        later(downMs, () => {
          longDown = undefined;
          if (active && !r.running) r.start();
        });
        break;
      }
      case 'kill-first-cycle': {
        // Restart a replica and kill it again early: within its start, first election or first cycle.
        const after = between(300, 6000);
        note(kind, {target: r.name, ms: after});
        await r.kill();
        r.start();
        const child = r.child;
        later(after, async () => {
          if (r.child !== child) return;
          await r.kill();
          if (active) r.start();
        });
        break;
      }
      case 'sigstop': {
        if (!r.running || r.stopped) break;
        const child = r.child;
        // Longer than the etcd session (5 s) at times, so the other replica takes over while this one is frozen.
        const ms = otherUp ? between(1000, 25_000) : between(500, 4000);
        note(kind, {target: r.name, ms});
        r.signal('SIGSTOP');
        later(ms, () => {
          if (r.child === child) r.signal('SIGCONT');
        });
        break;
      }
      case 'sighup':
        note(kind, {target: r.name});
        r.signal('SIGHUP');
        break;
      case 'cloud-errors':
      case 'cloud-malformed':
      case 'cloud-hang': {
        if (cloudFault) break;
        const ms = between(2000, 25_000);
        const share = pick([0.1, 0.5, 1]);
        note(kind, {ms, target: `share ${share}`});
        cloudFault =
          kind === 'cloud-errors'
            ? {share, aws: pick<FaultAction>([{code: 'InternalFailure', status: 500}, {code: 'ThrottlingException'}, {code: 'AccessDeniedException'}]), arm: pick<ArmFault>([{status: 500}, {status: 429, retryAfterSeconds: 1}, {status: 403}, {reset: true}])}
            : kind === 'cloud-malformed'
              ? {share, aws: pick<FaultAction>([{malformed: 'invalid-json'}, {malformed: 'missing-fields'}]), arm: {malformed: true}}
              : {share, aws: {hang: true}, arm: {hang: true}};
        later(ms, () => {
          cloudFault = undefined;
        });
        break;
      }
      case 'cloud-cut':
      case 'cloud-hold': {
        const p = cloudProxies[replicas.indexOf(r)];
        if (!p) break;
        const ms = between(1000, 20_000);
        note(kind, {target: r.name, ms});
        if (kind === 'cloud-cut') p.cut();
        else p.hold();
        later(ms, () => {
          p.restore();
          p.release();
        });
        break;
      }
      case 'etcd-kill': {
        if (!etcd) break;
        const ms = between(0, 12_000);
        note(kind, {ms});
        etcd.kill();
        const e = etcd;
        later(ms, () => e.restart().catch((error: unknown) => note('etcd-restart-failed', {target: String(error)})));
        break;
      }
      case 'etcd-cut':
      case 'etcd-hold': {
        const p = etcdProxies[replicas.indexOf(r)];
        if (!p) break;
        const ms = between(1000, 15_000);
        note(kind, {target: r.name, ms});
        if (kind === 'etcd-cut') p.cut();
        else p.hold();
        later(ms, () => {
          p.restore();
          p.release();
        });
        break;
      }
    }
  }

  // Heal: let the pending faults finish, make sure both replicas run, then check the inventory.
  // A fault's undo may wait for a process that another fault already replaced; a minute bounds it.
  await Promise.race([Promise.all(pending), sleep(60_000)]);
  cloudFault = undefined;
  for (const p of [...cloudProxies, ...etcdProxies]) {
    p.restore();
    p.release();
  }
  for (const r of replicas) {
    if (r.stopped) r.signal('SIGCONT');
    if (!r.running) r.start();
  }
  note('healed');
  // Two poll intervals plus a TTL: time for a leader to settle, run cycles and re-put what lapsed.
  const settleUntil = Date.now() + 2 * 10_000 + TTL_MS;
  let finalOk = false;
  while (Date.now() < settleUntil) {
    await sleep(2000);
    const lists = await Promise.all(replicas.map((r) => listNames(r)));
    if (baseline && lists.every((l) => l && [...(baseline ?? [])].every((n) => l.has(n)))) {
      finalOk = true;
      break;
    }
  }
  if (!finalOk) {
    const lists = await Promise.all(replicas.map((r) => listNames(r)));
    replicas.forEach((r, i) => {
      const l = lists[i];
      if (!baseline) loss(r.name, 'missing-at-round-end', ['(never fully registered)']);
      else if (!l) loss(r.name, 'missing-at-round-end', ['(replica not answering)']);
      else {
        const missing = [...baseline].filter((n) => !l.has(n));
        if (missing.length > 0) loss(r.name, 'missing-at-round-end', missing);
      }
    });
  }
  active = false;
  for (const r of replicas) {
    if (r.stopped) r.signal('SIGCONT');
    r.signal('SIGTERM');
  }
  await Promise.all(replicas.map((r) => Promise.race([r.exited(), sleep(10_000).then(() => r.kill())])));
  await Promise.all([...watches, poller]);
  for (const close of closers) await close().catch(() => undefined);
  await etcd?.stop();
  if (finalOk && losses.every((l) => l.round !== round)) await rm(path.join(dir, 'registry.db'), {force: true});
  return {faults: count};
}

async function main(): Promise<void> {
  await mkdir(outDir, {recursive: true});
  timeline = createWriteStream(path.join(outDir, 'timeline.jsonl'));
  const scenario = scenarioSchema.parse({
    name: 'chaos',
    description: 'A fixed world: 150 EKS clusters (2 accounts, 3 regions) and 150 AKS clusters (2 subscriptions), no churn, no failures of its own.',
    seed: 19,
    aws: {accounts: 2, regions: ['us-east-1', 'us-west-2', 'eu-west-1'], clusters_per_region: 25, page_size: 10, latency_ms: 5},
    azure: {subscriptions: 2, resource_groups_per_subscription: 3, clusters_per_resource_group: 25, locations: ['eastus', 'westeurope'], page_size: 20, latency_ms: 5},
  });
  const sim = await startSimulator(scenario, {dir: outDir, faults: {aws: awsFault, arm: armFault}});
  const deadline = started + Number(values.minutes) * 60_000;
  const roundSeconds = Number(values['round-seconds']);
  const perRound: {round: number; backend: Backend; faults: number; losses: number}[] = [];
  try {
    let i = 0;
    // A round needs its fault time plus about a minute to heal, settle and stop.
    while (Date.now() + (roundSeconds + 70) * 1000 < deadline || i === 0) {
      const backend = backends[i % backends.length] as Backend;
      i++;
      process.stderr.write(`round ${round + 1}: ${backend}, ${roundSeconds} s of faults\n`);
      const {faults: n} = await runRound(sim, backend, roundSeconds);
      perRound.push({round, backend, faults: n, losses: losses.filter((l) => l.round === round).length});
    }
  } finally {
    await sim.close();
  }
  const byKind: Record<string, number> = {};
  for (const f of faults) byKind[f.kind] = (byKind[f.kind] ?? 0) + 1;
  const report = {
    seed: Number(values.seed),
    minutes: Math.round((Date.now() - started) / 600) / 100,
    clusters: sim.description.clusters.expected,
    ttl_ms: TTL_MS,
    rounds: perRound,
    faults_by_kind: byKind,
    losses,
    out: outDir,
  };
  const text = JSON.stringify(report, null, 2);
  await writeFile(path.join(outDir, 'report.json'), `${text}\n`);
  timeline.end();
  process.stdout.write(`${text}\n`);
  process.exitCode = losses.length > 0 ? 1 : 0;
}

await main();
