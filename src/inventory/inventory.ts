/**
 * The in-memory view of the registry that the HTTP API serves: listed once, then kept
 * current by the backend's watch, and re-listed periodically. When the backend is
 * unreachable it keeps serving the last known inventory (and says so in its state).
 */
import {randomBytes} from 'node:crypto';
import {kubeServerFromItem} from '../../heartbeats/heartbeat.ts';
import {kubeServerPrefix, type KubeServer} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
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
  /** Changes kept for `Last-Event-ID` resumption (default 4096). */
  readonly historySize?: number;
}

/** The live inventory of one discovery group. */
export class Inventory {
  readonly #options: InventoryOptions;
  readonly #prefix: string;
  #servers = new Map<string, KubeServer>();
  #listeners = new Set<(event: InventoryEvent) => void>();
  #watcher: Watcher | undefined;
  #cancelResync: (() => void) | undefined;
  #lastError: string | undefined;
  #synced = false;
  #stopped = false;
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

  /** Lists the registry and starts watching. A failing first listing is reported, not thrown: it is retried on resync. */
  async start(): Promise<void> {
    await this.resync();
    try {
      this.#watcher = await this.#options.backend.watch(this.#prefix, (e) => this.#apply(e));
    } catch (error) {
      this.#fail(error);
    }
    this.#scheduleResync();
  }

  /** Re-lists the registry now, replacing the cached view and emitting the differences. */
  async resync(): Promise<void> {
    try {
      const items = await this.#options.backend.list(this.#prefix);
      const next = new Map<string, KubeServer>();
      for (const item of items) {
        try {
          const server = this.#reuse(item) ?? kubeServerFromItem(item);
          next.set(server.metadata.name, server);
        } catch (error) {
          this.#options.onError?.(error);
        }
      }
      const before = this.#servers;
      this.#servers = next;
      for (const [name, previous] of before) if (!next.has(name)) this.#emit({type: 'delete', id: this.#changes.append(name, previous), name, previous});
      for (const [name, server] of next) {
        const previous = before.get(name);
        if (previous?.metadata.revision !== server.metadata.revision) this.#emit({type: 'put', id: this.#changes.append(name, previous), server, previous});
      }
      this.#synced = true;
      this.#lastError = undefined;
    } catch (error) {
      this.#fail(error);
    }
  }

  /** Live entries sorted by name; entries past their expiry are left out even before the backend purges them. */
  list(): KubeServer[] {
    const now = this.#options.clock.now();
    return [...this.#servers.values()].filter((s) => Date.parse(s.metadata.expires) > now).sort((a, b) => byName(a.metadata.name, b.metadata.name));
  }

  /** Live entries in no particular order, read lazily: a watcher streams its snapshot from here without a copy. */
  *values(): Generator<KubeServer> {
    for (const server of this.#servers.values()) {
      if (Date.parse(server.metadata.expires) > this.#options.clock.now()) yield server;
    }
  }

  /** One live entry. */
  get(name: string): KubeServer | undefined {
    const server = this.#servers.get(name);
    return server && Date.parse(server.metadata.expires) > this.#options.clock.now() ? server : undefined;
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
   * The entry already held for an unchanged item (same revision), with its expiry brought up to
   * date: a re-list then parses only what changed instead of every document again.
   */
  #reuse(item: RegistryItem): KubeServer | undefined {
    const held = this.#servers.get(item.key.slice(this.#prefix.length));
    if (held?.metadata.revision !== item.revision) return undefined;
    if (item.expires === undefined) return held;
    const expires = new Date(item.expires).toISOString();
    return expires === held.metadata.expires ? held : {...held, metadata: {...held.metadata, expires}};
  }

  #apply(event: WatchEvent): void {
    if (event.type === 'put') {
      try {
        const server = kubeServerFromItem(event.item);
        const name = server.metadata.name;
        const previous = this.#servers.get(name);
        this.#servers.set(name, server);
        this.#emit({type: 'put', id: this.#changes.append(name, previous), server, previous});
      } catch (error) {
        this.#options.onError?.(error);
      }
      return;
    }
    const name = event.key.slice(this.#prefix.length);
    const previous = this.#servers.get(name);
    if (previous && this.#servers.delete(name)) this.#emit({type: 'delete', id: this.#changes.append(name, previous), name, previous});
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
    this.#lastError = (error as Error).message ?? String(error);
    this.#options.onError?.(error);
  }

  #scheduleResync(): void {
    if (this.#stopped) return;
    this.#cancelResync = this.#options.clock.setTimeout(() => {
      void this.resync().finally(() => this.#scheduleResync());
    }, this.#options.resyncMs ?? 30_000);
  }
}

/** Code-unit order: the same order the HTTP page cursor (`name > after`) walks, whatever the locale. */
function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
