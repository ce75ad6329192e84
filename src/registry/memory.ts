/** In-memory registry backend: for tests and `storage: {type: memory}`; nothing survives the process. */
import {randomUUID} from 'node:crypto';
import type {Clock} from '../core/clock.ts';
import type {Lease, PutOptions, RegistryBackend, RegistryItem, WatchEvent, Watcher} from './backend.ts';
import {LeaseNotFoundError} from './backend.ts';
import {checkInterval, checkTtl, compareKeys} from './local-common.ts';
import {WatchHub} from './watch-hub.ts';

/** Options of the memory backend. */
export interface MemoryBackendOptions {
  readonly clock: Clock;
  /** How often expired leases are purged (and their delete events emitted) without any read; default 1s. */
  readonly purgeIntervalMs?: number;
}

interface StoredEntry {
  readonly value: string;
  readonly lease?: string;
  readonly revision: number;
}

interface StoredLease {
  readonly ttlMs: number;
  expires: number;
  /** The clock's elapsed time at the last keepalive: a lease lapses on elapsed time, so a wall clock step does not expire it. */
  keptAt: number;
  readonly keys: Set<string>;
}

/**
 * Keeps entries and leases in maps. An entry's expiry is its lease's expiry, so a keepalive
 * touches one lease object whatever the number of entries. Watch `fromRevision` is ignored:
 * there is no history, watchers see changes from the moment they subscribe.
 */
export class MemoryBackend implements RegistryBackend {
  readonly name = 'memory';
  readonly #clock: Clock;
  readonly #purgeIntervalMs: number;
  readonly #entries = new Map<string, StoredEntry>();
  readonly #leases = new Map<string, StoredLease>();
  readonly #hub = new WatchHub();
  #revision = 0;
  #closed = false;
  #cancelPurge: (() => void) | undefined;

  constructor(options: MemoryBackendOptions) {
    this.#clock = options.clock;
    this.#purgeIntervalMs = checkInterval(options.purgeIntervalMs);
    this.#schedulePurge();
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.#open();
    checkTtl(ttlMs);
    const id = randomUUID();
    this.#leases.set(id, {ttlMs, expires: this.#clock.now() + ttlMs, keptAt: this.#elapsed(), keys: new Set()});
    return {id, ttlMs};
  }

  async keepAlive(lease: Lease): Promise<void> {
    this.#open();
    const stored = this.#liveLease(lease.id);
    stored.expires = this.#clock.now() + stored.ttlMs;
    stored.keptAt = this.#elapsed();
  }

  async revokeLease(lease: Lease): Promise<void> {
    this.#open();
    const stored = this.#leases.get(lease.id);
    if (stored) this.#hub.emit(this.#dropLeases([[lease.id, stored]]));
  }

  async resumeLease(id: string): Promise<Lease | undefined> {
    this.#open();
    this.purgeExpired();
    const stored = this.#leases.get(id);
    return stored ? {id, ttlMs: stored.ttlMs} : undefined;
  }

  async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
    this.#open();
    this.purgeExpired();
    const leaseId = options?.lease?.id;
    const lease = leaseId === undefined ? undefined : this.#liveLease(leaseId);
    const previous = this.#entries.get(key);
    if (previous?.lease !== undefined && previous.lease !== leaseId) this.#leases.get(previous.lease)?.keys.delete(key);
    const entry: StoredEntry = {value, revision: ++this.#revision, ...(leaseId === undefined ? {} : {lease: leaseId})};
    this.#entries.set(key, entry);
    lease?.keys.add(key);
    const item = this.#item(key, entry, lease);
    this.#hub.emit([{type: 'put', item, ...(options?.document === undefined ? {} : {document: options.document})}]);
    return item;
  }

  async get(key: string): Promise<RegistryItem | undefined> {
    this.#open();
    this.purgeExpired();
    const entry = this.#entries.get(key);
    return entry ? this.#item(key, entry, this.#leaseOf(entry)) : undefined;
  }

