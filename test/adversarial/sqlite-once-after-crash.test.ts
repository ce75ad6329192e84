/**
 * Adversarial: a `kube-discovery start` on SQLite died without a clean stop (OOM kill, node lost)
 * an hour ago, on another host (a pod now gone, a volume moved to another node). Its writer record
 * hangs on its heartbeat lease, so it lapsed with the lease long ago: `once` on that file must
 * run, as it did before leases got a grace at open, instead of naming a dead process as the
 * group's running writer.
 */
import {writeFile} from 'node:fs/promises';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {claimWriter} from '../../src/service/writer-claim.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const ACCOUNT = '111111111111';
let aws: AwsServiceWorld;

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: {accessKeyId: 'AKIAONCEAFTERCRASH01', secretAccessKey: 'once-after-crash-secret'},
    account: ACCOUNT,
    tmpPrefix: 'kd-once-crash-',
    populate: (world) => world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'}),
  });
});

afterAll(() => aws.close());

it('once runs on the file of a start that died on another host more than a TTL ago', async () => {
  const db = aws.file('r.db');
  // The dead run, an hour ago, as `start` leaves the file: a 10 min lease with the writer record on it.
  const then = new FakeClock(Date.now() - 60 * 60_000);
  const dead = await SqliteBackend.open({path: db, clock: then});
  const lease = await dead.grantLease(10 * 60_000);
  await claimWriter(dead, 'shared', lease, 'dead-replica', then.now());
  // claimWriter records this host; the dead process ran on another one.
  const item = await dead.get('writers/shared');
  const claim = JSON.parse(item?.value ?? '{}') as Record<string, unknown>;
  await dead.put('writers/shared', JSON.stringify({...claim, hostname: 'node-that-is-gone', pid: 4242}), {lease});
  await dead.close();

  const file = aws.file('cfg.yaml');
  await writeFile(
    file,
    `version: v1\ndiscovery_service:\n  discovery_group: shared\n  poll_interval: 1h\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\nheartbeat: {ttl: 10m}\nstorage: {type: sqlite, path: ${db}}\nhttp: {listen_addr: "127.0.0.1:0"}\n`,
  );
  const io = captureIo();
  const code = await main(['once', '-c', file, '--output', 'json'], io.io);
  expect(io.stderr()).not.toContain('a running `kube-discovery start`');
  expect(code).toBe(0);
  expect(JSON.parse(io.stdout())).toMatchObject({result: 'success'});
}, 60_000);
