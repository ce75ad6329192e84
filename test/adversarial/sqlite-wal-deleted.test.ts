/**
 * Adversarial: the `-wal` file of a running service's SQLite registry is deleted (a clean-up job
 * removing `*-wal` files, an operator tidying the data directory). SQLite goes on writing to the
 * deleted file, which only this process still holds; in a small deployment that is every entry,
 * since the log is only checkpointed after QUIET_CHECKPOINT_WRITES writes. When the process then
 * dies without a clean close (OOM kill, node lost, SIGKILL after the grace period), the restart
 * found an empty registry: every cluster gone from the inventory at once, and never registered
 * again while the cloud failed. The process must notice, at its next write (the heartbeat's
 * keepalive at the latest), and put what the log held back into the file.
 */
import {spawn} from 'node:child_process';
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {createInterface} from 'node:readline';
import {DatabaseSync} from 'node:sqlite';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const WORKER = path.resolve(import.meta.dirname, 'sqlite-wal-deleted-worker.ts');
const CLUSTERS = 20;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-wal-deleted-'));
});
afterAll(async () => {
  await rm(dir, {recursive: true, force: true});
});

/** Runs the writer, deletes its log (twice) while `reader` may hold a read transaction, kills it; returns what a restart lists. */
async function deleteLogThenKill(file: string, options: {readonly reader?: boolean} = {}): Promise<number> {
  const writer = spawn(process.execPath, [WORKER, file, String(CLUSTERS)], {stdio: ['pipe', 'pipe', 'inherit']});
  const lines = createInterface({input: writer.stdout})[Symbol.asyncIterator]();
  const next = async (): Promise<string> => String((await lines.next()).value);
  const keepalive = async (): Promise<string> => {
    writer.stdin.write('keepalive\n');
    return next();
  };
  let reader: DatabaseSync | undefined;
  try {
    expect(await next()).toBe('ready');
    if (options.reader) {
      // Another process in the middle of a read (a `kubeconfig -c`, an operator's sqlite3 shell).
      reader = new DatabaseSync(file, {readOnly: true});
      reader.exec('BEGIN');
      reader.prepare('SELECT count(*) FROM entries').get();
    }
    await rm(`${file}-wal`);
    // The heartbeat's next keepalive: a write, as every third of the TTL.
    expect(await keepalive()).toBe('kept');
    if (reader) {
      reader.exec('COMMIT');
      reader.close();
      reader = undefined;
      expect(await keepalive()).toBe('kept');
    }
    // And the log it started instead, deleted in turn.
    await rm(`${file}-wal`);
    expect(await keepalive()).toBe('kept');
  } finally {
    reader?.close();
    writer.kill('SIGKILL');
    await new Promise((resolve) => writer.once('exit', resolve));
  }
  // The restart, as `start` opens its registry.
  const restarted = await SqliteBackend.open({path: file, clock: new FakeClock(), graceOnOpen: true});
  try {
    return (await restarted.list('kube_servers/g/')).length;
  } finally {
    await restarted.close();
  }
}

it('a registry whose write-ahead log was deleted under the running writer still has every entry after that writer is killed', async () => {
  expect(await deleteLogThenKill(path.join(dir, 'registry.db'))).toBe(CLUSTERS);
}, 60_000);

it('the same while another process holds a read transaction open: saved once that read ends', async () => {
  expect(await deleteLogThenKill(path.join(dir, 'reader.db'), {reader: true})).toBe(CLUSTERS);
}, 60_000);
