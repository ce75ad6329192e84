// When the sqlite registry copies its write-ahead log into the database file: once writes pause,
// not in the middle of a burst such as a first cycle registering 2,000 clusters.
import {mkdtempSync, rmSync, statSync} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {QUIET_CHECKPOINT_WRITES, SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {runInMountNamespace} from '../helpers/tmpfs.ts';

const TICK = 1_000;
// ~2 KiB, as a registered EKS cluster's document is.
const VALUE = JSON.stringify({kind: 'kube_server', spec: {ca: 'x'.repeat(2_000)}});

const sizeOf = (file: string): number => {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
};

describe('sqlite registry checkpoints', () => {
  let dir: string;
  let clock: FakeClock;
  let file: string;
  let errors: Error[];
  let store: SqliteBackend;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kd-sqlite-checkpoint-'));
    file = path.join(dir, 'registry.db');
    clock = new FakeClock();
    errors = [];
    store = await SqliteBackend.open({path: file, clock, purgeIntervalMs: TICK, onError: (e) => errors.push(e)});
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, {recursive: true, force: true});
  });

  it('leaves a 2,000-entry burst (~2,300 log pages, past SQLite’s default of 1,000) in the log, and checkpoints it once writes pause', async () => {
    const lease = await store.grantLease(600_000);
    const before = sizeOf(file);
    await Promise.all(Array.from({length: 2_000}, (_, i) => store.put(`kube_servers/g/c${String(i).padStart(4, '0')}`, VALUE, {lease})));
    // No checkpoint in the burst: the database file did not take the ~4 MB in.
    expect(sizeOf(file)).toBeLessThan(before + 1024 * 1024);
    expect(sizeOf(`${file}-wal`)).toBeGreaterThan(2_000 * VALUE.length);
    // The tick right after the burst saw writes: still nothing copied.
    await clock.advance(TICK);
    expect(sizeOf(file)).toBeLessThan(before + 1024 * 1024);
    // A tick without writes: the log goes into the file.
    await clock.advance(TICK);
    expect(sizeOf(file)).toBeGreaterThan(2_000 * VALUE.length);
    expect(errors).toEqual([]);
    // Everything is in the file on its own: a fresh process reading it finds every entry.
    await store.close();
    rmSync(`${file}-wal`, {force: true});
    store = await SqliteBackend.open({path: file, clock, purgeIntervalMs: TICK});
    expect(await store.list('kube_servers/g/')).toHaveLength(2_000);
  });

  it('does not checkpoint for a few writes (a keepalive) or while writes go on', async () => {
    const lease = await store.grantLease(600_000);
    const before = sizeOf(file);
    for (let tick = 0; tick < 3; tick++) {
      await Promise.all(Array.from({length: QUIET_CHECKPOINT_WRITES}, (_, i) => store.put(`kube_servers/g/t${tick}-${i}`, VALUE, {lease})));
      await clock.advance(TICK);
      expect(sizeOf(file)).toBeLessThan(before + 1024 * 1024);
    }
    await store.keepAlive(lease);
    await clock.advance(TICK);
    // Quiet now, with enough written: checkpointed.
    await clock.advance(TICK);
    const checkpointed = sizeOf(file);
    expect(checkpointed).toBeGreaterThan(3 * QUIET_CHECKPOINT_WRITES * VALUE.length);
    // A keepalive alone is left to the next burst (or to SQLite's bound): nothing read back changes either way.
    await store.keepAlive(lease);
    await clock.advance(TICK);
    await clock.advance(TICK);
    expect(await store.list('kube_servers/g/')).toHaveLength(3 * QUIET_CHECKPOINT_WRITES);
    expect(errors).toEqual([]);
  });
});

const WORKER = path.resolve(import.meta.dirname, 'sqlite-checkpoint-worker.ts');

describe('sqlite registry checkpoint faults', () => {
  it('a checkpoint on a full disk (8 MB tmpfs in a mount namespace) is reported, loses nothing, and succeeds once there is room', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kd-sqlite-checkpoint-full-'));
    try {
      const seen = runInMountNamespace<{
        written: number;
        errorsWhileFull: string[];
        listedWhileFull: number;
        errorsAfterRoom: number;
        fileGrewAfterRoom: boolean;
        listedAfterReopen: number;
      }>(WORKER, [dir], 120_000);
      expect(seen.written).toBeGreaterThan(0);
      // Reported through onError (the service's registry health), with SQLite's reason.
      expect(seen.errorsWhileFull.length).toBeGreaterThan(0);
      expect(seen.errorsWhileFull[0]).toMatch(/checkpoint of the write-ahead log failed: .*full/i);
      // Nothing lost or hidden meanwhile: every committed entry is still read from the log.
      expect(seen.listedWhileFull).toBe(seen.written);
      expect(seen.errorsAfterRoom).toBe(0);
      expect(seen.fileGrewAfterRoom).toBe(true);
      expect(seen.listedAfterReopen).toBe(seen.written);
    } finally {
      rmSync(dir, {recursive: true, force: true});
    }
  });
});
