/**
 * Worker of sqlite-readonly-lapse.test.ts, run in its own mount namespace (root): a registry on a
 * tmpfs is served read-only for longer than its TTL, then the volume is writable again. Prints
 * `RESULT {...}` with what a reader saw at each step.
 */
import {execFileSync} from 'node:child_process';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import type {WatchEvent} from '../../src/registry/backend.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {mountWorkerTmpfs} from '../helpers/tmpfs.ts';

const {dir, file} = mountWorkerTmpfs(process.argv[2], '8m', 'sqlite-readonly-lapse-worker.ts DIR');
const clock = new FakeClock();
const TTL = 60_000;

// The previous run: one entry on its lease, then the volume turns read-only.
const first = await SqliteBackend.open({path: file, clock, graceOnOpen: true});
const lease = await first.grantLease(TTL);
await first.put('kube_servers/g/a', '{"n":1}', {lease});
await first.close();
execFileSync('mount', ['-o', 'remount,ro', dir]);

// The service starts on the read-only volume: it serves what the file holds, for longer than the TTL.
const backend = await SqliteBackend.open({path: file, clock, graceOnOpen: true});
const events: WatchEvent[] = [];
await backend.watch('kube_servers/', (event) => events.push(event));
const readOnly = (await backend.list('kube_servers/')).map((item) => item.key);
await clock.advance(5 * TTL);
const readOnlyLater = (await backend.list('kube_servers/')).map((item) => item.key);
let writeRefused = false;
try {
  await backend.grantLease(TTL);
} catch {
  writeRefused = true;
}

// The volume is writable again: the heartbeat's next attempt grants its lease, then the group is read to re-put it.
execFileSync('mount', ['-o', 'remount,rw', dir]);
await backend.grantLease(TTL);
const writable = (await backend.list('kube_servers/')).map((item) => item.key);
await backend.close();

process.stdout.write(`RESULT ${JSON.stringify({readOnly, readOnlyLater, writeRefused, writable, deletes: events.filter((e) => e.type === 'delete').length})}\n`);
