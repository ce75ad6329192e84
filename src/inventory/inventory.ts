/**
 * The in-memory view of the registry that the HTTP API serves: listed once, then kept
 * current by the backend's watch, and re-listed periodically. When the backend is
 * unreachable it keeps serving the last known inventory (and says so in its state).
 *
 * Readers never see a gap: an entry leaves the view only when the backend says so (a delete
 * event, or a successful listing without it), never because the `expires` cached at the last
 * listing has passed — keepalives extend the lease, not the stored document, and the owner's
 * lease is what readers follow (`leaseKeptAlive`). A stored document that cannot be read keeps
 * the last good copy of its entry instead of dropping it.
 */
import {randomBytes} from 'node:crypto';
import {kubeServerFromDocument, kubeServerPrefix, type KubeServer} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import {errorMessage} from '../core/errors.ts';
import {intern} from '../core/intern.ts';
import type {RegistryBackend, RegistryItem, WatchEvent, Watcher} from '../registry/backend.ts';
import {ChangeLog} from './change-log.ts';

/**
 * A change of the inventory, as /v1/watch streams it: `id` numbers it in this inventory's
 * change log, `previous` is the entry it replaced (so a filtered watcher can tell an entry
 * leaving its filter from one that never matched).
 */
export type InventoryEvent =
  | {readonly type: 'put'; readonly id: number; readonly server: KubeServer; readonly previous: KubeServer | undefined}
  | {readonly type: 'delete'; readonly id: number; readonly name: string; readonly previous: KubeServer};

/** Changes remembered for watch resumption unless configured. */
export const DEFAULT_WATCH_HISTORY = 4096;

/** Options of an Inventory. */
export interface InventoryOptions {
  readonly backend: RegistryBackend;
  readonly group: string;
  readonly clock: Clock;
  /** Full re-list period; catches writes of other processes and lapsed expiries. */
  readonly resyncMs?: number;
  readonly onError?: (error: unknown) => void;
  /** Called after a listing succeeded again, so a health tracker sees recovery. */
  readonly onReadOk?: () => void;
  /** Changes kept for `Last-Event-ID` resumption (default 4096). */
  readonly historySize?: number;
}

/** The live inventory of one discovery group. */
export class Inventory {
  readonly #options: InventoryOptions;
  readonly #prefix: string;
  #servers = new Map<string, KubeServer>();
  /** Lease of each entry, and the latest expiry known per lease (listings and keepalives). */
  #leaseOf = new Map<string, string>();
  readonly #leaseExpiry = new Map<string, number>();
  #staleSince: number | undefined;
  #lastExpires: {readonly ms: number; readonly text: string} | undefined;
  #unreadable = 0;
  #listeners = new Set<(event: InventoryEvent) => void>();
  #watcher: Watcher | undefined;
  #cancelResync: (() => void) | undefined;
  #lastError: string | undefined;
  #synced = false;
  #stopped = false;
  /**
   * Per listing on its way, the names the watch changed meanwhile: there the watch is newer than the
   * listing (read before those writes), so the listing must not undo them.
   */
  readonly #changedWhileListing = new Set<Set<string>>();
  /**
   * Listings started, and the number of the last one whose result became the view. Re-lists can
   * overlap (the periodic one, the one after a watch gap, a read fault's): a listing that answers
   * after a later-started one was applied is older than the view and is dropped, or a cluster that
   * reached the view only through the later one (registered during a watch gap) would leave it.
   */
  #listingsStarted = 0;
  #listingApplied = 0;
  readonly #changes: ChangeLog;
  /** Distinguishes this process's change numbering from another's (a restart starts again at 1). */
  readonly #epoch = randomBytes(4).toString('hex');

  constructor(options: InventoryOptions) {
    this.#options = options;
    this.#prefix = kubeServerPrefix(options.group);
    this.#changes = new ChangeLog(options.historySize ?? DEFAULT_WATCH_HISTORY);
  }

