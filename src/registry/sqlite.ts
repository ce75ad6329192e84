/** Embedded registry backend on `node:sqlite`: one file that survives restarts and serves the last inventory at once. */
import {randomUUID} from 'node:crypto';
import {mkdirSync, statSync} from 'node:fs';
import {dirname} from 'node:path';
import {DatabaseSync} from 'node:sqlite';
import type {Clock} from '../core/clock.ts';
import type {Lease, PutOptions, RegistryBackend, RegistryItem, WatchEvent, Watcher} from './backend.ts';
import {LeaseNotFoundError} from './backend.ts';
import {checkInterval, checkTtl, prefixEnd} from './local-common.ts';
import {WatchHub} from './watch-hub.ts';
import {errorMessage} from '../core/errors.ts';

/** Options of the sqlite backend. */
export interface SqliteBackendOptions {
  /** Database file; its parent directory is created. `:memory:` gives a throwaway database. */
  readonly path: string;
  readonly clock: Clock;
  /** How often expired leases are purged (and their delete events emitted) without any read; default 1s. */
  readonly purgeIntervalMs?: number;
  /** How long a write waits for another connection's lock before failing; default 5s. */
  readonly busyTimeoutMs?: number;
  /**
   * Background failures (the purge timer, a purge during a read, a deleted database file), for the
   * service to log once per state change; nothing is printed by the backend itself.
   */
  readonly onError?: (error: Error) => void;
  /**
   * Leases that lapsed while the file was closed get one TTL from open to be resumed or re-put (the
   * service sets it). Nobody could renew them while no process ran, and nobody read them lapse (this
   * embedded store's only reader is the process that opens it): purged at open, a restart after
   * more than a TTL down would serve an empty inventory and, with the cloud failing in its first
   * cycle, lose every cluster although no listing lacked one.
   */
  readonly graceOnOpen?: boolean;
}

/** The database file was deleted or replaced under a running process; writes re-create it. */
export class RegistryFileDeletedError extends Error {
  override readonly name = 'RegistryFileDeletedError';
}

/** Most puts committed in one transaction (see put). */
export const MAX_PUT_BATCH = 256;

/**
 * WAL pages a write may leave before SQLite checkpoints inside that write (SQLite's default is
 * 1,000, ~4 MB). A checkpoint copies the log into the file and syncs both: tens of ms of a blocked
 * event loop, which a first cycle writing 2,000 entries (~2,300 pages) paid twice mid-cycle. The
 * log is checkpointed when writes pause instead (see #checkpointWhenQuiet); this bound only
 * matters for writes that never pause. 16,384 pages of 4 KiB: a 64 MiB log at most.
 */
export const WAL_AUTOCHECKPOINT_PAGES = 16_384;

/** Rows and transactions written since the last checkpoint from which a quiet tick checkpoints. */
export const QUIET_CHECKPOINT_WRITES = 256;

/** A checkpointed log is cut back to this size on disk when it restarts (SQLite's default keeps its largest size). */
const WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024;

/** Schema version stored in `PRAGMA user_version`; bump it with a migration step in `migrate`. */
export const SQLITE_SCHEMA_VERSION = 1;

// Entries reference their lease and have no expiry of their own: keeping a lease alive is one
// UPDATE of one row whatever the number of entries. Revisions come from one persisted counter.
const SCHEMA_V1 = `
  CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;
  INSERT INTO meta (name, value) VALUES ('revision', 0);
  CREATE TABLE leases (id TEXT PRIMARY KEY, ttl_ms INTEGER NOT NULL, expires INTEGER NOT NULL) STRICT;
  CREATE INDEX leases_by_expiry ON leases (expires);
  CREATE TABLE entries (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    lease TEXT,
    revision INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX entries_by_lease ON entries (lease) WHERE lease IS NOT NULL;
`;

const ITEM_COLUMNS = 'SELECT e.key, e.value, e.lease, e.revision, l.expires FROM entries e LEFT JOIN leases l ON l.id = e.lease';
/** The same without the document: what a re-list of a reader holding the documents reads. */
const META_COLUMNS = "SELECT e.key, '' AS value, e.lease, e.revision, l.expires FROM entries e LEFT JOIN leases l ON l.id = e.lease";

interface ItemRow {
  key: string;
  value: string;
  lease: string | null;
  revision: number;
  expires: number | null;
}

