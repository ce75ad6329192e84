/**
 * Adversarial: an invalid edit of a DiscoveryConfig keeps its last valid spec applied ("stale
 * beats partial"). That must survive a leader change (or a restart): the new leader never saw
 * the valid spec, and without it its first cycle deregisters every cluster the config found.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {DiscoveryConfigController} from '../../src/service/discovery-configs.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const PATH = '/apis/kube-discovery.io/v1/namespaces/kd/discoveryconfigs';
let kube: KubeEnv;

beforeAll(async () => {
  kube = await startKubeEnv();
});

afterAll(async () => {
  await kube.close();
});

const base = parseConfig(
  `version: v1
discovery_service:
  discovery_group: dyn
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: memory}
`,
  'base.yaml',
);

async function leader(applied: Config[]): Promise<DiscoveryConfigController> {
  return new DiscoveryConfigController({
    client: await kube.client(),
    namespace: 'kd',
    base,
    clock: new FakeClock(),
    logger: createLogger({level: 'silent', format: 'json'}),
    apply: (config) => void applied.push(config),
    runCycle: () => Promise.resolve({} as CycleReport),
  });
}

const regionsOf = (applied: Config[]): string[] => (applied.at(-1) ?? base).discovery_service.aws.flatMap((m) => m.regions);

describe('the last valid DiscoveryConfig spec across a leader change', () => {
  it('stays applied by the next leader after an invalid edit', async () => {
    const client = await kube.client();
    await client.request({
      method: 'POST',
      path: PATH,
      body: {apiVersion: 'kube-discovery.io/v1', kind: 'DiscoveryConfig', metadata: {name: 'eu'}, spec: {discovery_group: 'dyn', aws: [{types: ['eks'], regions: ['eu-west-1']}]}},
    });
    const firstApplied: Config[] = [];
    const first = await leader(firstApplied);
    await first.prime();
    expect(regionsOf(firstApplied)).toEqual(['us-east-1', 'eu-west-1']);

    // A typo: regions is no longer a list. The current leader keeps the last valid spec.
    const current = (await client.request({method: 'GET', path: `${PATH}/eu`})) as {metadata: Record<string, unknown>; spec: unknown};
    await client.request({method: 'PUT', path: `${PATH}/eu`, body: {...current, spec: {discovery_group: 'dyn', aws: [{types: ['eks'], regions: 5}]}}});
    await first.reconcile();
    expect(regionsOf(firstApplied)).toEqual(['us-east-1', 'eu-west-1']);
    first.stop();

    // The leader changes (or restarts).
    const nextApplied: Config[] = [];
    const next = await leader(nextApplied);
    await next.prime();
    next.stop();
    expect(regionsOf(nextApplied)).toEqual(['us-east-1', 'eu-west-1']);
  });
});
