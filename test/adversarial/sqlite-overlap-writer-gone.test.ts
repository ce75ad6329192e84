/**
 * Adversarial (found by bench/chaos.ts's reasoning on two `start` processes sharing one SQLite
 * file): a rolling restart overlaps the old process A and the new process B on one file. B's first
 * cycle moves every entry onto B's lease (it found them on A's). Then B dies for good (a bad
 * rollout rolled back, a pod deleted) while A keeps running with every listing succeeding. A
 * learns of the move from its periodic re-list, but only re-put an entry when a cycle announced
 * it again: with a poll interval near or above the TTL (a valid config), B's lease lapsed first
 * and A's own purge deleted every cluster although no listing lacked one.
 *
 * The promise: a cluster leaves the inventory only when a successful listing no longer has it.
 * A, alive and keeping its lease, takes back the entries it announced before B's lease lapses.
 * The clock is stepped past the TTL (a SteppedClock: A's own lease stays held by its elapsed time).
 */
import {DatabaseSync} from 'node:sqlite';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {SteppedClock} from '../helpers/stepped-clock.ts';

const ACCOUNT = '111111111111';
const NAMES = ['a-eks-us-east-1-111111111111', 'b-eks-us-east-1-111111111111'];
let aws: AwsServiceWorld;

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: {accessKeyId: 'AKIAOVERLAPWRITER001', secretAccessKey: 'overlap-writer-gone-secret'},
    account: ACCOUNT,
    populate: (world) => {
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'});
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'b'});
    },
  });
});

afterAll(() => aws.close());

// A poll interval above the TTL: no cycle comes to the rescue; keepalives every second.
const config = () =>
  parseConfig(
    `version: v1
discovery_service:
  discovery_group: overlap
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1]
heartbeat: {ttl: 10m, keepalive_interval: 1s}
probe: {enabled: false}
storage: {type: sqlite, path: ${aws.file('registry.db')}}
http: {listen_addr: "127.0.0.1:0"}
`,
    'overlap.yaml',
  );

/** The lease each entry hangs on, read from the file as a third process would. */
function leasesOnFile(): Map<string, string | null> {
  const db = new DatabaseSync(aws.file('registry.db'), {readOnly: true});
  try {
    const rows = db.prepare("SELECT key, lease FROM entries WHERE key LIKE 'kube_servers/overlap/%'").all() as {key: string; lease: string | null}[];
    return new Map(rows.map((r) => [r.key.slice('kube_servers/overlap/'.length), r.lease]));
  } finally {
    db.close();
  }
}

it('the old process keeps every cluster after the overlapping new one died with the entries on its lease', async () => {
  const clock = new SteppedClock();
  const start = (replica: string) => startService({config: config(), io: captureIo({...process.env, KUBE_DISCOVERY_REPLICA: replica}).io, clock, logger: silentLogger});
  const a = await start('old');
  try {
    await expect.poll(async () => (await fetch(`${a.url}/readyz`)).status, {timeout: 30_000}).toBe(200);
    const onA = leasesOnFile();
    expect([...onA.keys()].sort()).toEqual(NAMES);

    // The new process starts on the same file, runs its first cycle, and dies without a goodbye.
    const b = await start('new');
    await expect.poll(async () => (await fetch(`${b.url}/readyz`)).status, {timeout: 30_000}).toBe(200);
    const onB = leasesOnFile();
    for (const name of NAMES) expect(onB.get(name), `${name} moved onto the new process's lease`).not.toBe(onA.get(name));
    await b.stop({deregister: false});

    // A's periodic re-list (every 30 s) sees the entries on B's lease ...
    await a.inventory.resync();
    const deletes: string[] = [];
    a.inventory.subscribe((event) => {
      if (event.type === 'delete') deletes.push(event.name);
    });
    // ... and A, which announced them, takes them back onto its own lease while B's still runs.
    await expect.poll(() => NAMES.filter((name) => leasesOnFile().get(name) === onB.get(name)), {timeout: 15_000}).toEqual([]);

    // B's lease lapses (more than one TTL later); A's next read purges it.
    clock.offsetMs = 11 * 60_000;
    await a.inventory.resync();
    expect(deletes).toEqual([]);
    expect(((await (await fetch(`${a.url}/v1/kube_servers`)).json()) as {items: {metadata: {name: string}}[]}).items.map((s) => s.metadata.name)).toEqual(NAMES);
  } finally {
    await a.stop({deregister: false});
  }
});