/** The prepared statements, built once per connection. */
function prepareStatements(db: DatabaseSync) {
  return {
    nextRevision: db.prepare(`UPDATE meta SET value = value + 1 WHERE name = 'revision' RETURNING value`),
    reserveRevisions: db.prepare(`UPDATE meta SET value = value + $count WHERE name = 'revision' RETURNING value`),
    insertLease: db.prepare('INSERT INTO leases (id, ttl_ms, expires) VALUES ($id, $ttl, $expires)'),
    keepAlive: db.prepare('UPDATE leases SET expires = $now + ttl_ms WHERE id = $id AND expires > $now'),
    // A lease this process kept alive through a failing disk may look expired on disk; it is not.
    keepAliveHeld: db.prepare('UPDATE leases SET expires = $now + ttl_ms WHERE id = $id'),
    lapsedLeases: db.prepare('SELECT id, ttl_ms FROM leases WHERE expires <= $now'),
    liveLease: db.prepare('SELECT ttl_ms, expires FROM leases WHERE id = $id AND expires > $now'),
    expiredLeases: db.prepare('SELECT id FROM leases WHERE expires <= $now'),
    leaseKeys: db.prepare('SELECT key FROM entries WHERE lease = $id ORDER BY key'),
    deleteLeaseEntries: db.prepare('DELETE FROM entries WHERE lease = $id'),
    deleteLease: db.prepare('DELETE FROM leases WHERE id = $id'),
    upsert: db.prepare(
      `INSERT INTO entries (key, value, lease, revision) VALUES ($key, $value, $lease, $revision)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value, lease = excluded.lease, revision = excluded.revision`,
    ),
    deleteEntry: db.prepare('DELETE FROM entries WHERE key = $key'),
    // `IS` so that an entry without a lease matches a NULL expected lease.
    deleteEntryIf: db.prepare('DELETE FROM entries WHERE key = $key AND value = $value AND lease IS $lease'),
    // Liveness is decided in #live: a lease this process keeps alive counts even when the disk could not record it.
    get: db.prepare(`${ITEM_COLUMNS} WHERE e.key = $key`),
    listAll: db.prepare(`${ITEM_COLUMNS} ORDER BY e.key`),
    listRange: db.prepare(`${ITEM_COLUMNS} WHERE e.key >= $from AND e.key < $to ORDER BY e.key`),
    listFrom: db.prepare(`${ITEM_COLUMNS} WHERE e.key >= $from ORDER BY e.key`),
    metaAll: db.prepare(`${META_COLUMNS} ORDER BY e.key`),
    metaRange: db.prepare(`${META_COLUMNS} WHERE e.key >= $from AND e.key < $to ORDER BY e.key`),
    metaFrom: db.prepare(`${META_COLUMNS} WHERE e.key >= $from ORDER BY e.key`),
    ping: db.prepare('SELECT 1 AS ok'),
    checkpoint: db.prepare('PRAGMA wal_checkpoint(PASSIVE)'),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

/**
 * Registry in a SQLite file (WAL, `synchronous=NORMAL`). Watchers see only this process's
 * writes: the embedded store has a single replica writing it, so that is every write there is.
 * Watch `fromRevision` is ignored: no history is kept.
 */
export class SqliteBackend implements RegistryBackend {
  readonly name = 'sqlite';
  readonly leasesFollowHolder = true;
  /** The database file. */
  readonly path: string;
  #db: DatabaseSync;
  #sql: Statements;
  /** Device and inode of the open file, to notice it being deleted or replaced. */
  #fileId: string | undefined;
  /** The same of its write-ahead log (undefined while read-only): see #rescueDeletedLog. */
  #walId: string | undefined;
  readonly #options: SqliteBackendOptions;
  readonly #clock: Clock;
  readonly #purgeIntervalMs: number;
  readonly #hub = new WatchHub();
  /**
   * Leases this process holds, with the expiry its keepalives gave them. The process is the only
   * writer, so a lease it keeps alive is alive even when the disk (full, read-only) could not record
   * the keepalive: readers and the purge follow the owner, not the last row written. Whether the
   * owner kept one alive within its TTL is judged on elapsed time (`keptAt`, see `#heldAlive`).
   */
  readonly #held = new Map<string, {ttlMs: number; expires: number; keptAt: number; graced?: boolean}>();
  /** Puts waiting for their group's transaction (see put). */
  #pendingPuts: {key: string; value: string; leaseId: string | undefined; document: unknown; resolve: (item: RegistryItem) => void; reject: (error: unknown) => void}[] = [];
  /** Opened read-only (the file system refused writes at open): every stored entry is served as last known. */
  #readOnly = false;
  #closed = false;
  #cancelPurge: (() => void) | undefined;
  /** Rows and transactions written since the last checkpoint (see #checkpointWhenQuiet). */
  #walWrites = 0;
  /** Whether anything was written since the last purge tick. */
  #wroteSinceTick = false;

  /** Opens (creating when missing) and checks the database; fails naming the path when it is corrupt or unwritable. */
  static async open(options: SqliteBackendOptions): Promise<SqliteBackend> {
    const purgeIntervalMs = checkInterval(options.purgeIntervalMs);
    let db: DatabaseSync | undefined;
    try {
      try {
        db = openDatabase(options);
      } catch (err) {
        // A read-only volume still holds the last inventory: serve it, refuse writes until it is writable.
        db = openReadOnly(options.path, err);
        return new SqliteBackend(db, options, purgeIntervalMs, true);
      }
      return new SqliteBackend(db, options, purgeIntervalMs);
    } catch (err) {
      try {
        db?.close();
      } catch {
        // Already failing with the more useful error below.
      }
      throw new Error(`cannot open registry database ${options.path}: ${errorMessage(err)}`, {cause: err});
    }
  }

  private constructor(db: DatabaseSync, options: SqliteBackendOptions, purgeIntervalMs: number, readOnly = false) {
    this.#db = db;
    this.#readOnly = readOnly;
    this.path = options.path;
    this.#options = options;
    this.#clock = options.clock;
    this.#sql = prepareStatements(db);
    this.#fileId = fileId(options.path);
    this.#walId = readOnly || options.path === ':memory:' ? undefined : fileId(walPath(options.path));
    this.#purgeIntervalMs = purgeIntervalMs;
    if (options.graceOnOpen === true && !readOnly) this.#graceLapsedLeases();
    this.#schedulePurge();
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.#open();
    this.#commitPuts();
    checkTtl(ttlMs);
    this.#writable();
    this.#reopenIfDeleted();
    const id = randomUUID();
    const now = this.#clock.now();
    this.#sql.insertLease.run({id, ttl: ttlMs, expires: now + ttlMs});
    this.#wrote(1);
    this.#held.set(id, {ttlMs, expires: now + ttlMs, keptAt: this.#elapsed()});
    return {id, ttlMs};
  }

  /**
   * One UPDATE of the lease row; entries follow because their expiry is their lease's. The held
   * expiry moves first, so a failing disk (the error is still thrown, for the caller to report)
   * never makes a kept-alive entry look expired.
   */
  async keepAlive(lease: Lease): Promise<void> {
    this.#open();
    this.#commitPuts();
    const now = this.#clock.now();
    const held = this.#held.get(lease.id);
    if (held && this.#heldAlive(held)) {
      held.expires = now + held.ttlMs;
      held.keptAt = this.#elapsed();
      delete held.graced;
    }
    this.#writable();
    if (this.#reopenIfDeleted()) {
      this.#held.delete(lease.id);
      throw new LeaseNotFoundError(`lease ${lease.id} was in the deleted registry database ${this.path}; grant a new one and re-announce`);
    }
    const alive = held !== undefined && this.#heldAlive(held);
    const {changes} = (alive ? this.#sql.keepAliveHeld : this.#sql.keepAlive).run({id: lease.id, now});
    this.#wrote(1);
    if (Number(changes) === 0) {
      this.#held.delete(lease.id);
      throw new LeaseNotFoundError(`lease ${lease.id} is expired or unknown to the sqlite registry ${this.path}`);
    }
    if (!held) this.#held.set(lease.id, {ttlMs: lease.ttlMs, expires: now + lease.ttlMs, keptAt: this.#elapsed()});
  }

  async revokeLease(lease: Lease): Promise<void> {
    this.#open();
    this.#commitPuts();
    this.#writable();
    this.#held.delete(lease.id);
    const events = this.#transaction(() => this.#dropLeases([lease.id]));
    this.#hub.emit(events);
  }

  async resumeLease(id: string): Promise<Lease | undefined> {
    this.#open();
    this.#commitPuts();
    const row = this.#sql.liveLease.get({id, now: this.#clock.now()}) as {ttl_ms: number} | undefined;
    if (row) return {id, ttlMs: row.ttl_ms};
    // A lease held alive in memory (kept alive through a failing disk, or given its grace at open) is alive.
    const held = this.#held.get(id);
    return held && this.#heldAlive(held) ? {id, ttlMs: held.ttlMs} : undefined;
  }

  /**
   * Holds every lease that lapsed while the file was closed (see `graceOnOpen`) or read-only alive
   * for one TTL from now, in memory as a kept-alive lease is: nothing is written at open, so a full disk
   * still opens. Not renewed (resumed, or its entries re-put) within that TTL, it is purged as usual.
   */
  #graceLapsedLeases(): void {
    const now = this.#clock.now();
    const keptAt = this.#elapsed();
    for (const row of this.#sql.lapsedLeases.all({now}) as unknown as Array<{id: string; ttl_ms: number}>) {
      // A lease this process holds keeps its own account (alive, or lapsed in its hands).
      if (!this.#held.has(row.id)) this.#held.set(row.id, {ttlMs: row.ttl_ms, expires: now + row.ttl_ms, keptAt, graced: true});
    }
  }

  /**
   * Whether the lease lapsed unrenewed (while the file was closed or read-only) and is alive only by
   * its grace, nobody having kept it alive since: a writer record on it names a process that stopped.
   */
  lapsedInGrace(id: string): boolean {
    const held = this.#held.get(id);
    return held?.graced === true && this.#heldAlive(held);
  }

  /**
   * Puts are committed in groups: those issued in one turn of the event loop (a cycle applies
   * up to 64 at once), at most MAX_PUT_BATCH, share one transaction, instead of a transaction, a
   * purge and a WAL commit each. A put that fails on its own (its lease is gone) fails alone; a failing transaction
   * (disk full) fails every put of its group, none of them written.
   */
  async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
    this.#open();
    this.#writable();
    // Once per group: the puts of one group share a transaction and so a file (a stat per put was
    // a few percent of a first cycle's 10,000 writes).
    const reopened = this.#pendingPuts.length === 0 && this.#reopenIfDeleted();
    const leaseId = options?.lease?.id;
    // The lease went with the deleted file: say so (the same fault, not a new one), so the heartbeat re-grants and re-announces.
    if (reopened && leaseId !== undefined) throw new LeaseNotFoundError(`lease ${leaseId} was in the deleted registry database ${this.path}; grant a new one and re-announce`);
    return new Promise<RegistryItem>((resolve, reject) => {
      this.#pendingPuts.push({key, value, leaseId, document: options?.document, resolve, reject});
      // A full group commits at once: a caller issuing 50,000 puts in one turn must not hold them all.
      if (this.#pendingPuts.length >= MAX_PUT_BATCH) this.#commitPuts();
      else if (this.#pendingPuts.length === 1) setImmediate(() => this.#commitPuts());
    });
  }

  /** Commits the pending puts in one transaction; every other operation calls it first, so operations keep their order. */
  #commitPuts(): void {
    const batch = this.#pendingPuts;
    if (batch.length === 0) return;
    this.#pendingPuts = [];
    let events: WatchEvent[];
    let outcomes: (RegistryItem | LeaseNotFoundError)[];
    try {
      if (this.#closed) throw new Error(`registry database ${this.path} is closed`);
      const now = this.#clock.now();
      [events, outcomes] = this.#transaction((): [WatchEvent[], (RegistryItem | LeaseNotFoundError)[]] => {
        const written: WatchEvent[] = this.#purgeIn(now);
        // A group's puts are nearly all on one lease: read each lease once.
        const leases = new Map<string, LeaseNotFoundError | {expires: number}>();
        const checkLease = (leaseId: string): LeaseNotFoundError | {expires: number} => {
          const lease = this.#sql.liveLease.get({id: leaseId, now}) as {expires: number} | undefined;
          const held = this.#held.get(leaseId);
          const alive = held && this.#heldAlive(held) ? held.expires : undefined;
          if (!lease && alive === undefined) return new LeaseNotFoundError(`lease ${leaseId} is expired or unknown to the sqlite registry ${this.path}`);
          return {expires: Math.max(lease?.expires ?? 0, alive ?? 0)};
        };
        const checked = batch.map(({leaseId}): LeaseNotFoundError | {expires: number | undefined} => {
          if (leaseId === undefined) return {expires: undefined};
          let check = leases.get(leaseId);
          if (check === undefined) leases.set(leaseId, (check = checkLease(leaseId)));
          // An error of its own for each put refused.
          return check instanceof LeaseNotFoundError ? new LeaseNotFoundError(check.message) : check;
        });
        // One revision per written put, in order, as if taken one by one: one statement for the group.
        const writes = checked.reduce((n, c) => (c instanceof LeaseNotFoundError ? n : n + 1), 0);
        let revision = writes === 0 ? 0 : this.#reserveRevisions(writes) - writes;
        const results = batch.map(({key, value, leaseId, document}, i) => {
          const check = checked[i] as LeaseNotFoundError | {expires: number | undefined};
          if (check instanceof LeaseNotFoundError) return check;
          revision++;
          this.#sql.upsert.run({key, value, lease: leaseId ?? null, revision});
          const stored = toItem({key, value, lease: leaseId ?? null, revision, expires: check.expires ?? null});
          written.push({type: 'put', item: stored, ...(document === undefined ? {} : {document})});
          return stored;
        });
        return [written, results];
      });
    } catch (error) {
      for (const put of batch) put.reject(error);
      return;
    }
    this.#wrote(batch.length);
    this.#hub.emit(events);
    batch.forEach((put, i) => {
      const outcome = outcomes[i] as RegistryItem | LeaseNotFoundError;
      if (outcome instanceof LeaseNotFoundError) put.reject(outcome);
      else put.resolve(outcome);
    });
  }

  async get(key: string): Promise<RegistryItem | undefined> {
    this.#open();
    this.#commitPuts();
    this.#readable();
    this.#purgeQuietly();
    const now = this.#clock.now();
    const row = this.#sql.get.get({key}) as ItemRow | undefined;
    return row && this.#live(row, now) ? toItem(this.#effective(row)) : undefined;
  }

  async list(prefix: string): Promise<RegistryItem[]> {
    return this.#list(prefix, false);
  }

  /** Keys, revisions, leases and expiries only (`value` ''): see RegistryBackend.listMeta. */
  async listMeta(prefix: string): Promise<RegistryItem[]> {
    return this.#list(prefix, true);
  }

  #list(prefix: string, meta: boolean): RegistryItem[] {
    this.#open();
    this.#commitPuts();
    this.#readable();
    this.#purgeQuietly();
    const now = this.#clock.now();
    // A key range instead of LIKE: `%` and `_` in keys stay literal and the primary key index is used.
    const end = prefixEnd(prefix);
    const sql = this.#sql;
    const rows = (
      prefix === ''
        ? (meta ? sql.metaAll : sql.listAll).all()
        : end === undefined
          ? (meta ? sql.metaFrom : sql.listFrom).all({from: prefix})
          : (meta ? sql.metaRange : sql.listRange).all({from: prefix, to: end})
    ) as unknown as ItemRow[];
    return rows.filter((row) => row.key.startsWith(prefix) && this.#live(row, now)).map((row) => toItem(this.#effective(row)));
  }

  async delete(key: string): Promise<boolean> {
    return this.#deleteWhere(key, () => this.#sql.deleteEntry.run({key}));
  }

  /** One DELETE whose WHERE compares the value and lease, so no other process's write can slip in between. */
  async compareAndDelete(key: string, expected: {readonly value: string; readonly lease: string | undefined}): Promise<boolean> {
    return this.#deleteWhere(key, () => this.#sql.deleteEntryIf.run({key, value: expected.value, lease: expected.lease ?? null}));
  }

  #deleteWhere(key: string, remove: () => {changes: number | bigint}): boolean {
    this.#open();
    this.#commitPuts();
    this.#writable();
    this.#reopenIfDeleted();
    const now = this.#clock.now();
    const [events, existed] = this.#transaction((): [WatchEvent[], boolean] => {
      const purged = this.#purgeIn(now);
      const {changes} = remove();
      if (Number(changes) === 0) return [purged, false];
      return [[...purged, {type: 'delete', key, revision: String(this.#nextRevision())}], true];
    });
    this.#hub.emit(events);
    return existed;
  }

  /** Sees only writes made through this process (see the class comment); `fromRevision` is ignored. */
  async watch(prefix: string, onEvent: (event: WatchEvent) => void): Promise<Watcher> {
    this.#open();
    return this.#hub.subscribe(prefix, onEvent);
  }

  async ping(): Promise<void> {
    this.#open();
    this.#readable();
    this.#sql.ping.get();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#commitPuts();
    this.#closed = true;
    this.#cancelPurge?.();
    this.#hub.clear();
    this.#held.clear();
    this.#db.close();
  }

  /** Deletes expired leases and their entries, emitting a delete event per entry; runs on reads, writes and a timer. */
  purgeExpired(): void {
    if (this.#closed) return;
    this.#commitPuts();
    const now = this.#clock.now();
    // Cheap indexed probe first, so reads only take the write lock when something did expire.
    if (this.#expiredLeaseIds(now).length === 0) return;
    this.#hub.emit(this.#transaction(() => this.#purgeIn(now)));
  }

  #purgeIn(now: number): WatchEvent[] {
    const ids = this.#expiredLeaseIds(now);
    return ids.length === 0 ? [] : this.#dropLeases(ids);
  }

  /** Leases expired on disk and not kept alive by this process. */
  #expiredLeaseIds(now: number): string[] {
    const ids = (this.#sql.expiredLeases.all({now}) as unknown as Array<{id: string}>).map((row) => row.id);
    return ids.filter((id) => !this.#heldAlive(this.#held.get(id)));
  }

  /**
   * Whether this process kept a lease alive within its TTL, on the clock's elapsed time: a step of
   * the wall clock (NTP, a clock set by hand) must not expire a lease its owner is keeping alive,
   * and purge every entry. Without an elapsed clock (a test clock), on `now`, which is the same.
   */
  #heldAlive(held: {ttlMs: number; keptAt: number} | undefined): boolean {
    return held !== undefined && this.#elapsed() - held.keptAt < held.ttlMs;
  }

  #elapsed(): number {
    return this.#clock.elapsed?.() ?? this.#clock.now();
  }

  /** Whether a row is live: no lease, or a lease alive on disk or held alive by this process. */
  #live(row: ItemRow, now: number): boolean {
    // Nothing can expire in a store nobody can write: what it holds is the last known inventory.
    if (row.lease === null || this.#readOnly) return true;
    return (row.expires ?? 0) > now || this.#heldAlive(this.#held.get(row.lease));
  }

  /** The row with its lease's expiry as the owner keeps it. */
  #effective(row: ItemRow): ItemRow {
    const held = row.lease === null ? undefined : this.#held.get(row.lease);
    return held && held.expires > (row.expires ?? 0) ? {...row, expires: held.expires} : row;
  }

  /** A purge during a read is housekeeping: a failing disk must not fail the read. */
  #purgeQuietly(): void {
    if (this.#readOnly) return;
    try {
      this.purgeExpired();
    } catch (err) {
      this.#report(new Error(`sqlite registry ${this.path}: purge of expired leases failed: ${errorMessage(err)}`, {cause: err}));
    }
  }

  /** Reads refuse a deleted file: its orphaned copy says nothing about what a restart would find. */
  #readable(): void {
    if (this.path === ':memory:' || fileId(this.path) === this.#fileId) return;
    throw new RegistryFileDeletedError(`registry database file ${this.path} was deleted or replaced while open; the next write re-creates it`);
  }

  /**
   * Re-creates the database when its file was deleted or replaced (true then). Leases and entries
   * of the old file are gone with it; the heartbeat re-announces on the LeaseNotFoundError that follows.
   */
  #reopenIfDeleted(): boolean {
    if (this.path === ':memory:') return false;
    if (fileId(this.path) === this.#fileId) {
      this.#rescueDeletedLog();
      return false;
    }
    this.#useConnection(openDatabase(this.#options));
    this.#held.clear();
    this.#report(new RegistryFileDeletedError(`registry database file ${this.path} was deleted or replaced while open; re-created it`));
    return true;
  }

  /**
   * When the write-ahead log was deleted (or replaced) under the open connection: SQLite goes on
   * writing to the deleted file, which only this process still holds, and with it every write not
   * yet checkpointed (in a small registry, every entry): a process that dies without a clean close
   * leaves a file that opens empty. The log is checkpointed into the file from the copy still open
   * here, and the connection reopened on a new log. Another connection reading (a `kubeconfig -c`)
   * can hold the checkpoint back, or a failing disk fail it: then it is reported, the write at hand
   * goes on (into the deleted log, as before), and the next write or tick tries again.
   */
  #rescueDeletedLog(): void {
    if (this.#walId === undefined || this.#readOnly || fileId(walPath(this.path)) === this.#walId) return;
    try {
      // Not waiting for readers to finish: the event loop would stand still for the busy timeout, every tick.
      this.#db.exec('PRAGMA busy_timeout = 0');
      let busy: number;
      try {
        ({busy} = this.#db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as {busy: number});
      } finally {
        this.#db.exec(`PRAGMA busy_timeout = ${busyTimeout(this.#options)}`);
      }
      if (busy !== 0) throw new Error('another connection holds a read transaction on it');
      // Opened before the old connection closes: that one is then not the file's last, and deletes no log on its way out.
      this.#useConnection(openDatabase(this.#options));
    } catch (err) {
      this.#report(new RegistryFileDeletedError(`sqlite registry ${this.path}: its write-ahead log was deleted while open, and saving it into the file failed (${errorMessage(err)}); trying again`, {cause: err}));
      return;
    }
    this.#walWrites = 0;
    this.#report(new RegistryFileDeletedError(`sqlite registry ${this.path}: its write-ahead log was deleted while open; checkpointed it into the file and started a new one`));
  }

  /** Before a write: a read-only backend tries to reopen the file writable, else throws SQLITE_READONLY. */
  #writable(): void {
    if (!this.#readOnly) return;
    let db: DatabaseSync;
    try {
      db = openDatabase(this.#options);
    } catch (err) {
      throw Object.assign(new Error(`registry database ${this.path} is read-only (${errorMessage(err)}); serving it read-only, writes refused`, {cause: err}), {
        errcode: SQLITE_READONLY,
      });
    }
    this.#useConnection(db);
    this.#readOnly = false;
    // Nothing could renew a lease while the file was read-only, and readers were served every entry:
    // what lapsed meanwhile gets one TTL from now to be resumed or re-put, not a purge by the next read.
    this.#graceLapsedLeases();
  }

  /** Swaps the connection for `db`, freshly opened on the file at `path`. */
  #useConnection(db: DatabaseSync): void {
    try {
      this.#db.close();
    } catch {
      // The old connection (to an orphaned file, or read-only) has nothing left to save.
    }
    this.#db = db;
    this.#sql = prepareStatements(db);
    this.#fileId = fileId(this.path);
    this.#walId = this.path === ':memory:' ? undefined : fileId(walPath(this.path));
  }

  #report(error: Error): void {
    this.#options.onError?.(error);
  }

  /** Deletes leases with their entries inside the caller's transaction; one revision for the batch, like etcd. */
  #dropLeases(ids: readonly string[]): WatchEvent[] {
    const keys: string[] = [];
    for (const id of ids) {
      for (const row of this.#sql.leaseKeys.all({id}) as unknown as Array<{key: string}>) keys.push(row.key);
      this.#sql.deleteLeaseEntries.run({id});
      this.#sql.deleteLease.run({id});
    }
    if (keys.length === 0) return [];
    const revision = String(this.#nextRevision());
    return keys.map((key) => ({type: 'delete', key, revision}));
  }

  /** Takes `count` revisions at once; returns the last (the first is `last - count + 1`). */
  #reserveRevisions(count: number): number {
    const row = this.#sql.reserveRevisions.get({count}) as {value: number} | undefined;
    if (!row) throw new Error(`registry database ${this.path} has no revision counter; expected a row 'revision' in table meta`);
    return row.value;
  }

  #nextRevision(): number {
    const row = this.#sql.nextRevision.get() as {value: number} | undefined;
    if (!row) throw new Error(`registry database ${this.path} has no revision counter; expected a row 'revision' in table meta`);
    return row.value;
  }

  /** Runs `fn` in one write transaction so nothing is half-written. */
  #transaction<T>(fn: () => T): T {
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      const result = fn();
      this.#db.exec('COMMIT');
      this.#wrote(1);
      return result;
    } catch (err) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw err;
    }
  }

  #wrote(count: number): void {
    this.#walWrites += count;
    this.#wroteSinceTick = true;
  }

  /**
   * Checkpoints the write-ahead log once writes have paused for a tick, when enough was written
   * since the last one: the copy and its syncs happen between cycles, not in the middle of one
   * (WAL_AUTOCHECKPOINT_PAGES). A failed checkpoint (disk full, I/O error) loses nothing: the log
   * still holds every committed write, readers read it, and the next quiet tick tries again.
   */
  #checkpointWhenQuiet(): void {
    const quiet = !this.#wroteSinceTick;
    this.#wroteSinceTick = false;
    if (!quiet || this.#walWrites < QUIET_CHECKPOINT_WRITES || this.#readOnly || this.path === ':memory:') return;
    try {
      this.#sql.checkpoint.get();
      this.#walWrites = 0;
    } catch (err) {
      this.#report(new Error(`sqlite registry ${this.path}: checkpoint of the write-ahead log failed: ${errorMessage(err)}`, {cause: err}));
    }
  }

  #schedulePurge(): void {
    this.#cancelPurge = this.#clock.setTimeout(() => {
      if (!this.#closed) this.#checkpointWhenQuiet();
      // The log deleted under an idle writer is saved within a tick, not at its next keepalive.
      if (!this.#closed && this.path !== ':memory:' && fileId(this.path) === this.#fileId) this.#rescueDeletedLog();
      // A busy or failing database must not kill the timer; reads still filter expired entries.
      this.#purgeQuietly();
      if (!this.#closed) this.#schedulePurge();
    }, this.#purgeIntervalMs);
  }

  #open(): void {
    if (this.#closed) throw new Error(`sqlite registry ${this.path} is closed; expected an open backend`);
  }
}

