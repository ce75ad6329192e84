/**
 * Memory handed back once a burst of watchers has left (src/http/watch-reclaim.ts): the server
 * runs its memory-reducing collection once nobody watches any more, a moment after the last one
 * left, only after enough was streamed, at most once per interval, never after shutdown; and that
 * collection really returns memory to the system (a child process started as the image starts it).
 */
import {execFile} from 'node:child_process';
import {request, type IncomingMessage} from 'node:http';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {startHttpServer, type HttpServer} from '../../src/http/server.ts';
import type {ReclaimPolicy} from '../../src/http/watch-reclaim.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const stops: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

interface World {
  readonly server: HttpServer;
  readonly clock: FakeClock;
  /** How many times the server ran its collection. */
  readonly runs: () => number;
}

/** A server over 40 entries (~20 KB of snapshot) whose collection is counted, on a test clock. */
async function world(policy: Partial<ReclaimPolicy>, options: {heapUsed?: number; cycleRunning?: () => boolean} = {}): Promise<World> {
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const found = Array.from({length: 40}, (_, i) => eksCluster(`c${i}`, 'us-east-1', '111111111111', {tags: {team: `team-${i}`, note: 'x'.repeat(200)}}));
  for (const c of evaluate([okResult('us-east-1', '111111111111', found)], context('g1')).candidates.values()) await heartbeat.announce(c.server);
  const inventory = new Inventory({backend, group: 'g1', clock: systemClock});
  await inventory.start();
  const clock = new FakeClock();
  let runs = 0;
  const server = await startHttpServer({
    listenAddr: '127.0.0.1:0',
    inventory,
    readiness: async () => ({ready: true, status: 'ready'}),
    status: () => ({}),
    memoryReclaim: {
      run: () => void runs++,
      clock,
      policy: {minWatchers: 1, afterHeapMultiple: 0, delayMs: 1_000, minIntervalMs: 10_000, ...policy},
      heapUsed: () => options.heapUsed ?? 0,
      ...(options.cycleRunning ? {deferWhile: options.cycleRunning} : {}),
    },
  });
  stops.push(async () => {
    await server.close();
    await inventory.stop();
    await heartbeat.stop({deregister: false});
    await backend.close();
  });
  return {server, clock, runs: () => runs};
}