  /** The change history and its epoch, which /v1/watch event ids are made of. */
  get changes(): {readonly epoch: string; readonly log: ChangeLog} {
    return {epoch: this.#epoch, log: this.#changes};
  }

  /** Whether the first listing succeeded. */
  get synced(): boolean {
    return this.#synced;
  }

  /** The last error reading the backend, cleared by the next success. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** Epoch ms since which reads have failed and the last inventory read is served; undefined when current. */
  get staleSince(): number | undefined {
    return this.#staleSince;
  }

  /** Stored documents the last listing could not read (their last good copy is served). */
  get unreadable(): number {
    return this.#unreadable;
  }

  /** A keepalive extended `lease` to `expiresMs`: entries on it show that expiry. */
  leaseKeptAlive(lease: string, expiresMs: number): void {
    if ((this.#leaseExpiry.get(lease) ?? 0) < expiresMs) this.#leaseExpiry.set(lease, expiresMs);
  }

  /**
   * Starts watching, then lists the registry. A failing first listing is reported, not thrown: it is
   * retried on resync. The watch goes first: listed first, an entry written between the listing
   * and the watch's start (the leader's cycle while a replica starts) was in neither until the next
   * re-list; written now while the listing runs, the watch's event is kept over the listing.
   */
  async start(): Promise<void> {
    await this.#watch();
    await this.resync();
    this.#scheduleResync();
  }

  /** Opens the watch. Refused (the registry not up yet), it is reported and opened again before the next re-list. */
  async #watch(): Promise<void> {
    try {
      // A watch that went on after changes it could not deliver (etcd's history compacted meanwhile): list again at once.
      const watcher = await this.#options.backend.watch(this.#prefix, (e) => this.#apply(e), {onGap: () => void this.#relist()});
      if (this.#stopped) await watcher.close();
      else this.#watcher = watcher;
    } catch (error) {
      this.#fail(error);
    }
  }

  #relist(): Promise<void> {
    return this.#stopped ? Promise.resolve() : this.resync();
  }

  /** Re-lists the registry now, replacing the cached view and emitting the differences. */
  async resync(): Promise<void> {
    const listing = ++this.#listingsStarted;
    const changed = new Set<string>();
    this.#changedWhileListing.add(changed);
    try {
      const items = await this.#listing();
      this.#changedWhileListing.delete(changed);
      if (listing < this.#listingApplied) return;
      const next = new Map<string, KubeServer>();
      const leases = new Map<string, string>();
      let unreadable = 0;
      for (const item of items) {
        const name = item.key.slice(this.#prefix.length);
        try {
          const server = this.#reuse(item, name) ?? readServer(item, name, undefined, this.#expiresText);
          // Keyed by the document's own name (equal, checked): the slice of the key would keep the whole key text alive.
          next.set(server.metadata.name, server);
          this.#noteLease(server.metadata.name, item, leases);
        } catch (error) {
          // Malformed is not absent: keep serving the last good copy of this entry.
          unreadable++;
          const previous = this.#servers.get(name);
          if (previous) {
            next.set(name, previous);
            const lease = this.#leaseOf.get(name);
            if (lease !== undefined) leases.set(name, lease);
          }
          this.#options.onError?.(error);
        }
      }
      // A write the watch delivered while the listing was on its way: the entry stays as the watch left it.
      for (const name of changed) {
        const held = this.#servers.get(name);
        const lease = this.#leaseOf.get(name);
        if (held) next.set(name, held);
        else next.delete(name);
        if (held && lease !== undefined) leases.set(name, lease);
        else leases.delete(name);
      }
      const before = this.#servers;
      this.#listingApplied = listing;
      this.#servers = next;
      this.#leaseOf = leases;
      this.#unreadable = unreadable;
      const live = new Set(leases.values());
      for (const id of this.#leaseExpiry.keys()) if (!live.has(id)) this.#leaseExpiry.delete(id);
      for (const [name, previous] of before) if (!next.has(name)) this.#emit({type: 'delete', id: this.#changes.append(name, previous), name, previous});
      for (const [name, server] of next) {
        const previous = before.get(name);
        if (previous?.metadata.revision !== server.metadata.revision) this.#emit({type: 'put', id: this.#changes.append(name, previous), server, previous});
      }
      this.#synced = true;
      this.#lastError = undefined;
      this.#staleSince = undefined;
      // Unreadable documents stay a read fault (reported above) until they are fixed.
      if (unreadable === 0) this.#options.onReadOk?.();
    } catch (error) {
      this.#fail(error);
    } finally {
      this.#changedWhileListing.delete(changed);
    }
  }

  /** Entries sorted by name, with the expiry of their owner's lease as last known. */
  list(): KubeServer[] {
    return [...this.#servers.keys()].sort(byName).map((name) => this.#view(name));
  }

  /** Entries in no particular order, read lazily: a watcher streams its snapshot from here without a copy. */
  *values(): Generator<KubeServer> {
    for (const name of this.#servers.keys()) yield this.#view(name);
  }

  /**
   * Entries as stored, without values()'s copies: a cache keyed by the stored object stays valid
   * until the entry is replaced or its lease's expiry (leaseExpiryOf) moves.
   */
  storedEntries(): MapIterator<[string, KubeServer]> {
    return this.#servers.entries();
  }

  /** The latest known expiry (epoch ms) of the lease entry `name` is on; get() and values() show it when later than the stored one. */
  leaseExpiryOf(name: string): number | undefined {
    const lease = this.#leaseOf.get(name);
    return lease === undefined ? undefined : this.#leaseExpiry.get(lease);
  }

  /**
   * The parsed document of `name` exactly as stored at `revision` (expiry as last listed), or
   * undefined when the view holds another revision: a writer shares this copy instead of keeping one.
   */
  stored(name: string, revision: string): KubeServer | undefined {
    const server = this.#servers.get(name);
    return server?.metadata.revision === revision ? server : undefined;
  }

  /** Whether the stored entry `name` hangs on `lease` (false: on another or on none); undefined when there is no such entry. */
  storedOnLease(name: string, lease: string): boolean | undefined {
    return this.#servers.has(name) ? this.#leaseOf.get(name) === lease : undefined;
  }

  /** One entry. */
  get(name: string): KubeServer | undefined {
    return this.#servers.has(name) ? this.#view(name) : undefined;
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe(listener: (event: InventoryEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Stops watching and resyncing. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancelResync?.();
    await this.#watcher?.close();
    this.#listeners.clear();
  }

  /**
   * The group's entries. A backend that can list without the documents (sqlite) is asked that
   * first: when every revision is one already held (the usual case, its own writes reach the view
   * through the watch) no document is read at all — at 50,000 entries a full listing reads ~125 MB
   * of JSON text every resync. Anything changed or new gets the full listing, as without it.
   */
  async #listing(): Promise<RegistryItem[]> {
    const {backend} = this.#options;
    if (backend.listMeta && this.#servers.size > 0) {
      const meta = await backend.listMeta(this.#prefix);
      if (meta.every((item) => this.#servers.get(item.key.slice(this.#prefix.length))?.metadata.revision === item.revision)) return meta;
    }
    return backend.list(this.#prefix);
  }

  /**
   * The entry already held for an unchanged item (same revision), with its expiry brought up to
   * date: a re-list then parses only what changed instead of every document again.
   */
  #reuse(item: RegistryItem, name: string): KubeServer | undefined {
    const held = this.#servers.get(name);
    if (held?.metadata.revision !== item.revision) return undefined;
    if (item.expires === undefined) return held;
    const expires = this.#expiresText(item.expires);
    // On a lease, readers see its latest expiry (#view, from noteLease): a later one needs no copy.
    // A copy per entry every resync left the heartbeat (and the cycle) holding the previous one.
    if (expires === held.metadata.expires || (item.lease !== undefined && expires > held.metadata.expires)) return held;
    return {...held, metadata: {...held.metadata, expires}};
  }

  #apply(event: WatchEvent): void {
    if (event.type === 'put') {
      try {
        const name = event.item.key.slice(this.#prefix.length);
        // A local backend hands on the writer's object: share it instead of parsing the text again.
        const server = readServer(event.item, name, event.document, this.#expiresText);
        const previous = this.#servers.get(name);
        this.#servers.set(server.metadata.name, server);
        this.#noteLease(server.metadata.name, event.item, this.#leaseOf);
        for (const changed of this.#changedWhileListing) changed.add(name);
        this.#emit({type: 'put', id: this.#changes.append(name, previous), server, previous});
      } catch (error) {
        this.#options.onError?.(error);
      }
      return;
    }
    const name = event.key.slice(this.#prefix.length);
    for (const changed of this.#changedWhileListing) changed.add(name);
    this.#leaseOf.delete(name);
    const previous = this.#servers.get(name);
    if (previous && this.#servers.delete(name)) this.#emit({type: 'delete', id: this.#changes.append(name, previous), name, previous});
  }

  #noteLease(name: string, item: RegistryItem, into: Map<string, string>): void {
    if (item.lease === undefined) {
      into.delete(name);
      return;
    }
    // Every entry of a replica hangs on one lease: one copy of its id, not one per entry.
    into.set(name, intern(item.lease));
    if (item.expires !== undefined) this.leaseKeptAlive(item.lease, item.expires);
  }

  /** RFC 3339 text of an expiry; entries on one lease share it, so the last one is reused. */
  readonly #expiresText = (ms: number): string => {
    if (this.#lastExpires?.ms !== ms) this.#lastExpires = {ms, text: new Date(ms).toISOString()};
    return this.#lastExpires.text;
  };

  /** The stored entry with `expires` moved to its lease's latest known expiry. */
  #view(name: string): KubeServer {
    const server = this.#servers.get(name) as KubeServer;
    const lease = this.#leaseOf.get(name);
    const expires = lease === undefined ? undefined : this.#leaseExpiry.get(lease);
    if (expires === undefined || expires <= Date.parse(server.metadata.expires)) return server;
    return {...server, metadata: {...server.metadata, expires: this.#expiresText(expires)}};
  }

  #emit(event: InventoryEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (error) {
        this.#options.onError?.(error);
      }
    }
  }

  #fail(error: unknown): void {
    this.#lastError = errorMessage(error);
    this.#staleSince ??= this.#options.clock.now();
    this.#options.onError?.(error);
  }

  #scheduleResync(): void {
    if (this.#stopped) return;
    this.#cancelResync = this.#options.clock.setTimeout(() => {
      // The watch first, as at start: a re-list after it misses nothing written in between.
      void (this.#watcher === undefined ? this.#watch() : Promise.resolve())
        .then(() => this.resync())
        .finally(() => this.#scheduleResync());
    }, this.#options.resyncMs ?? 30_000);
  }
}

/** Code-unit order: the same order the HTTP page cursor (`name > after`) walks, whatever the locale. */
function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The stored text of an item, parsed; throws naming the key (as kubeServerFromItem does) when it is not JSON. */
function parseItem(item: RegistryItem): unknown {
  try {
    return JSON.parse(item.value);
  } catch (error) {
    throw new Error(`registry entry ${item.key} is not valid JSON: ${errorMessage(error)}`, {cause: error});
  }
}

/** A stored kube_server whose document is well-formed and names the entry it is stored under. */
function readServer(item: RegistryItem, name: string, document?: unknown, expiresText?: (ms: number) => string): KubeServer {
  const server = document === undefined ? kubeServerFromDocument(item, parseItem(item), expiresText) : kubeServerFromDocument(item, document, expiresText);
  const meta = (server as {metadata?: {name?: unknown}}).metadata;
  const spec = (server as {spec?: {cluster?: unknown}}).spec;
  if (meta?.name !== name || typeof spec?.cluster !== 'object' || spec.cluster === null) {
    throw new Error(`registry entry ${item.key}: expected a kube_server named ${JSON.stringify(name)} with spec.cluster, found a malformed document`);
  }
  return server;
}