/** Opens, configures and migrates the file (creating its directory). */
function openDatabase(options: SqliteBackendOptions): DatabaseSync {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), {recursive: true});
  const db = new DatabaseSync(options.path);
  try {
    configure(db, busyTimeout(options));
    migrate(db);
  } catch (err) {
    try {
      db.close();
    } catch {
      // Failing with the error above.
    }
    throw err;
  }
  return db;
}

const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;

/**
 * Opens an existing registry read-only, when `cause` said the file cannot be written: a read-only
 * file system, or a full one (a WAL database needs room for its `-wal` and `-shm` files to open for
 * writing; SQLite reports that as a full disk or an I/O error). Read as is first, so a write-ahead
 * log a crashed run left is read too; else immutable (a WAL database on a read-only file system
 * cannot be opened otherwise). Rethrows `cause` when that is not the problem or the file is not a
 * registry this version reads.
 */
function openReadOnly(path: string, cause: unknown): DatabaseSync {
  const errcode = (cause as {errcode?: number}).errcode;
  const code = typeof errcode === 'number' ? errcode & 0xff : undefined;
  const readOnlyProblem =
    code === SQLITE_READONLY || code === SQLITE_CANTOPEN || code === SQLITE_FULL || code === SQLITE_IOERR || /read-?only|unable to open|disk is full|disk I\/O error/i.test(errorMessage(cause));
  if (path === ':memory:' || !readOnlyProblem || fileId(path) === undefined) throw cause;
  const db = openVersioned(path, {readOnly: true}) ?? openVersioned(`file:${encodeURI(path)}?immutable=1`, {readOnly: true});
  if (db === undefined) throw cause;
  return db;
}

