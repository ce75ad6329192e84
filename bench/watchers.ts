/**
 * `npm run bench:watchers`: what `/v1/watch` clients cost the server. A child process (run with
 * the shipped Node flags) serves an inventory of N entries; this process opens W watchers that
 * read their snapshot and stay connected, while it times `/healthz`; then they leave; twice (two
 * rounds). It reports the child's RSS idle, with the watchers, and after they left (read from
 * /proc, after a full GC), its live memory (V8 heap used + external, after a full GC) idle and
 * after they left, and /healthz latency percentiles and the server's event-loop delay per round.
 * "After they left" is once the server's own memory-reducing collection has run (the service's,
 * src/http/watch-reclaim.ts, a second after the last watcher left); the report gives its pause,
 * and /healthz and the event-loop delay are followed through it.
 *
 *   npm run bench:watchers [-- --entries 10000] [--watchers 200] [--rounds 2] [--cpu-prof DIR]
 */
import {spawn} from 'node:child_process';
import {readFile} from 'node:fs/promises';
import {request} from 'node:http';
import {parseArgs} from 'node:util';
import {monitorEventLoopDelay} from 'node:perf_hooks';
import {Heartbeat} from '../heartbeats/heartbeat.ts';
import {systemClock} from '../src/core/clock.ts';
import {evaluate} from '../src/discovery/evaluate.ts';
import {startHttpServer} from '../src/http/server.ts';
import {exposedMemoryReclaim} from '../src/http/watch-reclaim.ts';
import {Inventory} from '../src/inventory/inventory.ts';
import {MemoryBackend} from '../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../test/discovery/builders.ts';
import {shippedRuntime} from './memory.ts';

async function serve(entries: number): Promise<void> {
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'bench', ttlMs: 3_600_000, hostId: 'h', hostname: 'n', version: 'bench'});
  await heartbeat.start();
  const regions = 20;
  for (let r = 0; r < regions; r++) {
    const region = `region-${r}`;
    const found = Array.from({length: Math.ceil(entries / regions)}, (_, i) =>
      eksCluster(`cluster-${r}-${i}`, region, '111111111111', {tags: {env: i % 3 ? 'prod' : 'dev', team: `team-${i % 17}`, cost_center: `cc-${i % 101}`}}),
    );
    const evaluation = evaluate([okResult(region, '111111111111', found)], context('bench'));
    for (const c of evaluation.candidates.values()) await heartbeat.announce(c.server);
  }
  const inventory = new Inventory({backend, group: 'bench', clock: systemClock});
  await inventory.start();
  // The service's reclaim (its default under --expose-gc), saying when it ran and how long it paused.
  const reclaim = exposedMemoryReclaim();
  const memoryReclaim = reclaim && {
    clock: systemClock,
    run: () => {
      const started = performance.now();
      reclaim();
      process.stdout.write(`RECLAIMED ${performance.now() - started}\n`);
    },
  };
  const server = await startHttpServer({listenAddr: '127.0.0.1:0', inventory, readiness: async () => ({ready: true, status: 'ready'}), status: () => ({}), memoryReclaim: memoryReclaim ?? null});
  globalThis.gc?.();
  process.stdout.write(`URL ${server.url}\n`);
  // GC on request, so "after they left" measures what is still held, not what awaits collection.
  // The server's own event-loop delay while watchers stream: what /healthz waits for, whatever
  // the load of the (shared) machine does to the client processes.
  const delay = monitorEventLoopDelay({resolution: 10});
  process.stdin.on('data', (c: Buffer) => {
    const command = c.toString('utf8').trim();
    if (command === 'eld-start') {
      delay.reset();
      delay.enable();
      process.stdout.write('ELD started\n');
      return;
    }
    if (command === 'eld-stop') {
      delay.disable();
      process.stdout.write(`ELD ${JSON.stringify({p50: delay.percentile(50) / 1e6, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6})}\n`);
      return;
    }
    if (command === 'exit') process.exit(0);
    if (command === 'reclaim') {
      reclaim?.();
      process.stdout.write('RECLAIM done\n');
      return;
    }
    globalThis.gc?.();
    const m = process.memoryUsage();
    const mb = (n: number): number => Math.round(n / 1e5) / 10;
    process.stdout.write(`GC ${JSON.stringify({rss: mb(m.rss), heap_used: mb(m.heapUsed), heap_total: mb(m.heapTotal), external: mb(m.external), array_buffers: mb(m.arrayBuffers)})}\n`);
  });
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 102.4) / 10;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
}

