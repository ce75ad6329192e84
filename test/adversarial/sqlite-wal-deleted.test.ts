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

it('a registry whose write-ahead log was deleted under the running writer still has every entry after that writer is killed', async () => {
  const file = path.join(dir, 'registry.db');
  const writer = spawn(process.execPath, [WORKER, file, String(CLUSTERS)], {stdio: ['pipe', 'pipe', 'inherit']});
  const lines = createInterface({input: writer.stdout})[Symbol.asyncIterator]();
  const next = async (): Promise<string> => String((await lines.next()).value);
  try {
    expect(await next()).toBe('ready');
    await rm(`${file}-wal`);
    // The heartbeat's next keepalive: a write, as every third of the TTL.
    writer.stdin.write('keepalive\n');
    expect(await next()).toBe('kept');
  } finally {
    writer.kill('SIGKILL');
    await new Promise((resolve) => writer.once('exit', resolve));
  }

  // The restart, as `start` opens its registry.
  const restarted = await SqliteBackend.open({path: file, clock: new FakeClock(), graceOnOpen: true});
  try {
    expect((await restarted.list('kube_servers/g/')).map((item) => item.key)).toHaveLength(CLUSTERS);
  } finally {
    await restarted.close();
  }
}, 60_000);