/** The database at `location` when it opens and reads as a registry of this schema version, else undefined. */
function openVersioned(location: string, options: {readOnly: boolean}): DatabaseSync | undefined {
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(location, options);
  } catch {
    return undefined;
  }
  try {
    const version = (db.prepare('PRAGMA user_version').get() as {user_version: number}).user_version;
    if (version === SQLITE_SCHEMA_VERSION) return db;
  } catch {
    // Unreadable this way: the caller tries the next, or rethrows the original problem.
  }
  db.close();
  return undefined;
}

/** How long a write waits for another connection's lock, in whole ms. */
function busyTimeout(options: SqliteBackendOptions): number {
  return Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000));
}

/** The write-ahead log SQLite keeps next to the database file. */
function walPath(path: string): string {
  return `${path}-wal`;
}

/** `dev:ino` of the file, or undefined when it does not exist. */
function fileId(path: string): string | undefined {
  if (path === ':memory:') return undefined;
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

function configure(db: DatabaseSync, busyTimeoutMs: number): void {
  db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  // Reading the journal mode is the first access to the file: a non-database fails here.
  const mode = (db.prepare('PRAGMA journal_mode = WAL').get() as {journal_mode: string} | undefined)?.journal_mode;
  if (mode !== 'wal' && mode !== 'memory') throw new Error(`expected journal_mode wal, got ${mode ?? 'nothing'}`);
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec(`PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
  db.exec(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  const check = db.prepare('PRAGMA quick_check').all() as unknown as Array<{quick_check: string}>;
  if (check[0]?.quick_check !== 'ok') {
    throw new Error(`integrity check failed: ${check.slice(0, 3).map((row) => row.quick_check).join('; ')}`);
  }
}

/** Brings the schema to SQLITE_SCHEMA_VERSION; the write also proves the file is writable. */
function migrate(db: DatabaseSync): void {
  db.exec('BEGIN IMMEDIATE');
  try {
    const version = (db.prepare('PRAGMA user_version').get() as {user_version: number}).user_version;
    if (version > SQLITE_SCHEMA_VERSION) {
      throw new Error(`schema version ${version} was written by a newer kube-discovery; this one knows up to ${SQLITE_SCHEMA_VERSION}`);
    }
    if (version === 0) {
      const tables = db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'table'`).all() as unknown as Array<{name: string}>;
      if (tables.length > 0) {
        throw new Error(`expected an empty file or a kube-discovery registry, found other tables: ${tables.map((t) => t.name).join(', ')}`);
      }
      db.exec(SCHEMA_V1);
      db.exec(`PRAGMA user_version = ${SQLITE_SCHEMA_VERSION}`);
    }
    db.exec(`UPDATE meta SET value = value WHERE name = 'revision'`);
    db.exec('COMMIT');
  } catch (err) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw err;
  }
}

function toItem(row: ItemRow): RegistryItem {
  const base = {key: row.key, value: row.value, revision: String(row.revision)};
  return row.lease === null ? base : {...base, lease: row.lease, expires: row.expires ?? 0};
}
