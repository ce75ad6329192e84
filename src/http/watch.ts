/**
 * `GET /v1/watch`: server-sent events of the inventory, bounded per watcher and in number.
 *
 * - The snapshot is read lazily from the inventory as the socket drains (`write()` false →
 *   wait for `drain`), never copied or buffered whole per watcher; each entry is serialised
 *   once into a Buffer that every watcher taking a snapshot at the time writes.
 * - One pump writes for all watchers, a slice each in turn, and yields the event loop every
 *   few milliseconds: 200 watchers taking 10,000-entry snapshots do not delay /healthz.
 * - Live events are serialised once and the same Buffer is queued for every watcher; a
 *   watcher whose queue plus socket buffer exceeds `maxBufferedBytes` is a slow consumer:
 *   it gets a final `error` event saying so and is disconnected.
 * - Live events carry `id: <epoch>-<n>`; a client reconnecting with `Last-Event-ID` gets
 *   only what changed since (no snapshot) while the inventory still holds that history,
 *   else a `reset` event and a fresh snapshot.
 * - With `?labels=`, an entry that leaves the filter (deleted or relabelled) is sent as a
 *   delete; entries that never matched are never mentioned.
 */
import type {IncomingMessage, ServerResponse} from 'node:http';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import type {Inventory, InventoryEvent} from '../inventory/inventory.ts';
import type {LoggedChange} from '../inventory/change-log.ts';
import {WatchReclaim, type MemoryReclaim} from './watch-reclaim.ts';

/** Limits of /v1/watch. */
export interface WatchLimits {
  /** Concurrent watchers; one more is answered 429. */
  readonly maxWatchers: number;
  /** Bytes a watcher may have queued (events not yet written plus the socket's buffer) before it is disconnected. */
  readonly maxBufferedBytes: number;
  /** Interval of keep-alive comments. */
  readonly keepaliveMs: number;
  /** After the final event of a disconnected slow consumer, how long its socket may take to flush before it is destroyed. */
  readonly closeGraceMs: number;
}

/** Defaults of the watch limits (the `http.watch` config keys). */
export const DEFAULT_WATCH_LIMITS: WatchLimits = {maxWatchers: 256, maxBufferedBytes: 4 * 1024 * 1024, keepaliveMs: 15_000, closeGraceMs: 10_000};

/** What the watchers hold right now (for /metrics and the bench). */
export interface WatchStats {
  readonly watchers: number;
  readonly bufferedBytes: number;
  readonly waitingForDrain: number;
}

/** Label selector pairs, as parsed from `?labels=`. */
export type Selector = readonly [string, string][];

/** Bytes one watcher writes per slice: one `write()`, one HTTP chunk, about the socket's high-water mark. */
const SLICE_BYTES = 16 * 1024;

/**
 * How long the pump may write in one turn of the event loop before it yields: a request
 * (/healthz, a new watcher) waits at most about this long, however many watchers stream.
 */
const TURN_MS = 4;

/**
 * Bytes the pump may hand to sockets per turn: the kernel copies them when the sockets uncork,
 * after the pump's turn, so this bounds that unmeasured part of the turn too.
 */
const TURN_BYTES = 1024 * 1024;

/**
 * Writes for every watcher of a server, one slice per watcher at a time, round-robin, for at
 * most TURN_MS per turn of the event loop (then `setImmediate`). A watcher is ready when it has
 * frames to send and its socket is not waiting for `drain`; `drain` only marks it ready again,
 * so a socket that drains at once (loopback) cannot chain writes without the loop turning.
 */
class Pump {
  readonly #ready = new Set<WatchStream>();
  #scheduled = false;
  #sent = 0;

  /** Bytes written to watchers' sockets so far. */
  get sent(): number {
    return this.#sent;
  }

