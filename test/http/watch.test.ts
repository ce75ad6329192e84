import {mkdtemp, rm, utimes, writeFile} from 'node:fs/promises';
import {request, type IncomingMessage} from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {afterEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {createAuthenticator, type Authenticator} from '../../src/http/auth.ts';
import {startHttpServer, type HttpServer} from '../../src/http/server.ts';
import type {WatchLimits} from '../../src/http/watch.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';

const suffix = '-eks-us-east-1-111111111111';
let backend: MemoryBackend | undefined;
let heartbeat: Heartbeat | undefined;
let inventory: Inventory | undefined;
let server: HttpServer | undefined;
const open = new Set<IncomingMessage>();

interface World {
  readonly heartbeat: Heartbeat;
  readonly inventory: Inventory;
  readonly server: HttpServer;
}

async function world(options: {historySize?: number; watch?: Partial<WatchLimits>; auth?: Authenticator} = {}): Promise<World> {
  backend = new MemoryBackend({clock: systemClock});
  heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  inventory = new Inventory({backend, group: 'g1', clock: systemClock, ...(options.historySize ? {historySize: options.historySize} : {})});
  await inventory.start();
  server = await startHttpServer({
    listenAddr: '127.0.0.1:0',
    inventory,
    readiness: async () => ({ready: true, status: 'ready'}),
    status: () => ({}),
    ...(options.watch ? {watch: options.watch} : {}),
    ...(options.auth ? {auth: options.auth} : {}),
  });
  return {heartbeat, inventory, server};
}

afterEach(async () => {
  for (const res of open) res.destroy();
  open.clear();
  await server?.close();
  await inventory?.stop();
  await heartbeat?.stop({deregister: false});
  await backend?.close();
  server = undefined;
});

/** Announces clusters (tags per name) in one evaluation, as one cycle would. */
async function announce(hb: Heartbeat, clusters: Record<string, Record<string, string>>): Promise<void> {
  const found = Object.entries(clusters).map(([name, tags]) => eksCluster(name, 'us-east-1', '111111111111', {tags}));
  const evaluation = evaluate([okResult('us-east-1', '111111111111', found)], context('g1'));
  for (const c of evaluation.candidates.values()) await hb.announce(c.server);
}

interface SseEvent {
  readonly id?: string;
  readonly event: string;
  readonly data: string;
}

/** A raw SSE client: reads only when asked, so a test can play a consumer that stops reading. */
class Watch {
  readonly res: IncomingMessage;
  /** Received text not yet parsed: everything after the last complete event. */
  #text = '';
  /** Complete events parsed so far. Each chunk is parsed once: re-parsing the whole stream at
   * every chunk made a 9 MB snapshot cost gigabytes of string work, which a loaded machine took
   * past the test's timeout. */
  readonly #events: SseEvent[] = [];
  #ended = false;
  #wake: (() => void) | undefined;

  private constructor(res: IncomingMessage, stalled: boolean) {
    this.res = res;
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      this.#text += chunk;
      this.#wake?.();
    });
    res.on('end', () => {
      this.#ended = true;
      this.#wake?.();
    });
    res.on('close', () => {
      this.#ended = true;
      this.#wake?.();
    });
    // Paused in the tick the listener was added: no data event has been emitted yet.
    if (stalled) res.pause();
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<Watch> {
    return new Watch(await response(url, headers), false);
  }

  /** A watch that reads nothing from its first byte on, until the test calls `res.resume()`. */
  static async stalled(url: string): Promise<Watch> {
    return new Watch(await response(url, {}), true);
  }

  /** Complete events received so far. */
  get events(): SseEvent[] {
    const end = this.#text.lastIndexOf('\n\n') + 2;
    if (end > 1) {
      this.#events.push(...parseSse(this.#text.slice(0, end)));
      this.#text = this.#text.slice(end);
    }
    return [...this.#events];
  }

  /** Reads until an event satisfies `until`; returns every event so far. */
  async readUntil(until: (e: SseEvent) => boolean): Promise<SseEvent[]> {
    for (;;) {
      const events = this.events;
      if (events.some(until)) return events;
      if (this.#ended) throw new Error(`stream ended first; got ${events.map((e) => e.event).join(',')}`);
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  /** Reads to the end of the stream. */
  async readToEnd(): Promise<SseEvent[]> {
    this.res.resume();
    while (!this.#ended) await new Promise<void>((resolve) => (this.#wake = resolve));
    return this.events;
  }
}

async function response(url: string, headers: Record<string, string>): Promise<IncomingMessage> {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    request(url, {headers}, resolve).on('error', reject).end();
  });
  open.add(res);
  return res;
}

function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l !== '' && !l.startsWith(':'));
    if (lines.length === 0) continue;
    const field = (name: string): string | undefined => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
    const id = field('id');
    out.push({...(id === undefined ? {} : {id}), event: field('event') ?? 'message', data: field('data') ?? ''});
  }
  return out;
}

