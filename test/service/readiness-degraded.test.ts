/**
 * A service whose every source fails from the start (no or bad cloud credentials) stays in
 * rotation for reads but says it is not doing its job: /readyz answers 200 `degraded` with the
 * reason, and /v1/status leads with a one-line summary; once a source answers it is `ready`.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {combineFaults, failRegion, type FakeAws} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAREADINESSTEST001', secretAccessKey: 'readiness-secret'};
let aws: AwsServiceWorld;
let fake: FakeAws;

beforeAll(async () => {
  aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT, populate: (world) => world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'})});
  fake = aws.fake;
});

afterAll(() => aws.close());

/** Runs a cycle that starts after this call: /readyz answers once the first cycle's plan is applied, before that cycle ends. */
async function cycle(svc: RunningService): Promise<void> {
  const asked = Date.now();
  let done = svc.nextCycle();
  svc.trigger();
  while ((await done).startedAt < asked) done = svc.nextCycle();
}

describe('readiness when no source has ever succeeded', () => {
  it('is 200 degraded with the reason, and ready once a source answers', async () => {
    fake.fault = combineFaults(failRegion('us-east-1', 'UnrecognizedClientException'), failRegion('eu-west-1', 'UnrecognizedClientException'));
    const config = parseConfig(
      'version: v1\ndiscovery_service:\n  discovery_group: r\n  poll_interval: 1h\n  aws: [{types: [eks], regions: [us-east-1, eu-west-1]}]\nstorage: {type: memory}\nprobe: {enabled: false}\nhttp: {listen_addr: "127.0.0.1:0"}\n',
      'r.yaml',
    );
    const running = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger});
    try {
      // 503 until the first cycle completed.
      let ready = await fetch(`${running.url}/readyz`);
      while (ready.status === 503) {
        await new Promise((r) => setTimeout(r, 25));
        ready = await fetch(`${running.url}/readyz`);
      }
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({
        ready: true,
        status: 'degraded',
        reason: expect.stringMatching(/^no discovery source has succeeded yet \(2 failing: (access_denied|other)\); serving the registry as it is, details in \/v1\/status$/),
      });
      const status = (await (await fetch(`${running.url}/v1/status`)).json()) as Record<string, unknown>;
      expect(Object.keys(status)[0]).toBe('summary');
      expect(status['summary']).toMatch(/^leader; 0 clusters; 2 of 2 sources failing, first: eks:eu-west-1:\S+: UnrecognizedClientException .*; last cycle failure at /);

      fake.fault = undefined;
      await cycle(running);
      expect(await (await fetch(`${running.url}/readyz`)).json()).toEqual({ready: true, status: 'ready'});
      expect(((await (await fetch(`${running.url}/v1/status`)).json()) as {summary: string}).summary).toMatch(/^leader; 1 cluster; all 2 sources ok; last cycle success at /);
    } finally {
      await running.stop({deregister: false, graceMs: 0});
    }
  });
});
