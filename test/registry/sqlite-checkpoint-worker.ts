/**
 * The full-disk row of sqlite-checkpoint.test.ts, run inside a private mount namespace (started
 * as `unshare -m --propagation private node this-file DIR`): mounts an 8 MB tmpfs on DIR, writes a
 * burst of entries that stays in the write-ahead log, fills the disk, lets writes pause so the
 * registry checkpoints, then frees the disk. Prints what it saw as one `RESULT {...}` line.
 */
import {execFileSync} from 'node:child_process';
import {rmSync, statSync} from 'node:fs';
import path from 'node:path';
import {QUIET_CHECKPOINT_WRITES, SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {fillDisk, mountWorkerTmpfs} from '../helpers/tmpfs.ts';

const {dir, file} = mountWorkerTmpfs(process.argv[2], '8m', 'sqlite-checkpoint-worker.ts DIR');
const fill = path.join(dir, 'fill');
const TICK = 1_000;

const clock = new FakeClock();
const errors: string[] = [];
let store = await SqliteBackend.open({path: file, clock, purgeIntervalMs: TICK, onError: (e) => errors.push(e.message)});
const lease = await store.grantLease(3_600_000);
const written = Math.max(QUIET_CHECKPOINT_WRITES, 500);
const value = JSON.stringify({kind: 'kube_server', spec: {ca: 'x'.repeat(2_000)}});
await Promise.all(Array.from({length: written}, (_, i) => store.put(`kube_servers/g/c${i}`, value, {lease})));
fillDisk(fill, 16 * 1024);
// One tick that saw the burst, one quiet tick: the checkpoint, which needs room in the file.
await clock.advance(TICK);
await clock.advance(TICK);
const errorsWhileFull = [...errors];
const listedWhileFull = (await store.list('kube_servers/g/')).length;
rmSync(fill);
const sizeBefore = statSync(file).size;
errors.length = 0;
await clock.advance(TICK);
const errorsAfterRoom = errors.length;
const fileGrewAfterRoom = statSync(file).size > sizeBefore + written * value.length / 2;
await store.close();
store = await SqliteBackend.open({path: file, clock});
const listedAfterReopen = (await store.list('kube_servers/g/')).length;
await store.close();
process.stdout.write(`RESULT ${JSON.stringify({written, errorsWhileFull, listedWhileFull, errorsAfterRoom, fileGrewAfterRoom, listedAfterReopen})}\n`);
execFileSync('umount', [dir]);
