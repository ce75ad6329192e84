/**
 * The service end to end: fake EKS → start → cluster appears in /v1/kube_servers → removed
 * from the fake → gone after the next cycle → its region fails → entries stay, marked stale
 * → restart → the inventory is served before the first new cycle ends.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {failRegion, type FakeAws} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIASERVICETEST00001', secretAccessKey: 'service-secret'};
let aws: AwsServiceWorld;
let fake: FakeAws;

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: KEY,
    account: ACCOUNT,
    populate: (world) => {
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'a', tags: {env: 'prod'}});
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'b', tags: {env: 'prod'}});
      world.addCluster(ACCOUNT, 'eu-west-1', {name: 'e1', tags: {env: 'prod'}});
    },
  });
  fake = aws.fake;
});

afterAll(() => aws.close());

function config() {
  return parseConfig(
    `version: v1
discovery_service:
  discovery_group: e2e
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1, eu-west-1]
storage: {type: sqlite, path: ${aws.file('registry.db')}}
http: {listen_addr: "127.0.0.1:0"}
`,
    'e2e.yaml',
  );
}

async function servers(svc: RunningService): Promise<KubeServer[]> {
  const body = (await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: KubeServer[]};
  return body.items;
}

/**
 * Runs a cycle that starts after this call. /readyz turns 200 once the first cycle's plan is
 * applied, before its probes end: a trigger then coalesces into a follow-up cycle, and the next
 * completed cycle is still the first one (which listed the cluster just removed).
 */
async function cycle(svc: RunningService): Promise<void> {
  const asked = Date.now();
  let done = svc.nextCycle();
  svc.trigger();
  while ((await done).startedAt < asked) done = svc.nextCycle();
}

/** Readiness only has to come eventually: a loaded machine may take many seconds over the first cycle, so the bound is generous. */
async function waitReady(svc: RunningService): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if ((await fetch(`${svc.url}/readyz`)).status === 200) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('service never became ready within 60 s');
}

describe('service lifecycle', () => {
  it('registers, deregisters, keeps a failing region stale, and serves the inventory at once after a restart', async () => {
    const start = () => startService({config: config(), io: captureIo().io, clock: systemClock, logger: silentLogger});
    let svc = await start();
    try {
      await waitReady(svc);
      expect((await servers(svc)).map((s) => s.metadata.name)).toEqual([
        'a-eks-us-east-1-111111111111',
        'b-eks-us-east-1-111111111111',
        'e1-eks-eu-west-1-111111111111',
      ]);

      fake.world.removeCluster(ACCOUNT, 'us-east-1', 'b');
      await cycle(svc);
      expect((await servers(svc)).map((s) => s.metadata.name)).toEqual(['a-eks-us-east-1-111111111111', 'e1-eks-eu-west-1-111111111111']);

      fake.world.removeCluster(ACCOUNT, 'eu-west-1', 'e1');
      fake.fault = failRegion('eu-west-1', 'ServiceUnavailableException');
      await cycle(svc);
      const kept = await servers(svc);
      expect(kept.map((s) => s.metadata.name)).toEqual(['a-eks-us-east-1-111111111111', 'e1-eks-eu-west-1-111111111111']);
      expect(kept[1]?.status?.stale).toBe(true);
      const status = (await (await fetch(`${svc.url}/v1/status`)).json()) as {sources: {id: string; ok: boolean; stale: boolean; last_error?: {code: string}}[]};
      expect(status.sources.find((s) => s.id === 'eks:eu-west-1:111111111111')).toMatchObject({ok: false, stale: true, last_error: {code: 'ServiceUnavailableException'}});
    } finally {
      await svc.stop({deregister: false});
    }

    // Restart while the cloud is slow: the last inventory is served before the first cycle completes.
    fake.fault = (ctx) => (ctx.operation === 'ListClusters' ? {hang: true} : undefined);
    svc = await start();
    try {
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(503);
      expect((await servers(svc)).map((s) => s.metadata.name)).toEqual(['a-eks-us-east-1-111111111111', 'e1-eks-eu-west-1-111111111111']);
    } finally {
      await svc.stop({deregister: false, graceMs: 0});
      fake.fault = undefined;
    }
    // Three cycles and a restart: room for waitReady's 60 s on a loaded machine.
  }, 120_000);
});

