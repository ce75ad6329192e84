/**
 * `npm run bench:watchers`: what `/v1/watch` clients cost the server. A child process (run with
 * the shipped Node flags) serves an inventory of N entries; this process opens W watchers that
 * read their snapshot and stay connected, while it times `/healthz`; then they leave. It reports
 * the child's RSS idle, with the watchers, and after they left (read from /proc), and /healthz
 * latency percentiles during the run.
 *
 *   npm run bench:watchers [-- --entries 10000] [--watchers 200]
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
import {Inventory} from '../src/inventory/inventory.ts';
import {MemoryBackend} from '../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../test/discovery/builders.ts';
import {shippedNodeFlags} from './memory.ts';

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
  const server = await startHttpServer({listenAddr: '127.0.0.1:0', inventory, readiness: async () => ({ready: true, status: 'ready'}), status: () => ({})});
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
    globalThis.gc?.();
    process.stdout.write('GC\n');
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

async function main(): Promise<void> {
  const {values} = parseArgs({args: process.argv.slice(2).filter((a) => a !== '--'), options: {entries: {type: 'string', default: '10000'}, watchers: {type: 'string', default: '200'}, serve: {type: 'boolean'}, probe: {type: 'string'}}});
  const entries = Number(values.entries);
  if (values.serve) return serve(entries);
  if (values.probe !== undefined) return probe(values.probe);
  const flags = await shippedNodeFlags();
  const child = spawn(process.execPath, ['--expose-gc', ...flags, import.meta.filename, '--serve', '--entries', String(entries)], {stdio: ['pipe', 'pipe', 'inherit']});
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
  const gc = async (): Promise<void> => {
    child.stdin.write('gc\n');
    await line('GC');
  };
  try {
    const url = (await line('URL ')).slice(4);
    const pid = child.pid ?? 0;
    await gc();
    const idle = await rssMb(pid);
    let stop = false;
    let peak = idle;
    // /healthz is timed from a process of its own: this one is busy reading 200 snapshots, and its
    // own event-loop delay must not count as the server's latency.
    const prober = spawn(process.execPath, [import.meta.filename, '--probe', url], {stdio: ['pipe', 'pipe', 'inherit']});
    let probed = '';
    prober.stdout.setEncoding('utf8');
    prober.stdout.on('data', (c: string) => (probed += c));
    const proberDone = new Promise<void>((r) => prober.once('exit', () => r()));
    const sampler = (async () => {
      while (!stop) {
        peak = Math.max(peak, await rssMb(pid));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    child.stdin.write('eld-start\n');
    await line('ELD started');
    const count = Number(values.watchers);
    const started = process.hrtime.bigint();
    const open = await Promise.all(Array.from({length: count}, () => watcher(url)));
    const snapshotsMs = Number(process.hrtime.bigint() - started) / 1e6;
    const connected = await rssMb(pid);
    child.stdin.write('eld-stop\n');
    const eld = JSON.parse((await line('ELD ')).slice(4)) as {p50: number; p99: number; max: number};
    for (const w of open) w.close();
    stop = true;
    await sampler;
    prober.stdin.end();
    await proberDone;
    const latencies = probed.split('\n').filter(Boolean).map(Number);
    await new Promise((r) => setTimeout(r, 500));
    await gc();
    const after = await rssMb(pid);
    latencies.sort((a, b) => a - b);
    const report = {
      entries,
      watchers: count,
      node_args: flags,
      rss_mb: {idle, peak_with_watchers: peak, connected, after_they_left: after},
      added_rss_mb: Math.round((peak - idle) * 10) / 10,
      after_vs_idle: Math.round((after / idle) * 1000) / 1000,
      all_snapshots_ms: Math.round(snapshotsMs),
      server_event_loop_delay_ms: {p50: round(eld.p50), p99: round(eld.p99), max: round(eld.max)},
      healthz_ms: {samples: latencies.length, p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(latencies.at(-1) ?? 0)},
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    child.kill();
  }
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

await main();