/** A watcher that has read its whole snapshot (`bytes` of it); `leave` closes it and waits until the server saw it go. */
async function watcher(server: HttpServer): Promise<{bytes: number; leave: () => Promise<void>}> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => request(`${server.url}/v1/watch`, resolve).on('error', reject).end());
  res.setEncoding('utf8');
  let text = '';
  await new Promise<void>((resolve) =>
    res.on('data', (chunk: string) => {
      text += chunk;
      if (text.includes('event: synced')) resolve();
    }),
  );
  return {
    bytes: Buffer.byteLength(text),
    leave: async () => {
      const before = server.watchStats().watchers;
      res.destroy();
      await until(() => server.watchStats().watchers < before);
    },
  };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe('memory reclaim after watchers leave', () => {
  it('runs once, a moment after the last watcher of a burst left', async () => {
    const w = await world({afterBytes: 1});
    const burst = await Promise.all([watcher(w.server), watcher(w.server), watcher(w.server)]);
    for (const x of burst) await x.leave();
    await w.clock.advance(999);
    expect(w.runs()).toBe(0);
    await w.clock.advance(1);
    expect(w.runs()).toBe(1);
    await w.clock.advance(60_000);
    expect(w.runs()).toBe(1);
  });

  it('waits while any watcher is still connected', async () => {
    const w = await world({afterBytes: 1});
    const [a, b] = await Promise.all([watcher(w.server), watcher(w.server)]);
    await a!.leave();
    await w.clock.advance(30_000);
    expect(w.runs()).toBe(0);
    await b!.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(1);
  });

  it('does nothing when less was streamed than makes the pause worth it', async () => {
    const w = await world({afterBytes: 64 * 1024 * 1024});
    const burst = await Promise.all([watcher(w.server), watcher(w.server)]);
    for (const x of burst) await x.leave();
    await w.clock.advance(60_000);
    expect(w.runs()).toBe(0);
  });

  it('a watcher that connects during the wait puts it off until it leaves too', async () => {
    const w = await world({afterBytes: 1});
    await (await watcher(w.server)).leave();
    await w.clock.advance(500);
    const late = await watcher(w.server);
    await w.clock.advance(5_000);
    expect(w.runs()).toBe(0);
    await late.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(1);
  });

  it('runs at most once per interval, and counts only what was streamed since the last run', async () => {
    const probe = await world({afterBytes: Infinity});
    const snapshot = (await watcher(probe.server)).bytes;
    const w = await world({afterBytes: Math.round(snapshot * 1.5)});
    // Two snapshots pass the threshold.
    const first = await Promise.all([watcher(w.server), watcher(w.server)]);
    for (const x of first) await x.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(1);
    // One snapshot since does not.
    await (await watcher(w.server)).leave();
    await w.clock.advance(30_000);
    expect(w.runs()).toBe(1);
    // Two more do, but the interval since the last run holds it back until it is over.
    const second = await Promise.all([watcher(w.server), watcher(w.server)]);
    for (const x of second) await x.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(2);
    const third = await Promise.all([watcher(w.server), watcher(w.server), watcher(w.server)]);
    for (const x of third) await x.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(2);
    // Ten seconds after the last run, not a second after they left.
    await w.clock.advance(8_999);
    expect(w.runs()).toBe(2);
    await w.clock.advance(1);
    expect(w.runs()).toBe(3);
  });

  it('one client coming and going is no burst: nothing runs until enough watchers were connected at once', async () => {
    const w = await world({afterBytes: 1, minWatchers: 3});
    for (let i = 0; i < 5; i++) {
      await (await watcher(w.server)).leave();
      await w.clock.advance(20_000);
    }
    expect(w.runs()).toBe(0);
    const burst = await Promise.all([watcher(w.server), watcher(w.server), watcher(w.server)]);
    for (const x of burst) await x.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(1);
    // The burst is spent: one client again is not one.
    await (await watcher(w.server)).leave();
    await w.clock.advance(60_000);
    expect(w.runs()).toBe(1);
  });

  it('what must be streamed first grows with the heap (the pause does)', async () => {
    const probe = await world({afterBytes: Infinity});
    const snapshot = (await watcher(probe.server)).bytes;
    // A heap of 3 snapshots at 1x: two snapshots are not enough, four are.
    const w = await world({afterBytes: 1, afterHeapMultiple: 1}, {heapUsed: snapshot * 3});
    const two = await Promise.all([watcher(w.server), watcher(w.server)]);
    for (const x of two) await x.leave();
    await w.clock.advance(30_000);
    expect(w.runs()).toBe(0);
    const more = await Promise.all([watcher(w.server), watcher(w.server)]);
    for (const x of more) await x.leave();
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(1);
  });

  it('waits while a discovery cycle runs, then runs after it', async () => {
    let cycle = true;
    const w = await world({afterBytes: 1}, {cycleRunning: () => cycle});
    await (await watcher(w.server)).leave();
    await w.clock.advance(30_000);
    expect(w.runs()).toBe(0);
    cycle = false;
    await w.clock.advance(1_000);
    expect(w.runs()).toBe(1);
  });

  it('nothing runs after the server closed', async () => {
    const w = await world({afterBytes: 1});
    await (await watcher(w.server)).leave();
    await w.server.close();
    await w.clock.advance(60_000);
    expect(w.runs()).toBe(0);
  });

  it('the collection returns memory a full collection leaves resident (under --expose-gc, as the image runs)', async () => {
    // Garbage of ~200 MB of small objects: after a full collection V8 keeps most of its pages resident.
    const script = `
      import {exposedMemoryReclaim} from ${JSON.stringify(path.join(ROOT, 'src/http/watch-reclaim.ts'))};
      let keep = [];
      for (let i = 0; i < 2e6; i++) keep.push({i, s: 'x' + i});
      keep = undefined;
      gc();
      const afterGc = process.memoryUsage.rss();
      exposedMemoryReclaim()();
      console.log(JSON.stringify({afterGc, afterReclaim: process.memoryUsage.rss()}));
    `;
    const {stdout} = await promisify(execFile)(process.execPath, ['--expose-gc', '--max-semi-space-size=12', '--input-type=module', '-e', script]);
    const {afterGc, afterReclaim} = JSON.parse(stdout) as {afterGc: number; afterReclaim: number};
    expect(afterGc - afterReclaim).toBeGreaterThan(50 * 1024 * 1024);
  });

  it('is off in a process without --expose-gc (V8 offers no such collection there)', async () => {
    const script = `
      import {exposedMemoryReclaim} from ${JSON.stringify(path.join(ROOT, 'src/http/watch-reclaim.ts'))};
      console.log(exposedMemoryReclaim() === undefined ? 'off' : 'on');
    `;
    const {stdout} = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    expect(stdout.trim()).toBe('off');
  });
});