  /** Marks `stream` as having frames to write. */
  schedule(stream: WatchStream): void {
    this.#ready.add(stream);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#run);
    }
  }

  /** Forgets a stream that closed. */
  remove(stream: WatchStream): void {
    this.#ready.delete(stream);
  }

  readonly #run = (): void => {
    this.#scheduled = false;
    const started = performance.now();
    let bytes = 0;
    // Deleting and re-adding moves a stream to the end of the Set: round-robin.
    for (const stream of this.#ready) {
      this.#ready.delete(stream);
      let written: number;
      try {
        written = stream.writeSlice();
      } catch {
        // One broken socket must not stop the pump (nor, thrown from setImmediate, the process).
        stream.abort();
        continue;
      }
      bytes += Math.abs(written);
      if (written > 0) this.#ready.add(stream);
      if (bytes >= TURN_BYTES || performance.now() - started >= TURN_MS) break;
    }
    this.#sent += bytes;
    if (this.#ready.size > 0 && !this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#run);
    }
  };
}

/**
 * Snapshot frames shared by every watcher taking a snapshot: each entry is serialised once per
 * version (stored object and lease expiry) and the same Buffer is written to every socket. The
 * frames are dropped when no snapshot is running, so connected-but-idle watchers hold none.
 */
class SnapshotFrames {
  readonly #inventory: Inventory;
  #frames = new WeakMap<KubeServer, {readonly expiry: number | undefined; readonly frame: Frame}>();
  #running = 0;

  constructor(inventory: Inventory) {
    this.#inventory = inventory;
  }

  /** A snapshot starts using the frames. */
  begin(): void {
    this.#running++;
  }

  /** A snapshot finished (or its watcher left). */
  end(): void {
    if (--this.#running === 0) this.#frames = new WeakMap();
  }

  /** The `put` frame of entry `name`, stored as `stored`. */
  frame(name: string, stored: KubeServer): Frame {
    const expiry = this.#inventory.leaseExpiryOf(name);
    const cached = this.#frames.get(stored);
    if (cached !== undefined && cached.expiry === expiry) return cached.frame;
    // What get() shows: the stored entry with its lease's expiry.
    const view = this.#inventory.get(name) ?? stored;
    const frame = textFrame(`event: put\ndata: ${JSON.stringify(view)}\n\n`);
    this.#frames.set(stored, {expiry, frame});
    return frame;
  }
}

/**
 * Reusable slice buffers: frames are copied into a slice and the slice is written; it comes back
 * when the socket has taken it (the write callback). Allocating a fresh Buffer per slice would
 * churn gigabytes through malloc for 200 snapshots and leave RSS high after the watchers leave.
 */
class SlicePool {
  readonly #free: Buffer[] = [];

  /** A slice of SLICE_BYTES. */
  take(): Buffer {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(SLICE_BYTES);
  }

  /** Returns a slice the socket no longer reads; keeps at most 64 spare. */
  give(slice: Buffer): void {
    if (this.#free.length < 64) this.#free.push(slice);
  }
}

/** The running watchers of one HTTP server. */
export class WatchStreams {
  readonly #inventory: Inventory;
  readonly #limits: WatchLimits;
  readonly #matches: (server: KubeServer, selector: Selector) => boolean;
  readonly #open = new Set<WatchStream>();
  readonly #pump = new Pump();
  readonly #slices = new SlicePool();
  readonly #frames: SnapshotFrames;
  readonly #reclaim: WatchReclaim | undefined;

  /** `reclaim`: the memory-reducing collection run once a burst of watchers has left (watch-reclaim.ts). */
  constructor(inventory: Inventory, limits: WatchLimits, matches: (server: KubeServer, selector: Selector) => boolean, reclaim?: MemoryReclaim) {
    this.#inventory = inventory;
    this.#limits = limits;
    this.#matches = matches;
    this.#frames = new SnapshotFrames(inventory);
    this.#reclaim = reclaim && new WatchReclaim(reclaim, () => this.#pump.sent, () => this.#open.size === 0);
  }

