/**
 * `GET /v1/watch`: server-sent events of the inventory, bounded per watcher and in number.
 *
 * - The snapshot is read lazily from the inventory as the socket drains (`write()` false →
 *   wait for `drain`), never copied or buffered whole per watcher.
 * - Live events are serialized once and the same text is queued for every watcher; a
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

/** The running watchers of one HTTP server. */
export class WatchStreams {
  readonly #inventory: Inventory;
  readonly #limits: WatchLimits;
  readonly #matches: (server: KubeServer, selector: Selector) => boolean;
  readonly #open = new Set<WatchStream>();
  /** Snapshot frames shared by concurrent snapshots; dropped when no watcher remains. */
  #snapshotFrames = new WeakMap<KubeServer, string>();

  constructor(inventory: Inventory, limits: WatchLimits, matches: (server: KubeServer, selector: Selector) => boolean) {
    this.#inventory = inventory;
    this.#limits = limits;
    this.#matches = matches;
  }

  /** Watchers currently connected. */
  get size(): number {
    return this.#open.size;
  }

  /** Answers one watch request: 429 over the limit, else an event stream until either side closes. */
  open(req: IncomingMessage, res: ServerResponse, selector: Selector): void {
    if (this.#open.size >= this.#limits.maxWatchers) {
      const body = JSON.stringify({error: 'too_many_watchers', message: `this server already has ${this.#open.size} watchers (http.watch.max_watchers); retry later`});
      res.writeHead(429, {'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'retry-after': '5'});
      res.end(body);
      return;
    }
    const lastEventId = header(req.headers['last-event-id']);
    const stream: WatchStream = new WatchStream(this.#inventory, this.#limits, res, selector, this.#matches, (server) => this.#snapshotFrame(server), () => {
      if (this.#open.delete(stream) && this.#open.size === 0) this.#snapshotFrames = new WeakMap();
    });
    this.#open.add(stream);
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
  }

  #snapshotFrame(server: KubeServer): string {
    let frame = this.#snapshotFrames.get(server);
    if (frame === undefined) {
      frame = `event: put\ndata: ${JSON.stringify(server)}\n\n`;
      this.#snapshotFrames.set(server, frame);
    }
    return frame;
  }
}

/** Bytes one watcher may write in one turn of the event loop before letting other work run. */
const FLUSH_TURN_BYTES = 64 * 1024;

/** Live-event frames, serialized once per event and shared by every watcher that sends them. */
const putFrames = new WeakMap<InventoryEvent, string>();
const deleteFrames = new WeakMap<InventoryEvent, string>();

function eventId(epoch: string, id: number): string {
  return `${epoch}-${id}`;
}

function putFrame(epoch: string, event: InventoryEvent & {type: 'put'}): string {
  let frame = putFrames.get(event);
  if (frame === undefined) {
    frame = `id: ${eventId(epoch, event.id)}\nevent: put\ndata: ${JSON.stringify(event.server)}\n\n`;
    putFrames.set(event, frame);
  }
  return frame;
}

function deleteFrame(epoch: string, event: InventoryEvent): string {
  let frame = deleteFrames.get(event);
  if (frame === undefined) {
    const name = event.type === 'put' ? event.server.metadata.name : event.name;
    frame = `id: ${eventId(epoch, event.id)}\nevent: delete\ndata: ${JSON.stringify({name})}\n\n`;
    deleteFrames.set(event, frame);
  }
  return frame;
}

/** One watcher: a source of frames (snapshot or replay), then its queue of live frames. */
class WatchStream {
  readonly #inventory: Inventory;
  readonly #limits: WatchLimits;
  readonly #res: ServerResponse;
  readonly #selector: Selector;
  readonly #matches: (server: KubeServer, selector: Selector) => boolean;
  readonly #snapshotFrame: (server: KubeServer) => string;
  readonly #onClosed: () => void;
  /** Frames to send before the live queue: the snapshot or the replay, ending with `synced`. */
  #source: Iterator<string> | undefined;
  readonly #queue: string[] = [];
  #queueHead = 0;
  #queuedBytes = 0;
  #waitingForDrain = false;
  /** A flush is scheduled for the next turn of the event loop. */
  #yielded = false;
  #closed = false;
  #unsubscribe: (() => void) | undefined;
  #keepalive: ReturnType<typeof setInterval> | undefined;

  constructor(
    inventory: Inventory,
    limits: WatchLimits,
    res: ServerResponse,
    selector: Selector,
    matches: (server: KubeServer, selector: Selector) => boolean,
    snapshotFrame: (server: KubeServer) => string,
    onClosed: () => void,
  ) {
    this.#onClosed = onClosed;
    this.#inventory = inventory;
    this.#limits = limits;
    this.#res = res;
    this.#selector = selector;
    this.#matches = matches;
    this.#snapshotFrame = snapshotFrame;
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
    const {epoch, log} = this.#inventory.changes;
    // Subscribe before reading anything, so no change between the snapshot (or replay) and the live stream is lost.
    const from = log.lastId;
    this.#unsubscribe = this.#inventory.subscribe((event) => this.#onEvent(event));
    this.#res.writeHead(200, {'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive'});
    const resumed = lastEventId === undefined ? undefined : parseEventId(lastEventId, epoch);
    const changes = resumed === undefined ? undefined : log.since(resumed);
    if (changes !== undefined) {
      this.#source = this.#replay(changes, epoch, from);
    } else {
      const reason = lastEventId === undefined ? undefined : resumed === undefined ? 'unknown_event_id' : 'history_expired';
      this.#source = this.#snapshot(epoch, from, reason);
    }
    this.#keepalive = setInterval(() => {
      // Only an idle, drained stream gets a keep-alive: it must never add to a blocked buffer.
      if (!this.#waitingForDrain && this.#source === undefined && this.#queueHead === this.#queue.length) this.#res.write(': keepalive\n\n');
    }, this.#limits.keepaliveMs);
    this.#keepalive.unref();
    this.#flush();
  }