/** The (event, name) pairs after `synced`, without snapshot noise. */
function changes(events: SseEvent[], after = 'synced'): string[] {
  const start = events.findIndex((e) => e.event === after);
  return events.slice(start + 1).map((e) => `${e.event} ${name(e)}`);
}

function name(e: SseEvent): string {
  const data = JSON.parse(e.data) as {name?: string; metadata?: {name: string}};
  return (data.metadata?.name ?? data.name ?? '').replace(suffix, '');
}

/** Ten tag values of 250 characters: about 6 KB of JSON per entry. */
function bulky(i: number): Record<string, string> {
  return Object.fromEntries(Array.from({length: 10}, (_, k) => [`k${k}`, `${i}-${k}-`.padEnd(250, 'x')]));
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe('/v1/watch', () => {
  it('a filtered watch sends a delete when an entry leaves the filter and nothing about entries that never matched', async () => {
    const w = await world();
    await announce(w.heartbeat, {a1: {team: 'a'}, a2: {team: 'a'}, b1: {team: 'b'}, b2: {team: 'b'}});
    const watch = await Watch.open(`${w.server.url}/v1/watch?labels=team=a`);
    const snapshot = await watch.readUntil((e) => e.event === 'synced');
    expect(snapshot.filter((e) => e.event === 'put').map(name).sort()).toEqual(['a1', 'a2']);

    await announce(w.heartbeat, {a1: {team: 'b'}}); // relabelled out of the filter
    await announce(w.heartbeat, {b1: {team: 'c'}}); // never matched, still doesn't
    await w.heartbeat.remove(`b2${suffix}`); // never matched, deleted
    await w.heartbeat.remove(`a2${suffix}`); // matched, deleted
    await announce(w.heartbeat, {b1: {team: 'a'}}); // relabelled into the filter
    await announce(w.heartbeat, {end: {team: 'a'}});
    const events = await watch.readUntil((e) => e.event === 'put' && name(e) === 'end');
    expect(changes(events)).toEqual(['delete a1', 'delete a2', 'put b1', 'put end']);
    const live = events.slice(events.findIndex((e) => e.event === 'synced'));
    expect(live.every((e) => e.id !== undefined)).toBe(true);
  });

  it('an unfiltered watch sends every put and delete with increasing ids', async () => {
    const w = await world();
    await announce(w.heartbeat, {x: {}});
    const watch = await Watch.open(`${w.server.url}/v1/watch`);
    await watch.readUntil((e) => e.event === 'synced');
    await announce(w.heartbeat, {y: {}});
    await w.heartbeat.remove(`x${suffix}`);
    const events = await watch.readUntil((e) => e.event === 'delete');
    expect(changes(events)).toEqual(['put y', 'delete x']);
    const ids = events.slice(events.findIndex((e) => e.event === 'synced')).map((e) => Number(e.id?.split('-')[1]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it('Last-Event-ID resumes with only what changed (no snapshot) while the history holds it', async () => {
    const w = await world();
    await announce(w.heartbeat, {keep: {team: 'a'}, gone: {team: 'a'}, moved: {team: 'a'}, other: {team: 'b'}});
    const first = await Watch.open(`${w.server.url}/v1/watch?labels=team=a`);
    const before = await first.readUntil((e) => e.event === 'synced');
    const lastId = before.at(-1)?.id;
    expect(lastId).toBeDefined();
    first.res.destroy();

    // While disconnected: one deleted, one relabelled away, one new, one never-matching change.
    await w.heartbeat.remove(`gone${suffix}`);
    await announce(w.heartbeat, {moved: {team: 'b'}, fresh: {team: 'a'}, other: {team: 'c'}});

    const second = await Watch.open(`${w.server.url}/v1/watch?labels=team=a`, {'last-event-id': lastId!});
    const events = await second.readUntil((e) => e.event === 'synced');
    expect(events.map((e) => `${e.event} ${e.event === 'synced' ? '' : name(e)}`.trim())).toEqual(['delete gone', 'delete moved', 'put fresh', 'synced']);
    expect(JSON.parse(events.at(-1)!.data)).toEqual({snapshot: 'none', resumed: true});

    // Live events continue after the replay.
    await announce(w.heartbeat, {later: {team: 'a'}});
    expect(changes(await second.readUntil((e) => e.event === 'put' && name(e) === 'later'))).toEqual(['put later']);
  });

  it.each([
    ['unfiltered, deleted, re-added and deleted again', '', async (hb: Heartbeat) => {
      await hb.remove(`n${suffix}`);
      await announce(hb, {m: {team: 'a', v: '2'}});
      await announce(hb, {n: {team: 'a'}});
      await hb.remove(`n${suffix}`);
    }],
    ['filtered, relabelled out of the filter twice', '?labels=team=a', async (hb: Heartbeat) => {
      await announce(hb, {n: {team: 'b'}});
      await announce(hb, {m: {team: 'a', v: '2'}});
      await announce(hb, {n: {team: 'b', v: '2'}});
    }],
  ])('a watcher cut off mid-replay resumes from the last id it got and holds no entry the inventory lacks (%s)', async (_, query, change) => {
    const w = await world();
    await announce(w.heartbeat, {n: {team: 'a'}, m: {team: 'a'}});
    const held = new Map<string, string>();
    const apply = (events: SseEvent[]): string | undefined => {
      let id: string | undefined;
      for (const e of events) {
        if (e.event === 'put') held.set(name(e), e.data);
        if (e.event === 'delete') held.delete(name(e));
        if (e.id !== undefined) id = e.id;
      }
      return id;
    };
    const first = await Watch.open(`${w.server.url}/v1/watch${query}`);
    const synced = apply(await first.readUntil((e) => e.event === 'synced'));
    first.res.destroy();
    expect([...held.keys()].sort()).toEqual(['m', 'n']);

    await change(w.heartbeat);

    // The connection drops after the replay's first event: the client resumes from the last id it got.
    const second = await Watch.open(`${w.server.url}/v1/watch${query}`, {'last-event-id': synced!});
    const replay = await second.readUntil((e) => e.event === 'synced');
    second.res.destroy();
    const cut = apply(replay.slice(0, 1)) ?? synced!;

    const third = await Watch.open(`${w.server.url}/v1/watch${query}`, {'last-event-id': cut});
    apply(await third.readUntil((e) => e.event === 'synced'));
    const want = w.inventory.list().filter((s) => query === '' || s.spec.cluster.metadata.labels['team'] === 'a').map((s) => s.metadata.name.replace(suffix, ''));
    expect([...held.keys()].sort(), 'entries the client holds after resuming').toEqual(want.sort());
  });

  it('an id the history no longer holds (or from another process) gets a reset and a fresh snapshot', async () => {
    const w = await world({historySize: 3});
    await announce(w.heartbeat, {a: {}, b: {}});
    const first = await Watch.open(`${w.server.url}/v1/watch`);
    const lastId = (await first.readUntil((e) => e.event === 'synced')).at(-1)!.id!;
    first.res.destroy();
    await announce(w.heartbeat, {c: {}, d: {}, e: {}, f: {}});

    const expired = await Watch.open(`${w.server.url}/v1/watch`, {'last-event-id': lastId});
    const events = await expired.readUntil((e) => e.event === 'synced');
    expect(events[0]?.event).toBe('reset');
    expect(JSON.parse(events[0]!.data)).toMatchObject({reason: 'history_expired'});
    expect(events.filter((e) => e.event === 'put').map(name).sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(JSON.parse(events.at(-1)!.data)).toEqual({snapshot: 'fresh'});

    const foreign = await Watch.open(`${w.server.url}/v1/watch`, {'last-event-id': '0badcafe-1'});
    const reset = await foreign.readUntil((e) => e.event === 'synced');
    expect(JSON.parse(reset[0]!.data)).toMatchObject({reason: 'unknown_event_id'});
  });

  it('streams a snapshot larger than the socket buffers only as fast as the client reads (backpressure)', async () => {
    const w = await world();
    const count = 1500; // ~9 MB of snapshot: more than loopback socket buffers absorb
    await announce(w.heartbeat, Object.fromEntries(Array.from({length: count}, (_, i) => [`big${i}`, bulky(i)])));
    const watch = await Watch.stalled(`${w.server.url}/v1/watch`);
    // The client reads nothing: the server must stop and wait for the socket to drain.
    await until(() => w.server.watchStats().waitingForDrain === 1);
    const held = w.server.watchStats().bufferedBytes;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(256 * 1024);
    watch.res.resume();
    const events = await watch.readUntil((e) => e.event === 'synced');
    expect(events.filter((e) => e.event === 'put')).toHaveLength(count);
  });

  it('disconnects a slow consumer with a final event saying why, and the watcher slot is freed', async () => {
    const w = await world({watch: {maxBufferedBytes: 65_536, closeGraceMs: 60_000}});
    await announce(w.heartbeat, Object.fromEntries(Array.from({length: 1500}, (_, i) => [`big${i}`, bulky(i)])));
    const watch = await Watch.stalled(`${w.server.url}/v1/watch`);
    await until(() => w.server.watchStats().waitingForDrain === 1);
    // Changes keep coming while it reads nothing: its queue passes the cap.
    for (let i = 0; w.server.watchStats().watchers > 0; i++) {
      expect(i).toBeLessThan(100);
      await announce(w.heartbeat, {[`big${i}`]: {...bulky(i), round: String(i)}});
    }
    const events = await watch.readToEnd();
    const last = events.at(-1)!;
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data)).toMatchObject({reason: 'slow_consumer'});
    expect(JSON.parse(last.data).message).toContain('http.watch.max_buffered_bytes');
  });

  it('a watch whose token is revoked from the token file ends with an unauthorized event; one with a kept token streams on', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-watch-auth-'));
    try {
      const tokens = path.join(dir, 'tokens');
      await writeFile(tokens, 'revoked-token-0001\nkept-token-00002\n');
      const auth = createAuthenticator({clock: systemClock, tokenFile: tokens})!;
      const w = await world({auth, watch: {keepaliveMs: 20}});
      await announce(w.heartbeat, {before: {}});
      const revoked = await Watch.open(`${w.server.url}/v1/watch`, {authorization: 'Bearer revoked-token-0001'});
      const kept = await Watch.open(`${w.server.url}/v1/watch`, {authorization: 'Bearer kept-token-00002'});
      await revoked.readUntil((e) => e.event === 'synced');
      await kept.readUntil((e) => e.event === 'synced');

      await writeFile(tokens, 'kept-token-00002\n');
      await utimes(tokens, new Date(), new Date(Date.now() + 60_000)); // a new mtime, whatever the file system's resolution
      const events = await revoked.readToEnd();
      expect(events.at(-1)?.event).toBe('error');
      expect(JSON.parse(events.at(-1)!.data)).toMatchObject({reason: 'unauthorized'});
      expect(events.map((e) => e.data).join('\n')).not.toContain('revoked-token-0001');

      await announce(w.heartbeat, {after: {}});
      const live = await kept.readUntil((e) => e.event === 'put' && name(e) === 'after');
      expect(changes(live)).toEqual(['put after']);
      await until(() => w.server.watchStats().watchers === 1);
    } finally {
      await rm(dir, {recursive: true, force: true});
    }
  });

  it('watchers taking their snapshots at once share serialised entries yet each gets exactly its own filter', async () => {
    const w = await world();
    const teams = ['a', 'b', 'c'];
    await announce(w.heartbeat, Object.fromEntries(Array.from({length: 1500}, (_, i) => [`big${i}`, {...bulky(i), team: teams[i % 3] as string}])));
    // One watcher stops reading mid-snapshot, so the shared frames stay in use while the others read theirs.
    const stalled = await Watch.stalled(`${w.server.url}/v1/watch`);
    await until(() => w.server.watchStats().waitingForDrain === 1);
    const filters = ['team=a', 'team=b', 'team=c', 'team=a', ''];
    const watches = await Promise.all(filters.map((f) => Watch.open(`${w.server.url}/v1/watch${f ? `?labels=${f}` : ''}`)));
    const snapshots = await Promise.all(watches.map((x) => x.readUntil((e) => e.event === 'synced')));
    const names = (events: SseEvent[]): string[] => events.filter((e) => e.event === 'put').map(name).sort();
    const expected = (team: string | undefined): string[] =>
      Array.from({length: 1500}, (_, i) => i).filter((i) => team === undefined || teams[i % 3] === team).map((i) => `big${i}`).sort();
    expect(snapshots.map(names)).toEqual([expected('a'), expected('b'), expected('c'), expected('a'), expected(undefined)]);
    stalled.res.resume();
    expect(names(await stalled.readUntil((e) => e.event === 'synced'))).toEqual(expected(undefined));
  });

  it('a snapshot shows the expiry a keepalive moved, even while another snapshot shares the entries', async () => {
    const w = await world();
    await announce(w.heartbeat, Object.fromEntries(Array.from({length: 1500}, (_, i) => [`big${i}`, bulky(i)])));
    await Watch.stalled(`${w.server.url}/v1/watch`);
    await until(() => w.server.watchStats().waitingForDrain === 1);
    const [item] = await backend!.list(kubeServerPrefix('g1'));
    const later = Date.parse('2999-01-01T00:00:00.000Z');
    w.inventory.leaseKeptAlive(item!.lease!, later);
    const fresh = await Watch.open(`${w.server.url}/v1/watch`);
    const puts = (await fresh.readUntil((e) => e.event === 'synced')).filter((e) => e.event === 'put');
    expect(puts).toHaveLength(1500);
    expect(new Set(puts.map((e) => (JSON.parse(e.data) as {metadata: {expires: string}}).metadata.expires))).toEqual(new Set(['2999-01-01T00:00:00.000Z']));
  });

  it('a watcher that stops reading does not hold up the others, and /healthz answers meanwhile', async () => {
    const w = await world();
    await announce(w.heartbeat, Object.fromEntries(Array.from({length: 1500}, (_, i) => [`big${i}`, bulky(i)])));
    // Each reads nothing from its first byte: a watcher paused only once all five had opened could have read its whole snapshot.
    await Promise.all(Array.from({length: 5}, () => Watch.stalled(`${w.server.url}/v1/watch`)));
    await until(() => w.server.watchStats().waitingForDrain === 5);
    expect((await fetch(`${w.server.url}/healthz`)).status).toBe(200);
    const reader = await Watch.open(`${w.server.url}/v1/watch`);
    expect((await reader.readUntil((e) => e.event === 'synced')).filter((e) => e.event === 'put')).toHaveLength(1500);
    expect(w.server.watchStats().waitingForDrain).toBe(5);
  });

  it('refuses watchers over http.watch.max_watchers with 429 until one leaves', async () => {
    const w = await world({watch: {maxWatchers: 2}});
    const a = await Watch.open(`${w.server.url}/v1/watch`);
    const b = await Watch.open(`${w.server.url}/v1/watch`);
    await a.readUntil((e) => e.event === 'synced');
    await b.readUntil((e) => e.event === 'synced');
    const refused = await fetch(`${w.server.url}/v1/watch`);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as {error: string}).error).toBe('too_many_watchers');
    expect((await fetch(`${w.server.url}/healthz`)).status).toBe(200);
    a.res.destroy();
    await until(() => w.server.watchStats().watchers === 1);
    const c = await Watch.open(`${w.server.url}/v1/watch`);
    expect(c.res.statusCode).toBe(200);
    await c.readUntil((e) => e.event === 'synced');
  });
});
