/** `discovery_service.enabled: false`: a replica that serves the registry but never calls a cloud or writes. */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import type {FakeAws} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAREADONLYTEST0001', secretAccessKey: 'read-only-secret'};
let aws: AwsServiceWorld;
let fake: FakeAws;

beforeAll(async () => {
  aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT, tmpPrefix: 'kd-ro-', populate: (world) => world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'})});
  fake = aws.fake;
});

afterAll(() => aws.close());

function config(enabled: boolean) {
  return parseConfig(
    `version: v1
discovery_service:
  enabled: ${enabled}
  discovery_group: ro
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: sqlite, path: ${aws.file('registry.db')}}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
    'ro.yaml',
  );
}

async function names(svc: RunningService): Promise<string[]> {
  return ((await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: KubeServer[]}).items.map((s) => s.metadata.name);
}

describe('a read-only replica', () => {
  it('serves the registry, is ready, refuses triggers, and never calls the cloud or writes', async () => {
    const writer = await startService({config: config(true), io: captureIo().io, clock: systemClock, logger: silentLogger});
    await writer.nextCycle();
    await writer.stop({deregister: false});

    fake.stats.reset();
    const reader = await startService({config: config(false), io: captureIo().io, clock: systemClock, logger: silentLogger});
    try {
      expect(await names(reader)).toEqual(['a-eks-us-east-1-111111111111']);
      expect((await fetch(`${reader.url}/readyz`)).status).toBe(200);
      expect((await fetch(`${reader.url}/v1/discover`, {method: 'POST'})).status).toBe(409);
      expect(reader.role()).toBe('follower');
    } finally {
      // Deregistering on exit is the writer's business: a replica that never wrote deletes nothing.
      await reader.stop({deregister: true});
    }
    expect(fake.stats.count()).toBe(0);
    const again = await startService({config: config(false), io: captureIo().io, clock: systemClock, logger: silentLogger});
    try {
      expect(await names(again)).toEqual(['a-eks-us-east-1-111111111111']);
    } finally {
      await again.stop({deregister: false});
    }
  });
});
