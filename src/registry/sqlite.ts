/** Embedded registry backend on `node:sqlite`: one file that survives restarts and serves the last inventory at once. */
import {randomUUID} from 'node:crypto';
import {mkdirSync} from 'node:fs';
import {dirname} from 'node:path';
import {DatabaseSync} from 'node:sqlite';
import type {Clock} from '../core/clock.ts';
import type {Lease, PutOptions, RegistryBackend, RegistryItem, WatchEvent, Watcher} from './backend.ts';
import {LeaseNotFoundError} from './backend.ts';
import {checkInterval, checkTtl, prefixEnd} from './local-common.ts';
import {WatchHub} from './watch-hub.ts';

/** Options of the sqlite backend. */
export interface SqliteBackendOptions {
  /** Database file; its parent directory is created. `:memory:` gives a throwaway database. */
  readonly path: string;
  readonly clock: Clock;
  /** How often expired leases are purged (and their delete events emitted) without any read; default 1s. */
  readonly purgeIntervalMs?: number;
  /** How long a write waits for another connection's lock before failing; default 5s. */
  readonly busyTimeoutMs?: number;
}

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
// An entry whose lease expired (or vanished) is never returned, even before the purge removes it.
const LIVE = '(e.lease IS NULL OR l.expires > $now)';

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
    insertLease: db.prepare('INSERT INTO leases (id, ttl_ms, expires) VALUES ($id, $ttl, $expires)'),
    keepAlive: db.prepare('UPDATE leases SET expires = $now + ttl_ms WHERE id = $id AND expires > $now'),
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
    get: db.prepare(`${ITEM_COLUMNS} WHERE e.key = $key AND ${LIVE}`),
    listAll: db.prepare(`${ITEM_COLUMNS} WHERE ${LIVE} ORDER BY e.key`),
    listRange: db.prepare(`${ITEM_COLUMNS} WHERE e.key >= $from AND e.key < $to AND ${LIVE} ORDER BY e.key`),
    listFrom: db.prepare(`${ITEM_COLUMNS} WHERE e.key >= $from AND ${LIVE} ORDER BY e.key`),
    ping: db.prepare('SELECT 1 AS ok'),
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
  /** The database file. */
  readonly path: string;
  readonly #db: DatabaseSync;
  readonly #sql: Statements;
  readonly #clock: Clock;
  readonly #purgeIntervalMs: number;
  readonly #hub = new WatchHub();
  #closed = false;
  #cancelPurge: (() => void) | undefined;

  /** Opens (creating when missing) and checks the database; fails naming the path when it is corrupt or unwritable. */
  static async open(options: SqliteBackendOptions): Promise<SqliteBackend> {
    const purgeIntervalMs = checkInterval(options.purgeIntervalMs);
    let db: DatabaseSync | undefined;
    try {
      if (options.path !== ':memory:') mkdirSync(dirname(options.path), {recursive: true});
      db = new DatabaseSync(options.path);
      configure(db, options.busyTimeoutMs ?? 5000);
      migrate(db);
      return new SqliteBackend(db, options, purgeIntervalMs);
    } catch (err) {
      try {
        db?.close();
      } catch {
        // Already failing with the more useful error below.
      }
      throw new Error(`cannot open registry database ${options.path}: ${(err as Error).message}`, {cause: err});
    }
  }

  private constructor(db: DatabaseSync, options: SqliteBackendOptions, purgeIntervalMs: number) {
    this.#db = db;
    this.path = options.path;
    this.#clock = options.clock;
    this.#sql = prepareStatements(db);
    this.#purgeIntervalMs = purgeIntervalMs;
    this.#schedulePurge();
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.#open();
    checkTtl(ttlMs);
    const id = randomUUID();
    this.#sql.insertLease.run({id, ttl: ttlMs, expires: this.#clock.now() + ttlMs});
    return {id, ttlMs};
  }

  /** One UPDATE of the lease row; entries follow because their expiry is their lease's. */
  async keepAlive(lease: Lease): Promise<void> {
    this.#open();
    const {changes} = this.#sql.keepAlive.run({id: lease.id, now: this.#clock.now()});
    if (Number(changes) === 0) throw new LeaseNotFoundError(`lease ${lease.id} is expired or unknown to the sqlite registry ${this.path}`);
  }

  async revokeLease(lease: Lease): Promise<void> {
    this.#open();
    const events = this.#transaction(() => this.#dropLeases([lease.id]));
    this.#hub.emit(events);
  }

  async resumeLease(id: string): Promise<Lease | undefined> {
    this.#open();
    const row = this.#sql.liveLease.get({id, now: this.#clock.now()}) as {ttl_ms: number} | undefined;
    return row ? {id, ttlMs: row.ttl_ms} : undefined;
  }

  async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
    this.#open();
    const now = this.#clock.now();
    const leaseId = options?.lease?.id;
    const [events, item] = this.#transaction((): [WatchEvent[], RegistryItem] => {
      const purged = this.#purgeIn(now);
      let expires: number | undefined;
      if (leaseId !== undefined) {
        const lease = this.#sql.liveLease.get({id: leaseId, now}) as {expires: number} | undefined;
        if (!lease) throw new LeaseNotFoundError(`lease ${leaseId} is expired or unknown to the sqlite registry ${this.path}`);
        expires = lease.expires;
      }
      const revision = this.#nextRevision();
      this.#sql.upsert.run({key, value, lease: leaseId ?? null, revision});
      const stored = toItem({key, value, lease: leaseId ?? null, revision, expires: expires ?? null});
      return [[...purged, {type: 'put', item: stored}], stored];
    });
    this.#hub.emit(events);
    return item;
  }

  async get(key: string): Promise<RegistryItem | undefined> {
    this.#open();
    this.purgeExpired();
    const row = this.#sql.get.get({key, now: this.#clock.now()}) as ItemRow | undefined;
    return row ? toItem(row) : undefined;
  }

  async list(prefix: string): Promise<RegistryItem[]> {
    this.#open();
    this.purgeExpired();
    const now = this.#clock.now();
    // A key range instead of LIKE: `%` and `_` in keys stay literal and the primary key index is used.
    const end = prefixEnd(prefix);
    const rows = (
      prefix === ''
        ? this.#sql.listAll.all({now})
        : end === undefined
          ? this.#sql.listFrom.all({from: prefix, now})
          : this.#sql.listRange.all({from: prefix, to: end, now})
    ) as unknown as ItemRow[];
    return rows.filter((row) => row.key.startsWith(prefix)).map(toItem);
  }

  async delete(key: string): Promise<boolean> {
    this.#open();
    const now = this.#clock.now();
    const [events, existed] = this.#transaction((): [WatchEvent[], boolean] => {
      const purged = this.#purgeIn(now);
      const {changes} = this.#sql.deleteEntry.run({key});
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
    this.#sql.ping.get();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#cancelPurge?.();
    this.#hub.clear();
    this.#db.close();
  }

  /** Deletes expired leases and their entries, emitting a delete event per entry; runs on reads, writes and a timer. */
  purgeExpired(): void {
    if (this.#closed) return;
    const now = this.#clock.now();
    // Cheap indexed probe first, so reads only take the write lock when something did expire.
    if (this.#sql.expiredLeases.all({now}).length === 0) return;
    this.#hub.emit(this.#transaction(() => this.#purgeIn(now)));
  }

  #purgeIn(now: number): WatchEvent[] {
    const ids = (this.#sql.expiredLeases.all({now}) as unknown as Array<{id: string}>).map((row) => row.id);
    return ids.length === 0 ? [] : this.#dropLeases(ids);
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
      return result;
    } catch (err) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw err;
    }
  }

  #schedulePurge(): void {
    this.#cancelPurge = this.#clock.setTimeout(() => {
      try {
        this.purgeExpired();
      } catch (err) {
        // A busy or failing database must not kill the timer; reads still filter expired entries.
        process.emitWarning(`sqlite registry ${this.path}: purge of expired leases failed: ${(err as Error).message}`);
      }
      if (!this.#closed) this.#schedulePurge();
    }, this.#purgeIntervalMs);
  }

  #open(): void {
    if (this.#closed) throw new Error(`sqlite registry ${this.path} is closed; expected an open backend`);
  }
}

function configure(db: DatabaseSync, busyTimeoutMs: number): void {
  db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.trunc(busyTimeoutMs))}`);
  // Reading the journal mode is the first access to the file: a non-database fails here.
  const mode = (db.prepare('PRAGMA journal_mode = WAL').get() as {journal_mode: string} | undefined)?.journal_mode;
  if (mode !== 'wal' && mode !== 'memory') throw new Error(`expected journal_mode wal, got ${mode ?? 'nothing'}`);
  db.exec('PRAGMA synchronous = NORMAL');
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