async function healthz(url: string): Promise<number> {
  const started = process.hrtime.bigint();
  await (await fetch(`${url}/healthz`)).text();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** Times /healthz every 20 ms until stdin closes; prints one latency (ms) per line. */
async function probe(url: string): Promise<void> {
  let done = false;
  process.stdin.on('end', () => (done = true));
  process.stdin.resume();
  while (!done) {
    process.stdout.write(`${await healthz(url)}\n`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Opens a watcher that reads everything it is sent; resolves once its snapshot is complete. */
function watcher(url: string): Promise<{close: () => void}> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/watch`, (res) => {
      let tail = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        tail = (tail + chunk).slice(-64);
        if (tail.includes('event: synced')) resolve({close: () => req.destroy()});
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** Memory of the server after a full GC, MB. */
export interface ServerMemory {
  readonly rss: number;
  readonly heap_used: number;
  readonly heap_total: number;
  readonly external: number;
  readonly array_buffers: number;
}

/** One round: the watchers connect, read their snapshots, stay, then leave. */
export interface WatchersRound {
  readonly peak_rss_mb: number;
  readonly connected_rss_mb: number;
  readonly after_they_left_rss_mb: number;
  /** Live memory (V8 heap used + external) after a full GC once they left, MB. */
  readonly after_they_left_live_mb: number;
  /** The server's memory-reducing collection after they left: its pause, ms (null: it did not run within 20 s). */
  readonly reclaim_pause_ms: number | null;
  readonly all_snapshots_ms: number;
  readonly server_event_loop_delay_ms: {readonly p50: number; readonly p99: number; readonly max: number};
  readonly healthz_ms: {readonly samples: number; readonly p50: number; readonly p99: number; readonly max: number};
}

/** What `npm run bench:watchers` prints (and `npm run bench` reports as watcher memory). */
export interface WatchersReport {
  readonly entries: number;
  readonly watchers: number;
  readonly node_args: readonly string[];
  readonly idle: {readonly rss_mb: number; readonly rss_after_reclaim_mb: number; readonly live_mb: number};
  readonly rounds: readonly WatchersRound[];
  /** Highest RSS with the watchers over idle, MB. */
  readonly added_rss_mb: number;
  /** RSS after the first round left / idle RSS. */
  readonly after_vs_idle: number;
  /** The same over idle after the memory-reducing collection (the strictest baseline). */
  readonly after_vs_idle_after_reclaim: number;
  /** RSS after the last round left / after the first: above 1 would be memory growing per round. */
  readonly last_vs_first_round: number;
  /** Live memory after the last round left / idle live memory: what is really still held. */
  readonly live_after_vs_idle: number;
  readonly after_gc_mb: {readonly idle: ServerMemory; readonly after_they_left: ServerMemory};
}

/** A server child (`--serve`) run with the shipped Node flags, and its command channel. */
interface ServerChild {
  readonly pid: number;
  /** Sends one command line (`gc`, `reclaim`, `eld-start`, …). */
  send(command: string): void;
  /** The child's next stdout line starting with `prefix`. */
  line(prefix: string): Promise<string>;
  /** A full GC in the child, then its memory as process.memoryUsage() sees it (MB). */
  gc(): Promise<ServerMemory>;
  /** A graceful exit, so a --cpu-prof profile gets written. */
  exit(): Promise<void>;
}

function startServerChild(entries: number, flags: readonly string[], env: Readonly<Record<string, string>>, profile: readonly string[] = []): ServerChild {
  const child = spawn(process.execPath, ['--expose-gc', ...profile, ...flags, import.meta.filename, '--serve', '--entries', String(entries)], {stdio: ['pipe', 'pipe', 'inherit'], env: {...process.env, ...env}});
  const lines: string[] = [];
  const waiters: (() => void)[] = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (c: string) => {
    lines.push(...c.split('\n').filter(Boolean));
    for (const w of waiters.splice(0)) w();
  });
  const line = async (prefix: string): Promise<string> => {
    for (;;) {
      const i = lines.findIndex((l) => l.startsWith(prefix));
      if (i >= 0) return lines.splice(i, 1)[0] ?? '';
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  return {
    pid: child.pid ?? 0,
    send: (command) => void child.stdin.write(`${command}\n`),
    line,
    gc: async () => {
      child.stdin.write('gc\n');
      return JSON.parse((await line('GC ')).slice(3)) as ServerMemory;
    },
    exit: async () => {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.stdin.write('exit\n');
      const timer = setTimeout(() => child.kill(), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The strictest idle baseline: RSS of a twin server, idle, after the same memory-reducing
 * collection the server runs once watchers left (it also returns what building the inventory
 * left behind, which the plain idle level still holds). A twin, so the measured server's rounds
 * start from the plain idle level as before.
 */
async function reclaimedIdleRss(entries: number, flags: readonly string[], env: Readonly<Record<string, string>>): Promise<number> {
  const twin = startServerChild(entries, flags, env);
  try {
    await twin.line('URL ');
    await twin.gc();
    twin.send('reclaim');
    await twin.line('RECLAIM done');
    return await rssMb(twin.pid);
  } finally {
    await twin.exit();
  }
}

/** Runs the measurement: a server child with the shipped Node flags, `rounds` rounds of `watchers` watchers. */
export async function measureWatchers(options: {entries: number; watchers: number; rounds: number; cpuProfileDir?: string}): Promise<WatchersReport> {
  const {entries, watchers: count} = options;
  const {nodeArgs: flags, env} = await shippedRuntime(undefined);
  const idleReclaimed = await reclaimedIdleRss(entries, flags, env);
  const profile = options.cpuProfileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir];
  const server = startServerChild(entries, flags, env, profile);
  const {send, line, gc} = server;
  const live = (m: ServerMemory): number => round(m.heap_used + m.external);
  try {
    const url = (await line('URL ')).slice(4);
    const {pid} = server;
    const idleMemory = await gc();
    const idle = await rssMb(pid);
    const rounds: WatchersRound[] = [];
    let afterMemory = idleMemory;
    for (let r = 0; r < options.rounds; r++) {
      let stop = false;
      let peak = await rssMb(pid);
      // /healthz is timed from a process of its own: this one is busy reading 200 snapshots, and its
      // own event-loop delay must not count as the server's latency.
      const prober = spawn(process.execPath, [import.meta.filename, '--probe', url], {stdio: ['pipe', 'pipe', 'inherit']});
      let probed = '';
      prober.stdout.setEncoding('utf8');
      prober.stdout.on('data', (c: string) => (probed += c));
      const proberDone = new Promise<void>((resolve) => prober.once('exit', () => resolve()));
      const sampler = (async () => {
        while (!stop) {
          peak = Math.max(peak, await rssMb(pid));
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      send('eld-start');
      await line('ELD started');
      const started = process.hrtime.bigint();
      const open = await Promise.all(Array.from({length: count}, () => watcher(url)));
      const snapshotsMs = Number(process.hrtime.bigint() - started) / 1e6;
      const connected = await rssMb(pid);
      for (const w of open) w.close();
      // /healthz, the event-loop delay and RSS are followed through the server's reclaim (its
      // pause) and one second past it, not only while the watchers stream.
      const reclaimed = await Promise.race([line('RECLAIMED '), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 20_000))]);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      send('eld-stop');
      const eld = JSON.parse((await line('ELD ')).slice(4)) as {p50: number; p99: number; max: number};
      stop = true;
      await sampler;
      prober.stdin.end();
      await proberDone;
      const latencies = probed.split('\n').filter(Boolean).map(Number).sort((a, b) => a - b);
      afterMemory = await gc();
      rounds.push({
        peak_rss_mb: peak,
        connected_rss_mb: connected,
        after_they_left_rss_mb: await rssMb(pid),
        after_they_left_live_mb: live(afterMemory),
        reclaim_pause_ms: reclaimed === undefined ? null : round(Number(reclaimed.slice('RECLAIMED '.length))),
        all_snapshots_ms: Math.round(snapshotsMs),
        server_event_loop_delay_ms: {p50: round(eld.p50), p99: round(eld.p99), max: round(eld.max)},
        healthz_ms: {samples: latencies.length, p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(latencies.at(-1) ?? 0)},
      });
    }
    const first = rounds[0];
    const last = rounds.at(-1);
    return {
      entries,
      watchers: count,
      node_args: flags,
      idle: {rss_mb: idle, rss_after_reclaim_mb: idleReclaimed, live_mb: live(idleMemory)},
      rounds,
      added_rss_mb: round(Math.max(...rounds.map((x) => x.peak_rss_mb)) - idle),
      after_vs_idle: Math.round(((first?.after_they_left_rss_mb ?? idle) / idle) * 1000) / 1000,
      after_vs_idle_after_reclaim: Math.round(((first?.after_they_left_rss_mb ?? idle) / idleReclaimed) * 1000) / 1000,
      last_vs_first_round: Math.round(((last?.after_they_left_rss_mb ?? idle) / (first?.after_they_left_rss_mb ?? idle)) * 1000) / 1000,
      live_after_vs_idle: Math.round((live(afterMemory) / live(idleMemory)) * 1000) / 1000,
      after_gc_mb: {idle: idleMemory, after_they_left: afterMemory},
    };
  } finally {
    await server.exit();
  }
}

async function main(): Promise<void> {
  const {values} = parseArgs({
    args: process.argv.slice(2).filter((a) => a !== '--'),
    options: {entries: {type: 'string', default: '10000'}, watchers: {type: 'string', default: '200'}, rounds: {type: 'string', default: '2'}, serve: {type: 'boolean'}, probe: {type: 'string'}, 'cpu-prof': {type: 'string'}},
  });
  const entries = Number(values.entries);
  if (values.serve) return serve(entries);
  if (values.probe !== undefined) return probe(values.probe);
  const report = await measureWatchers({entries, watchers: Number(values.watchers), rounds: Number(values.rounds), ...(values['cpu-prof'] === undefined ? {} : {cpuProfileDir: values['cpu-prof']})});
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

if (import.meta.main) await main();
