/**
 * The writing process of sqlite-wal-deleted.test.ts, as `start` holds its registry: opens FILE,
 * announces CLUSTERS entries on a lease, prints `ready`; then does one keepalive (what the
 * heartbeat does every third of the TTL) for each `keepalive` line on stdin, printing `kept` or
 * `failed <message>`. The test kills it with SIGKILL: no clean close.
 */
import {createInterface} from 'node:readline';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const [file, count] = process.argv.slice(2);
if (file === undefined || count === undefined) throw new Error('usage: sqlite-wal-deleted-worker.ts FILE CLUSTERS');
const clock = new FakeClock();
const store = await SqliteBackend.open({path: file, clock, graceOnOpen: true});
const lease = await store.grantLease(10 * 60_000);
await Promise.all(Array.from({length: Number(count)}, (_, i) => store.put(`kube_servers/g/c${i}`, JSON.stringify({name: `c${i}`}), {lease})));
process.stdout.write('ready\n');
for await (const line of createInterface({input: process.stdin})) {
  if (line !== 'keepalive') continue;
  await clock.advance(60_000);
  try {
    await store.keepAlive(lease);
    process.stdout.write('kept\n');
  } catch (error) {
    process.stdout.write(`failed ${(error as Error).message}\n`);
  }
}
