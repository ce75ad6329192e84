/**
 * Adversarial: the service on SQLite is stopped (a node drained, a crash loop, an upgrade whose
 * image pull is slow) for longer than the heartbeat TTL, and starts again while the cloud is
 * failing. Nobody read the file while the process was down (SQLite is embedded: this process is
 * its only reader and writer), so no reader ever saw the entries lapse. The promise: a cluster
 * leaves the inventory only when a successful listing no longer has it — not because a process
 * restarted. The restarted service must serve the last inventory and keep it (stale) through a
 * first cycle whose sources fail.
 */
import {afterAll, beforeAll, expect, it} from 'vitest';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {failRegion} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {SteppedClock} from '../helpers/stepped-clock.ts';

const ACCOUNT = '111111111111';
const NAMES = ['a-eks-us-east-1-111111111111', 'b-eks-us-east-1-111111111111'];
let aws: AwsServiceWorld;

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: {accessKeyId: 'AKIARESTARTAFTERTTL01', secretAccessKey: 'restart-after-ttl-secret'},
    account: ACCOUNT,
    populate: (world) => {
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'a', tags: {env: 'prod'}});
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'b', tags: {env: 'prod'}});
    },
  });
});

afterAll(() => aws.close());

function config() {
  return parseConfig(
    `version: v1
discovery_service:
  discovery_group: restart
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1]
heartbeat: {ttl: 10m}
storage: {type: sqlite, path: ${aws.file('registry.db')}}
http: {listen_addr: "127.0.0.1:0"}
`,
    'restart.yaml',
  );
}

it('a restart after more than the TTL down, with the cloud failing, keeps every cluster', async () => {
  const clock = new SteppedClock();
  const start = () => startService({config: config(), io: captureIo().io, clock, logger: silentLogger});
  let svc = await start();
  try {
    // Ready = the first cycle's plan is applied (it may end before a waiter could be added).
    await expect.poll(async () => (await fetch(`${svc.url}/readyz`)).status, {timeout: 30_000}).toBe(200);
    expect(svc.inventory.list().map((s) => s.metadata.name)).toEqual(NAMES);
  } finally {
    await svc.stop({deregister: false});
  }

  // Down for eleven minutes (one TTL and more), then started again while EKS answers 503.
  clock.offsetMs = 11 * 60_000;
  aws.fake.fault = failRegion('us-east-1', 'ServiceUnavailableException');
  svc = await start();
  try {
    const deletes: string[] = [];
    svc.inventory.subscribe((event) => {
      if (event.type === 'delete') deletes.push(event.name);
    });
    // The last inventory is served at once ...
    expect((await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as unknown).toMatchObject({items: NAMES.map((name) => ({metadata: {name}}))});
    // ... and kept, stale, through a cycle in which no listing succeeded.
    const done = svc.nextCycle();
    svc.trigger();
    const report = await done;
    expect(report.result).toBe('failure');
    expect(report.counts.delete).toBe(0);
    expect(svc.inventory.list().map((s) => s.metadata.name)).toEqual(NAMES);
    expect(svc.inventory.list().every((s) => s.status?.stale === true)).toBe(true);
    expect(deletes).toEqual([]);
  } finally {
    await svc.stop({deregister: false, graceMs: 0});
    aws.fake.fault = undefined;
  }
}, 60_000);