  /** Watchers currently connected. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * Answers one watch request: 429 over the limit, else an event stream until either side closes.
   * `stillAuthorized` (when the API has auth) is asked again at every keep-alive interval: a watch
   * opened with a token that was since revoked ends with an `unauthorized` event.
   */
  open(req: IncomingMessage, res: ServerResponse, selector: Selector, stillAuthorized?: () => Promise<boolean>): void {
    if (this.#open.size >= this.#limits.maxWatchers) {
      const body = JSON.stringify({error: 'too_many_watchers', message: `this server already has ${this.#open.size} watchers (http.watch.max_watchers); retry later`});
      res.writeHead(429, {'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'retry-after': '5'});
      res.end(body);
      return;
    }
    const lastEventId = header(req.headers['last-event-id']);
    const stream: WatchStream = new WatchStream({
      inventory: this.#inventory,
      limits: this.#limits,
      res,
      selector,
      matches: this.#matches,
      frames: this.#frames,
      pump: this.#pump,
      slices: this.#slices,
      onClosed: () => {
        this.#open.delete(stream);
        if (this.#open.size === 0) this.#reclaim?.allLeft();
      },
      ...(stillAuthorized ? {stillAuthorized} : {}),
    });
    this.#open.add(stream);
    this.#reclaim?.opened(this.#open.size);
    const done = (): void => stream.close();
    req.on('close', done);
    res.on('close', done);
    stream.start(lastEventId);
  }

  /** Connected watchers, the bytes they hold (queued events plus socket buffers) and how many wait for their socket to drain. */
  stats(): WatchStats {
    let bufferedBytes = 0;
    let waiting = 0;
    for (const stream of this.#open) {
      bufferedBytes += stream.bufferedBytes;
      if (stream.waitingForDrain) waiting++;
    }
    return {watchers: this.#open.size, bufferedBytes, waitingForDrain: waiting};
  }

  /** Ends every stream (server shutdown). */
  closeAll(): void {
    for (const stream of this.#open) stream.end();
    this.#reclaim?.stop();
  }
}

/**
 * One SSE frame: its text and UTF-8 size. Frames stay JavaScript strings (V8's heap returns its
 * pages after a collection; a Buffer per frame is malloc'd and fragments the process heap) and
 * are encoded straight into a pooled slice when written.
 */
interface Frame {
  readonly text: string;
  readonly bytes: number;
}

function textFrame(text: string): Frame {
  return {text, bytes: Buffer.byteLength(text)};
}

/** Live-event frames, serialised once per event and shared by every watcher that sends them. */
const putFrames = new WeakMap<InventoryEvent, Frame>();
const deleteFrames = new WeakMap<InventoryEvent, Frame>();

function eventId(epoch: string, id: number): string {
  return `${epoch}-${id}`;
}

function putFrame(epoch: string, event: InventoryEvent & {type: 'put'}): Frame {
  let frame = putFrames.get(event);
  if (frame === undefined) {
    frame = textFrame(`id: ${eventId(epoch, event.id)}\nevent: put\ndata: ${JSON.stringify(event.server)}\n\n`);
    putFrames.set(event, frame);
  }
  return frame;
}

function deleteFrame(epoch: string, event: InventoryEvent): Frame {
  let frame = deleteFrames.get(event);
  if (frame === undefined) {
    const name = event.type === 'put' ? event.server.metadata.name : event.name;
    frame = textFrame(`id: ${eventId(epoch, event.id)}\nevent: delete\ndata: ${JSON.stringify({name})}\n\n`);
    deleteFrames.set(event, frame);
  }
  return frame;
}

/** What a WatchStream is built from. */
interface WatchStreamParts {
  readonly inventory: Inventory;
  readonly limits: WatchLimits;
  readonly res: ServerResponse;
  readonly selector: Selector;
  readonly matches: (server: KubeServer, selector: Selector) => boolean;
  readonly frames: SnapshotFrames;
  readonly pump: Pump;
  readonly slices: SlicePool;
  readonly onClosed: () => void;
  readonly stillAuthorized?: () => Promise<boolean>;
}

/** One watcher: a source of frames (snapshot or replay), then its queue of live frames. */
class WatchStream {
  readonly #p: WatchStreamParts;
  readonly #res: ServerResponse;
  /** Frames to send before the live queue: the snapshot or the replay, ending with `synced`. */
  #source: Iterator<Frame> | undefined;
  /** Whether this stream holds a reference on the shared snapshot frames. */
  #inSnapshot = false;
  /** A frame taken from the source or queue that did not fit in the last slice: it goes first in the next. */
  #held: Frame | undefined;
  readonly #queue: Frame[] = [];
  #queueHead = 0;
  #queuedBytes = 0;
  #waitingForDrain = false;
  #closed = false;
  #unsubscribe: (() => void) | undefined;
  #keepalive: ReturnType<typeof setInterval> | undefined;
  #checkingAuth = false;

  constructor(parts: WatchStreamParts) {
    this.#p = parts;
    this.#res = parts.res;
  }

  /** Bytes queued for this watcher plus its socket's buffer. */
  get bufferedBytes(): number {
    return this.#queuedBytes + this.#res.writableLength;
  }

  /** Whether the socket asked to wait (`write()` returned false) and has not drained yet. */
  get waitingForDrain(): boolean {
    return this.#waitingForDrain;
  }

  /** Subscribes, then sends the snapshot or the replay, then live events. */
  start(lastEventId: string | undefined): void {
    const {epoch, log} = this.#p.inventory.changes;
    // Subscribe before reading anything, so no change between the snapshot (or replay) and the live stream is lost.
    const from = log.lastId;
    this.#unsubscribe = this.#p.inventory.subscribe((event) => this.#onEvent(event));
    this.#res.writeHead(200, {'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive'});
    const resumed = lastEventId === undefined ? undefined : parseEventId(lastEventId, epoch);
    const changes = resumed === undefined ? undefined : log.since(resumed);
    if (resumed !== undefined && changes !== undefined) {
      this.#source = this.#replay(changes, epoch, resumed, from);
    } else {
      const reason = lastEventId === undefined ? undefined : resumed === undefined ? 'unknown_event_id' : 'history_expired';
      this.#inSnapshot = true;
      this.#p.frames.begin();
      this.#source = this.#snapshot(epoch, from, reason);
    }
    this.#keepalive = setInterval(() => {
      // Only an idle, drained stream gets a keep-alive: it must never add to a blocked buffer.
      if (!this.#waitingForDrain && this.#held === undefined && this.#source === undefined && this.#queueHead === this.#queue.length) this.#res.write(': keepalive\n\n');
      this.#recheckAuth();
    }, this.#p.limits.keepaliveMs);
    this.#keepalive.unref();
    this.#p.pump.schedule(this);
  }

  /** Stops sending; the socket is already closing. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe?.();
    if (this.#keepalive) clearInterval(this.#keepalive);
    this.#res.off('drain', this.#onDrain);
    this.#p.pump.remove(this);
    this.#queue.length = 0;
    this.#queueHead = 0;
    this.#queuedBytes = 0;
    this.#held = undefined;
    this.#endSource();
    this.#p.onClosed();
  }

  /** Ends the stream politely (server shutdown). */
  end(): void {
    this.close();
    this.#res.end();
  }

  /** Drops the connection after a write failed. */
  abort(): void {
    this.close();
    this.#res.destroy();
  }

  /**
   * Writes the next slice (frames copied into one pooled buffer of SLICE_BYTES; a larger frame
   * alone); the pump calls it. Returns the bytes written, negated when nothing more can be
   * written now (no frames left, or the socket asked to wait): 0 means nothing was written.
   */
  writeSlice(): number {
    if (this.#closed || this.#waitingForDrain) return 0;
    const first = this.#nextFrame();
    if (first === undefined) return 0;
    let ok: boolean;
    let used = first.bytes;
    if (first.bytes >= SLICE_BYTES) {
      ok = this.#res.write(first.text);
    } else {
      const {slices} = this.#p;
      const slice = slices.take();
      used = slice.write(first.text, 0, first.bytes);
      for (;;) {
        const frame = this.#nextFrame();
        if (frame === undefined) break;
        if (used + frame.bytes > SLICE_BYTES) {
          this.#held = frame;
          break;
        }
        used += slice.write(frame.text, used, frame.bytes);
      }
      ok = this.#res.write(slice.subarray(0, used), () => slices.give(slice));
    }
    if (!ok) {
      this.#waitingForDrain = true;
      this.#res.once('drain', this.#onDrain);
      return -used;
    }
    return this.#held !== undefined || this.#source !== undefined || this.#queueHead < this.#queue.length ? used : -used;
  }

  readonly #onDrain = (): void => {
    this.#waitingForDrain = false;
    if (!this.#closed) this.#p.pump.schedule(this);
  };

  #nextFrame(): Frame | undefined {
    const held = this.#held;
    if (held !== undefined) {
      this.#held = undefined;
      return held;
    }
    while (this.#source) {
      const next = this.#source.next();
      if (!next.done) return next.value;
      this.#endSource();
    }
    if (this.#queueHead === this.#queue.length) return undefined;
    const frame = this.#queue[this.#queueHead++] as Frame;
    this.#queuedBytes -= frame.bytes;
    if (this.#queueHead === this.#queue.length) {
      this.#queue.length = 0;
      this.#queueHead = 0;
    }
    return frame;
  }

  #endSource(): void {
    this.#source = undefined;
    if (this.#inSnapshot) {
      this.#inSnapshot = false;
      this.#p.frames.end();
    }
  }

  *#snapshot(epoch: string, from: number, reset: string | undefined): Generator<Frame> {
    if (reset !== undefined) yield textFrame(`event: reset\ndata: ${JSON.stringify({reason: reset, message: 'the requested Last-Event-ID is no longer in this server\'s history; a fresh snapshot follows, replace what you hold'})}\n\n`);
    const {matches, selector, frames} = this.#p;
    // Matching reads labels only, which the stored entry and its view share.
    for (const [name, stored] of this.#p.inventory.storedEntries()) {
      if (matches(stored, selector)) yield frames.frame(name, stored);
    }
    // The snapshot reflects at least every change up to `from`; later ones follow from the queue.
    yield textFrame(`id: ${eventId(epoch, from)}\nevent: synced\ndata: ${JSON.stringify({snapshot: reset === undefined ? 'initial' : 'fresh'})}\n\n`);
  }

  /**
   * What changed after the client's id `from`, one event per name in the order of its last
   * change, each from the entry's current state: a put when it matches, else a delete when any
   * state it had since `from` matched (the client may hold any of them, see below).
   *
   * An event's id is where a client cut off right after it can resume: it then holds the names
   * sent so far in a state they had since, and the others as before their first change, so the
   * id is just before the earliest first change of a name not sent yet (at most the event's own
   * change). Where that is no later than the previous id the event has none, and a client cut
   * off there resumes from the previous one. (The id of the last change alone, and a delete
   * judged by the state before the first change alone, let a client resume past a change it
   * never got: an entry deleted or relabelled away again was then never deleted from what it held.)
   */
  *#replay(changes: readonly LoggedChange[], epoch: string, from: number, to: number): Generator<Frame> {
    const {matches, selector, inventory} = this.#p;
    const first = new Map<string, number>();
    const last = new Map<string, number>();
    const matchedSince = new Set<string>();
    for (const change of changes) {
      if (change.id > to) break;
      if (!first.has(change.name)) first.set(change.name, change.id);
      last.delete(change.name);
      last.set(change.name, change.id);
      if (change.previous && !matchedSince.has(change.name) && matches(change.previous, selector)) matchedSince.add(change.name);
    }
    const names = [...last];
    // firstLater[i]: the earliest first change among the names after position i.
    const firstLater: number[] = Array.from({length: names.length});
    let earliest = Infinity;
    for (let i = names.length - 1; i >= 0; i--) {
      firstLater[i] = earliest;
      earliest = Math.min(earliest, first.get((names[i] as [string, number])[0]) ?? Infinity);
    }
    let resumable = from;
    for (const [i, [name, id]] of names.entries()) {
      const current = inventory.get(name);
      const event = current && matches(current, selector) ? `put\ndata: ${JSON.stringify(current)}` : matchedSince.has(name) ? `delete\ndata: ${JSON.stringify({name})}` : undefined;
      if (event === undefined) continue;
      const cut = Math.min(id, (firstLater[i] ?? Infinity) - 1);
      const idLine = cut > resumable ? `id: ${eventId(epoch, cut)}\n` : '';
      if (cut > resumable) resumable = cut;
      yield textFrame(`${idLine}event: ${event}\n\n`);
    }
    yield textFrame(`id: ${eventId(epoch, to)}\nevent: synced\ndata: ${JSON.stringify({snapshot: 'none', resumed: true})}\n\n`);
  }

  #onEvent(event: InventoryEvent): void {
    if (this.#closed) return;
    const {epoch} = this.#p.inventory.changes;
    const {matches, selector} = this.#p;
    const matchedBefore = event.previous !== undefined && matches(event.previous, selector);
    let frame: Frame;
    if (event.type === 'put' && matches(event.server, selector)) frame = putFrame(epoch, event);
    else if (matchedBefore) frame = deleteFrame(epoch, event);
    else return;
    this.#queue.push(frame);
    this.#queuedBytes += frame.bytes;
    if (this.#queuedBytes + this.#res.writableLength > this.#p.limits.maxBufferedBytes) {
      this.#disconnectSlowConsumer();
      return;
    }
    if (!this.#waitingForDrain) this.#p.pump.schedule(this);
  }

  /** A revoked token ends the stream: authorization is not only checked when it opens. */
  #recheckAuth(): void {
    const check = this.#p.stillAuthorized;
    if (check === undefined || this.#checkingAuth) return;
    this.#checkingAuth = true;
    check().then(
      (allowed) => {
        this.#checkingAuth = false;
        if (!allowed && !this.#closed) this.#disconnect('unauthorized', 'the bearer token this watch was opened with is no longer accepted; reconnect with a valid token (and Last-Event-ID to resume)');
      },
      () => {
        // The check itself failed (not a refusal): keep the stream and ask again next interval.
        this.#checkingAuth = false;
      },
    );
  }

  #disconnectSlowConsumer(): void {
    this.#disconnect('slow_consumer', `this watcher fell more than ${this.#p.limits.maxBufferedBytes} bytes behind (http.watch.max_buffered_bytes) and is disconnected; reconnect with Last-Event-ID to resume`);
  }

  /** Ends the stream with a final `error` event saying why. */
  #disconnect(reason: string, message: string): void {
    const res = this.#res;
    this.close();
    res.end(`event: error\ndata: ${JSON.stringify({reason, message})}\n\n`);
    // A client that never reads would hold the socket (and its buffer) forever.
    const timer = setTimeout(() => res.destroy(), this.#p.limits.closeGraceMs);
    timer.unref();
    res.once('close', () => clearTimeout(timer));
  }
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** `<epoch>-<n>` of this inventory → n; anything else (another process, garbage) → undefined. */
function parseEventId(text: string, epoch: string): number | undefined {
  const dash = text.lastIndexOf('-');
  if (dash < 0 || text.slice(0, dash) !== epoch) return undefined;
  const digits = text.slice(dash + 1);
  if (!/^\d{1,15}$/.test(digits)) return undefined;
  return Number(digits);
}
