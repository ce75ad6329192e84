/** The registry contract every backend (memory, sqlite, etcd) implements and the contract suite checks. */
import type {Fence} from './fence.ts';

/** A lease groups entries that expire together; keeping it alive is one call whatever the number of entries. */
export interface Lease {
  /** Backend-assigned id (etcd lease id, or a generated id for memory/sqlite). */
  readonly id: string;
  readonly ttlMs: number;
}

/** A lease is unknown or expired (keepAlive, put with a lease): the holder must grant a new one and re-announce. */
export class LeaseNotFoundError extends Error {
  override readonly name = 'LeaseNotFoundError';
}

/** One stored entry. */
export interface RegistryItem {
  readonly key: string;
  /** The stored document (JSON text for kube_servers). */
  readonly value: string;
  /** Epoch ms after which the entry is gone; undefined for entries without a lease. */
  readonly expires?: number;
  /** Lease the entry is attached to, if any. */
  readonly lease?: string;
  /** Monotonic revision of the last write of this entry (etcd mod_revision or a backend counter), as a decimal string. */
  readonly revision: string;
}

/** A change seen by a watcher. Deletes include expiry and lease revocation. */
export type WatchEvent =
  | {
      readonly type: 'put';
      readonly item: RegistryItem;
      /** The writer's own object for `item.value` (`PutOptions.document`), when the backend handed it on. */
      readonly document?: unknown;
    }
  | {readonly type: 'delete'; readonly key: string; readonly revision: string};

/** Where a watch starts, and whom it tells of changes it lost. */
export interface WatchOptions {
  readonly fromRevision?: string;
  readonly onGap?: () => void;
}

/** A running watch; `close` stops it. */
export interface Watcher {
  close(): Promise<void>;
}

/** Options of any write (put, delete, revokeLease). */
export interface WriteOptions {
  /**
   * Throws (FencedError) once this writer may no longer write. A backend whose writes can wait
   * before they are sent (a rate-limit queue, a retry after a conflict) calls it right before each
   * request goes out: checked only when the write was asked for, a leader deposed meanwhile would
   * still write after its successor.
   */
  readonly fence?: () => void;
}

/** Options of a put. */
export interface PutOptions extends WriteOptions {
  /** Attach the entry to this lease: it expires with the lease. */
  readonly lease?: Lease;
  /**
   * The object `value` is the JSON text of. Never stored; backends that deliver their own writes to
   * in-process watchers (memory, sqlite) pass it with the put event, so a reader shares the writer's
   * object instead of parsing a second copy of the text.
   */
  readonly document?: unknown;
}

/** The storage behind the registry. */
export interface RegistryBackend {
  /** Backend name for logs and /v1/status (`memory`, `sqlite`, `etcd`). */
  readonly name: string;
  /**
   * True when a lease stays alive as long as its holder keeps calling keepAlive, even when a call
   * fails to record it (sqlite: the process is the only writer). The heartbeat then never gives up
   * such a lease because of a failing disk.
   */
  readonly leasesFollowHolder?: boolean;
  /** Creates a lease that expires `ttlMs` from now unless kept alive. */
  grantLease(ttlMs: number): Promise<Lease>;
  /** Extends the lease to now + its TTL; throws when the lease has already expired or is unknown. */
  keepAlive(lease: Lease): Promise<void>;
  /** Ends the lease and deletes every entry attached to it; resolves when the lease is already gone. */
  revokeLease(lease: Lease, options?: WriteOptions): Promise<void>;
  /**
   * The still-valid lease with this id (without extending it), or undefined when it expired or is unknown.
   * Lets a restarted replica adopt its own lease instead of re-writing every entry.
   */
  resumeLease?(id: string): Promise<Lease | undefined>;
  /**
   * True when the lease had lapsed with nobody renewing it and is served alive only for a grace
   * (sqlite: one TTL after open, so the restarted service can resume it): its holder stopped.
   */
  lapsedInGrace?(id: string): boolean;
  /** Creates or replaces an entry. */
  put(key: string, value: string, options?: PutOptions): Promise<RegistryItem>;
  /** One live entry, or undefined (expired entries are never returned). */
  get(key: string): Promise<RegistryItem | undefined>;
  /** Live entries whose key starts with `prefix`, sorted by key. */
  list(prefix: string): Promise<RegistryItem[]>;
  /**
   * Like `list` without the values (`value` is ''), for a reader that already holds most documents
   * and fetches only the revisions it lacks (`get`): at 50,000 entries a full listing reads ~125 MB
   * of JSON text into memory. Backends whose values are in memory anyway (memory) need not have it.
   */
  listMeta?(prefix: string): Promise<RegistryItem[]>;
  /** Deletes an entry; true when it existed. */
  delete(key: string, options?: WriteOptions): Promise<boolean>;
  /**
   * Deletes the entry only while it still holds `expected.value` on `expected.lease` (none: no
   * lease), in one atomic step; true when it did. A process removes a record it wrote without
   * removing the one another process wrote over it since (sqlite: one statement).
   */
  compareAndDelete?(key: string, expected: {readonly value: string; readonly lease: string | undefined}): Promise<boolean>;
  /**
   * Calls `onEvent` for every put/delete under `prefix` from now on (or after `fromRevision`
   * where the backend keeps history). Expired entries produce delete events. `onGap` is told when
   * the watch went on after changes it could not deliver (etcd: a watch restarted after its history
   * was compacted): a reader that keeps a view lists again.
   */
  watch(prefix: string, onEvent: (event: WatchEvent) => void, options?: WatchOptions): Promise<Watcher>;
  /** Cheap liveness check for /readyz; throws with a reason when the backend cannot serve. */
  ping(): Promise<void>;
  /** Releases connections and files; entries stay (they expire on their own). */
  close(): Promise<void>;
  /**
   * A view whose put, delete and revokeLease throw FencedError once `fence` (from the leader
   * election) no longer holds; reads pass through. Only backends shared by replicas (etcd) have it.
   * `onRefused` hears of each write the backend refused because the fence no longer holds.
   */
  withFence?(fence: Fence, onRefused?: (fence: Fence) => void): RegistryBackend;
  /**
   * The replica's host id from a per-replica identity store, created with `create()` only when
   * absent and never overwritten (kubernetes: a Secret per pod). Backends without one store it as an entry.
   */
  hostIdentity?(replica: string, create: () => string): Promise<string>;
}
