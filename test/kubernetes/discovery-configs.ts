/** DiscoveryConfig fixtures of the tests that run matchers from custom resources (namespace `kd`). */
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import type {KubeClient} from '../../src/registry/kube-client.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {DiscoveryConfigController} from '../../src/service/discovery-configs.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {KubeEnv} from './kube-env.ts';

/** The API path of the DiscoveryConfigs in namespace `kd`. */
export const DISCOVERY_CONFIGS_PATH = '/apis/kube-discovery.io/v1/namespaces/kd/discoveryconfigs';

/** Creates DiscoveryConfig `name` in `kd`: one EKS matcher over `regions` for discovery group `group`. */
export async function createDiscoveryConfig(client: KubeClient, name: string, group: string, regions: unknown): Promise<void> {
  await client.request({
    method: 'POST',
    path: DISCOVERY_CONFIGS_PATH,
    body: {apiVersion: 'kube-discovery.io/v1', kind: 'DiscoveryConfig', metadata: {name}, spec: {discovery_group: group, aws: [{types: ['eks'], regions}]}},
  });
}

/** The config file DiscoveryConfigs of group `dyn` add to: EKS in us-east-1, memory storage. */
export const dynBaseConfig: Config = parseConfig(
  `version: v1
discovery_service:
  discovery_group: dyn
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: memory}
`,
  'base.yaml',
);

/** A DiscoveryConfigController over `kd` on top of dynBaseConfig that records every config it applies; its cycles do nothing. */
export async function recordingController(kube: KubeEnv, applied: Config[], clock: FakeClock = new FakeClock()): Promise<DiscoveryConfigController> {
  return new DiscoveryConfigController({
    client: await kube.client(),
    namespace: 'kd',
    base: dynBaseConfig,
    clock,
    logger: createLogger({level: 'silent', format: 'json'}),
    apply: (config) => void applied.push(config),
    runCycle: () => Promise.resolve({} as CycleReport),
  });
}
