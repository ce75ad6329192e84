import {mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {DatabaseSync, StatementSync} from 'node:sqlite';
import {afterEach, beforeEach, describe, expect, it, vi} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {LeaseNotFoundError} from '../../src/registry/backend.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {backendContract} from './contract.ts';

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'kd-sqlite-'));
}

backendContract('sqlite', async (clock) => {
  const dir = tempDir();
  const backend = await SqliteBackend.open({path: join(dir, 'registry.db'), clock: clock ?? systemClock});
  return {backend, cleanup: async () => rmSync(dir, {recursive: true, force: true})};
});

describe('sqlite backend file', () => {
  let dir: string;
  let clock: FakeClock;
  const open = (path = join(dir, 'data', 'registry.db')) => SqliteBackend.open({path, clock});

  beforeEach(() => {
    dir = tempDir();
    clock = new FakeClock();
  });
  afterEach(() => {
    vi.restoreAllMocks();
    rmSync(dir, {recursive: true, force: true});
  });

  it('compareAndDelete removes an entry only while another process has not rewritten it', async () => {
    const first = await open();
    const second = await open();
    const lease = await first.grantLease(60_000);
    await first.put('writers/g', 'first', {lease});
    // The second process writes over the record on a lease of its own.
    const other = await second.grantLease(60_000);
    const theirs = await second.put('writers/g', 'second', {lease: other});
    expect(await first.compareAndDelete('writers/g', {value: 'first', lease: lease.id})).toBe(false);
    expect(await first.compareAndDelete('writers/g', {value: 'second', lease: lease.id})).toBe(false);
    expect(await second.get('writers/g')).toEqual(theirs);
    expect(await second.compareAndDelete('writers/g', {value: 'second', lease: other.id})).toBe(true);
    expect(await first.get('writers/g')).toBeUndefined();
    // An entry without a lease matches an expected lease of none.
    await first.put('plain', 'v');
    expect(await second.compareAndDelete('plain', {value: 'v', lease: lease.id})).toBe(false);
    expect(await second.compareAndDelete('plain', {value: 'v', lease: undefined})).toBe(true);
    await first.close();
    await second.close();
  });

  it('creates the parent directory and runs in WAL mode', async () => {
    const backend = await open();
    await backend.close();
    const db = new DatabaseSync(join(dir, 'data', 'registry.db'));
    expect(db.prepare('PRAGMA journal_mode').get()).toMatchObject({journal_mode: 'wal'});
    expect(db.prepare('PRAGMA user_version').get()).toMatchObject({user_version: 1});
    db.close();
  });

  it('serves entries and leases written before a restart, until the lease expires', async () => {
    const first = await open();
    const lease = await first.grantLease(60_000);
    const leased = await first.put('kube_servers/g/a', '{"n":1}', {lease});
    const plain = await first.put('host_ids/replica-0', 'uuid-1');
    await first.close();

    await clock.advance(30_000);
    const second = await open();
    expect(await second.get('kube_servers/g/a')).toEqual(leased);
    expect(await second.get('host_ids/replica-0')).toEqual(plain);
    // The restarted replica adopts its own lease and keeps its entries alive.
    const resumed = await second.resumeLease(lease.id);
    expect(resumed).toEqual({id: lease.id, ttlMs: 60_000});
    if (resumed) await second.keepAlive(resumed);
    await clock.advance(50_000);
    expect(await second.get('kube_servers/g/a')).toMatchObject({value: '{"n":1}', expires: clock.now() + 10_000});
    // Revisions continue from the persisted counter instead of restarting.
    const next = await second.put('kube_servers/g/b', '{}');
    expect(BigInt(next.revision)).toBeGreaterThan(BigInt(plain.revision));
    await second.close();
  });

  it('does not resume a lease that expired while the process was down', async () => {
    const first = await open();
    const lease = await first.grantLease(60_000);
    await first.put('kube_servers/g/a', 'x', {lease});
    await first.close();

    await clock.advance(60_000);
    const second = await open();
    expect(await second.resumeLease(lease.id)).toBeUndefined();
    await expect(second.keepAlive(lease)).rejects.toBeInstanceOf(LeaseNotFoundError);
    expect(await second.list('kube_servers/')).toEqual([]);
    await second.close();
  });

  it('with graceOnOpen (the service), a lease that lapsed while the file was closed gets one TTL from open to be resumed', async () => {
    const first = await open();
    const lease = await first.grantLease(60_000);
    await first.put('kube_servers/g/a', 'x', {lease});
    await first.close();

    await clock.advance(5 * 60_000);
    const second = await SqliteBackend.open({path: join(dir, 'data', 'registry.db'), clock, graceOnOpen: true});
    // Served as the last inventory, with one TTL from open ...
    expect(await second.list('kube_servers/')).toMatchObject([{key: 'kube_servers/g/a', expires: clock.now() + 60_000}]);
    // ... and resumed by its owner, which keeps it alive from then on.
    const resumed = await second.resumeLease(lease.id);
    expect(resumed).toEqual({id: lease.id, ttlMs: 60_000});
    // Alive by its grace only until someone renews it (a writer record on it names a stopped process).
    expect(second.lapsedInGrace(lease.id)).toBe(true);
    if (resumed) await second.keepAlive(resumed);
    expect(second.lapsedInGrace(lease.id)).toBe(false);
    await clock.advance(50_000);
    await second.keepAlive(lease);
    await clock.advance(50_000);
    expect(await second.list('kube_servers/')).toHaveLength(1);
    await second.close();

    // Not renewed within that TTL, it lapses as any other.
    await clock.advance(5 * 60_000);
    const third = await SqliteBackend.open({path: join(dir, 'data', 'registry.db'), clock, graceOnOpen: true});
    await clock.advance(60_000);
    expect(await third.list('kube_servers/')).toEqual([]);
    await expect(third.keepAlive(lease)).rejects.toBeInstanceOf(LeaseNotFoundError);
    await third.close();
  });

  it('fails at open naming the path when the file is not a database', async () => {
    const path = join(dir, 'registry.db');
    writeFileSync(path, 'this is not a sqlite database, just some garbage bytes '.repeat(100));
    await expect(open(path)).rejects.toThrow(`cannot open registry database ${path}: file is not a database`);
  });

  it('fails at open naming the path when the file belongs to something else', async () => {
    const path = join(dir, 'other.db');
    const db = new DatabaseSync(path);
    db.exec('CREATE TABLE users (id INTEGER)');
    db.close();
    await expect(open(path)).rejects.toThrow(new RegExp(`^cannot open registry database ${path}: .*found other tables: users`));
  });

  it('fails at open naming the path when its directory cannot be created', async () => {
    writeFileSync(join(dir, 'plain-file'), '');
    const path = join(dir, 'plain-file', 'registry.db');
    await expect(open(path)).rejects.toThrow(`cannot open registry database ${path}: `);
  });

  it('fails at open naming the path when the location is not writable (even for root)', async () => {
    // /proc refuses new files whoever asks, so this holds in CI where tests run as root.
    const path = '/proc/self/kd-registry.db';
    await expect(open(path)).rejects.toThrow(`cannot open registry database ${path}: `);
  });

  it('a group of puts issued after the file was deleted fails whole on the old lease and writes to the re-created file', async () => {
    const path = join(dir, 'data', 'registry.db');
    const backend = await open(path);
    const lease = await backend.grantLease(60_000);
    await backend.put('kube_servers/g/before', '{}', {lease});
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, {force: true});
    // Issued in one turn: the file is checked once for the group, and none of them lands in the deleted one.
    const results = await Promise.allSettled(Array.from({length: 3}, (_, i) => backend.put(`kube_servers/g/c${i}`, '{}', {lease})));
    expect(results.map((r) => r.status === 'rejected' && r.reason instanceof LeaseNotFoundError)).toEqual([true, true, true]);
    const fresh = await backend.grantLease(60_000);
    await Promise.all(Array.from({length: 3}, (_, i) => backend.put(`kube_servers/g/c${i}`, '{}', {lease: fresh})));
    await backend.close();
    const reopened = await open(path);
    expect((await reopened.list('kube_servers/g/')).map((item) => item.key)).toEqual(['kube_servers/g/c0', 'kube_servers/g/c1', 'kube_servers/g/c2']);
    await reopened.close();
  });

  it('commits puts issued together in one transaction; one whose lease is gone fails alone; later operations see them in order', async () => {
    const backend = await open();
    const lease = await backend.grantLease(60_000);
    const exec = DatabaseSync.prototype.exec;
    let transactions = 0;
    vi.spyOn(DatabaseSync.prototype, 'exec').mockImplementation(function (this: DatabaseSync, sql: string) {
      if (sql.startsWith('BEGIN')) transactions++;
      return exec.call(this, sql);
    });
    const puts = Array.from({length: 64}, (_, i) => backend.put(`kube_servers/g/c${i}`, `{"i":${i}}`, {lease}));
    const orphan = backend.put('kube_servers/g/orphan', '{}', {lease: {id: 'no-such-lease', ttlMs: 60_000}});
    // Issued after the puts, in the same turn: it must not overtake them.
    const deleted = backend.delete('kube_servers/g/c7');
    await expect(orphan).rejects.toBeInstanceOf(LeaseNotFoundError);
    const items = await Promise.all(puts);
    expect(await deleted).toBe(true);
    expect(new Set(items.map((item) => item.revision)).size).toBe(64);
    expect(transactions).toBe(2); // the group of puts, then the delete
    vi.restoreAllMocks();
    const listed = await backend.list('kube_servers/g/');
    expect(listed.map((item) => item.key).sort()).toEqual(Array.from({length: 64}, (_, i) => `kube_servers/g/c${i}`).filter((k) => k !== 'kube_servers/g/c7').sort());
    await backend.close();
  });

  it('keeps a lease alive with one statement changing one row, whether 10 or 10,000 entries hang on it', async () => {
    const backend = await open();
    const costs: Array<{statements: number; changes: number}> = [];
    for (const count of [10, 10_000]) {
      const lease = await backend.grantLease(60_000);
      for (let i = 0; i < count; i++) await backend.put(`kube_servers/g${count}/c${i}`, '{}', {lease});
      costs.push(await measure(() => backend.keepAlive(lease)));
      expect(await backend.list(`kube_servers/g${count}/`)).toHaveLength(count);
    }
    expect(costs).toEqual([
      {statements: 1, changes: 1},
      {statements: 1, changes: 1},
    ]);
    await backend.close();
  });
});

/** Counts the SQL statements the driver executes during `fn`, and the rows they change. */
async function measure(fn: () => Promise<void>): Promise<{statements: number; changes: number}> {
  const cost = {statements: 0, changes: 0};
  const run = StatementSync.prototype.run;
  const exec = DatabaseSync.prototype.exec;
  const spies = [
    vi.spyOn(StatementSync.prototype, 'run').mockImplementation(function (this: StatementSync, ...args) {
      cost.statements++;
      const result = run.apply(this, args);
      cost.changes += Number(result.changes);
      return result;
    }),
    ...(['get', 'all', 'iterate'] as const).map((method) => {
      const original = StatementSync.prototype[method] as (...a: unknown[]) => unknown;
      return vi.spyOn(StatementSync.prototype, method).mockImplementation(function (this: StatementSync, ...args: unknown[]) {
        cost.statements++;
        return original.apply(this, args);
      } as never);
    }),
    vi.spyOn(DatabaseSync.prototype, 'exec').mockImplementation(function (this: DatabaseSync, sql: string) {
      cost.statements++;
      exec.call(this, sql);
    }),
  ];
  try {
    await fn();
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
  return cost;
}
