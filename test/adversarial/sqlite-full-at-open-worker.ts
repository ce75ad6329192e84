/**
 * Worker of sqlite-full-at-open.test.ts, run in its own mount namespace (root): the service's
 * registry was closed cleanly, the volume filled up, and the service starts again. Prints
 * `RESULT {...}` with what the opened registry served at each step.
 */
import {rmSync} from 'node:fs';
import path from 'node:path';
import {systemClock} from '../../src/core/clock.ts';
import {errorMessage} from '../../src/core/errors.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {fillDisk, mountWorkerTmpfs} from '../helpers/tmpfs.ts';

const {dir, file} = mountWorkerTmpfs(process.argv[2], '16m', 'sqlite-full-at-open-worker.ts DIR');
const fill = path.join(dir, 'fill');
const KEYS = Array.from({length: 20}, (_, i) => `kube_servers/g/c${String(i).padStart(2, '0')}`);

// The previous run: entries on its lease, closed cleanly (a rolling restart).
const first = await SqliteBackend.open({path: file, clock: systemClock, graceOnOpen: true});
const lease = await first.grantLease(600_000);
await Promise.all(KEYS.map((key) => first.put(key, JSON.stringify({key}), {lease})));
await first.close();

// The volume fills up (logs, a core dump) while the process restarts.
fillDisk(fill, 64 * 1024);

let openError: string | undefined;
let served: string[] = [];
let writable: string[] = [];
try {
  const backend = await SqliteBackend.open({path: file, clock: systemClock, graceOnOpen: true});
  served = (await backend.list('kube_servers/')).map((item) => item.key);
  // Room again: the heartbeat's next attempt writes, and the entries are still there to re-put.
  rmSync(fill);
  await backend.grantLease(600_000);
  writable = (await backend.list('kube_servers/')).map((item) => item.key);
  await backend.close();
} catch (error) {
  openError = errorMessage(error);
}
process.stdout.write(`RESULT ${JSON.stringify({keys: KEYS, openError, served, writable})}\n`);