  async list(prefix: string): Promise<RegistryItem[]> {
    this.#open();
    this.purgeExpired();
    const items: RegistryItem[] = [];
    for (const [key, entry] of this.#entries) {
      if (key.startsWith(prefix)) items.push(this.#item(key, entry, this.#leaseOf(entry)));
    }
    return items.sort((a, b) => compareKeys(a.key, b.key));
  }

  async delete(key: string): Promise<boolean> {
    this.#open();
    this.purgeExpired();
    const entry = this.#entries.get(key);
    if (!entry) return false;
    this.#entries.delete(key);
    if (entry.lease !== undefined) this.#leases.get(entry.lease)?.keys.delete(key);
    this.#hub.emit([{type: 'delete', key, revision: String(++this.#revision)}]);
    return true;
  }

  async compareAndDelete(key: string, expected: {readonly value: string; readonly lease: string | undefined}): Promise<boolean> {
    this.#open();
    this.purgeExpired();
    const entry = this.#entries.get(key);
    // Nothing awaits between the check and the delete: no other write can come between them.
    if (!entry || entry.value !== expected.value || entry.lease !== expected.lease) return false;
    return this.delete(key);
  }

  /** `fromRevision` is ignored: the memory backend keeps no history. */
  async watch(prefix: string, onEvent: (event: WatchEvent) => void): Promise<Watcher> {
    this.#open();
    return this.#hub.subscribe(prefix, onEvent);
  }

  async ping(): Promise<void> {
    this.#open();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#cancelPurge?.();
    this.#hub.clear();
  }

  /** Deletes expired leases and their entries, emitting a delete event per entry; runs on reads, writes and a timer. */
  purgeExpired(): void {
    if (this.#closed) return;
    const expired = [...this.#leases].filter(([, lease]) => this.#lapsed(lease));
    if (expired.length > 0) this.#hub.emit(this.#dropLeases(expired));
  }

  /** Removes leases with their entries; one revision for the batch, like one etcd transaction. */
  #dropLeases(leases: ReadonlyArray<readonly [string, StoredLease]>): WatchEvent[] {
    const keys: string[] = [];
    for (const [id, lease] of leases) {
      this.#leases.delete(id);
      for (const key of lease.keys) {
        this.#entries.delete(key);
        keys.push(key);
      }
    }
    if (keys.length === 0) return [];
    const revision = String(++this.#revision);
    return keys.sort(compareKeys).map((key) => ({type: 'delete', key, revision}));
  }

  #liveLease(id: string): StoredLease {
    const lease = this.#leases.get(id);
    if (!lease || this.#lapsed(lease)) {
      throw new LeaseNotFoundError(`lease ${id} is expired or unknown to the memory registry`);
    }
    return lease;
  }

  /** Whether a lease went a TTL without a keepalive, on the clock's elapsed time (its wall time without one). */
  #lapsed(lease: StoredLease): boolean {
    return this.#elapsed() - lease.keptAt >= lease.ttlMs;
  }

  #elapsed(): number {
    return this.#clock.elapsed?.() ?? this.#clock.now();
  }

  #leaseOf(entry: StoredEntry): StoredLease | undefined {
    return entry.lease === undefined ? undefined : this.#leases.get(entry.lease);
  }

  #item(key: string, entry: StoredEntry, lease: StoredLease | undefined): RegistryItem {
    return {
      key,
      value: entry.value,
      revision: String(entry.revision),
      ...(entry.lease === undefined ? {} : {lease: entry.lease, expires: lease?.expires ?? 0}),
    };
  }

  #schedulePurge(): void {
    this.#cancelPurge = this.#clock.setTimeout(() => {
      this.purgeExpired();
      if (!this.#closed) this.#schedulePurge();
    }, this.#purgeIntervalMs);
  }

  #open(): void {
    if (this.#closed) throw new Error('memory registry backend is closed; expected an open backend');
  }
}