  /** Stops sending; the socket is already closing. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe?.();
    if (this.#keepalive) clearInterval(this.#keepalive);
    this.#queue.length = 0;
    this.#queueHead = 0;
    this.#queuedBytes = 0;
    this.#source = undefined;
    this.#onClosed();
  }

  /** Ends the stream politely (server shutdown). */
  end(): void {
    this.close();
    this.#res.end();
  }

  *#snapshot(epoch: string, from: number, reset: string | undefined): Generator<string> {
    if (reset !== undefined) yield `event: reset\ndata: ${JSON.stringify({reason: reset, message: 'the requested Last-Event-ID is no longer in this server\'s history; a fresh snapshot follows, replace what you hold'})}\n\n`;
    for (const server of this.#inventory.values()) {
      if (this.#matches(server, this.#selector)) yield this.#snapshotFrame(server);
    }
    // The snapshot reflects at least every change up to `from`; later ones follow from the queue.
    yield `id: ${eventId(epoch, from)}\nevent: synced\ndata: ${JSON.stringify({snapshot: reset === undefined ? 'initial' : 'fresh'})}\n\n`;
  }

  /**
   * What changed after the client's id, one event per name in the order of its last change,
   * each from the entry's current state: a client cut off mid-replay resumes correctly from
   * the last id it saw.
   */
  *#replay(changes: readonly LoggedChange[], epoch: string, to: number): Generator<string> {
    const first = new Map<string, LoggedChange>();
    const last = new Map<string, number>();
    for (const change of changes) {
      if (change.id > to) break;
      if (!first.has(change.name)) first.set(change.name, change);
      last.delete(change.name);
      last.set(change.name, change.id);
    }
    for (const [name, id] of last) {
      const current = this.#inventory.get(name);
      const before = first.get(name)?.previous;
      if (current && this.#matches(current, this.#selector)) {
        yield `id: ${eventId(epoch, id)}\nevent: put\ndata: ${JSON.stringify(current)}\n\n`;
      } else if (before && this.#matches(before, this.#selector)) {
        yield `id: ${eventId(epoch, id)}\nevent: delete\ndata: ${JSON.stringify({name})}\n\n`;
      }
    }
    yield `id: ${eventId(epoch, to)}\nevent: synced\ndata: ${JSON.stringify({snapshot: 'none', resumed: true})}\n\n`;
  }

  #onEvent(event: InventoryEvent): void {
    if (this.#closed) return;
    const {epoch} = this.#inventory.changes;
    const matchedBefore = event.previous !== undefined && this.#matches(event.previous, this.#selector);
    let frame: string;
    if (event.type === 'put' && this.#matches(event.server, this.#selector)) frame = putFrame(epoch, event);
    else if (matchedBefore) frame = deleteFrame(epoch, event);
    else return;
    this.#queue.push(frame);
    this.#queuedBytes += frame.length;
    if (this.#queuedBytes + this.#res.writableLength > this.#limits.maxBufferedBytes) {
      this.#disconnectSlowConsumer();
      return;
    }
    this.#flush();
  }

  /**
   * Writes until the socket asks to wait (resumes on `drain`) or this turn has written
   * FLUSH_TURN_BYTES (resumes on the next turn): a client that reads as fast as loopback lets it
   * would otherwise take its whole snapshot in one turn of the event loop, and /healthz with it.
   */
  #flush(): void {
    if (this.#yielded) return;
    let written = 0;
    while (!this.#closed && !this.#waitingForDrain) {
      if (written >= FLUSH_TURN_BYTES) {
        this.#yielded = true;
        setImmediate(() => {
          this.#yielded = false;
          this.#flush();
        });
        return;
      }
      let frame: string | undefined;
      if (this.#source) {
        const next = this.#source.next();
        if (next.done) {
          this.#source = undefined;
          continue;
        }
        frame = next.value;
      } else if (this.#queueHead < this.#queue.length) {
        frame = this.#queue[this.#queueHead++] as string;
        this.#queuedBytes -= frame.length;
        if (this.#queueHead === this.#queue.length) {
          this.#queue.length = 0;
          this.#queueHead = 0;
        }
      } else {
        return;
      }
      written += frame.length;
      if (!this.#res.write(frame)) {
        this.#waitingForDrain = true;
        this.#res.once('drain', () => {
          this.#waitingForDrain = false;
          this.#flush();
        });
      }
    }
  }

  #disconnectSlowConsumer(): void {
    const message = `this watcher fell more than ${this.#limits.maxBufferedBytes} bytes behind (http.watch.max_buffered_bytes) and is disconnected; reconnect with Last-Event-ID to resume`;
    const res = this.#res;
    this.close();
    res.end(`event: error\ndata: ${JSON.stringify({reason: 'slow_consumer', message})}\n\n`);
    // A client that never reads would hold the socket (and its buffer) forever.
    const timer = setTimeout(() => res.destroy(), this.#limits.closeGraceMs);
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
