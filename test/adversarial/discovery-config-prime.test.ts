/**
 * Adversarial: a new leader primes the DiscoveryConfig matchers before its first cycle, so that
 * cycle does not deregister their clusters. When the first DiscoveryConfig list fails (an API
 * server hiccup at take-over, a 503, a malformed list), the leader must not go on with the
 * config file's matchers alone: that first cycle would deregister every cluster only the
 * DiscoveryConfigs find.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {Config} from '../../src/config/schema.ts';
import {createDiscoveryConfig, DISCOVERY_CONFIGS_PATH, dynBaseConfig as base, recordingController} from '../kubernetes/discovery-configs.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let kube: KubeEnv;
/** The API server's own DiscoveryConfigList, as JSON text. */
let realList = '';

beforeAll(async () => {
  kube = await startKubeEnv();
  await createDiscoveryConfig(await kube.client(), 'eu', 'dyn', ['eu-west-1']);
  realList = JSON.stringify(await (await kube.client()).request({method: 'GET', path: DISCOVERY_CONFIGS_PATH}));
});

afterAll(async () => {
  await kube.close();
});

describe('priming DiscoveryConfig matchers when the first list fails', () => {
  const faults: [string, () => {status: number; body: string}][] = [
    ['a 503', () => ({status: 503, body: '{"kind":"Status","status":"Failure","code":503,"reason":"ServiceUnavailable"}'})],
    ['a malformed 200', () => ({status: 200, body: '{"kind":"DiscoveryConfigList"}'})],
    // JSON.parse keeps the last of two equal keys: the real list followed by `"items":[]` would read as no DiscoveryConfigs.
    ['a 200 whose items are given twice, the second empty', () => ({status: 200, body: realList.replace(/\}\s*$/, ',"items":[]}')})],
    // A list with `metadata.continue` is one page of a longer list: the DiscoveryConfigs on its later pages are still there.
    ['a 200 that is the first page of a longer list, without the DiscoveryConfig', () => ({status: 200, body: '{"kind":"DiscoveryConfigList","apiVersion":"kube-discovery.io/v1","metadata":{"resourceVersion":"1","continue":"more"},"items":[]}'})],
  ];
  for (const [what, answer] of faults) {
    it(`does not hand over the config file's matchers alone after ${what}`, async () => {
      let failures = 2;
      kube.server.setFault((call) =>
        call.method === 'GET' && !call.watch && call.path.endsWith('/discoveryconfigs') && failures-- > 0 ? answer() : undefined,
      );
      const clock = new FakeClock();
      const applied: Config[] = [];
      const controller = await recordingController(kube, applied, clock);
      let settled = false;
      const primed = controller.prime().finally(() => {
        settled = true;
      });
      for (let i = 0; i < 100 && !settled; i++) {
        await new Promise((r) => setTimeout(r, 5));
        await clock.advance(1_000);
      }
      await primed;
      controller.stop();
      kube.server.setFault(undefined);
      // When prime returns, the scheduler starts its first cycle with whatever was applied last.
      const regions = applied.at(-1)?.discovery_service.aws.flatMap((m) => m.regions) ?? base.discovery_service.aws.flatMap((m) => m.regions);
      expect(regions).toEqual(['us-east-1', 'eu-west-1']);
    });
  }
});
