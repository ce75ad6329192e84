/**
 * A DiscoveryConfig edited into an invalid spec keeps its last valid spec applied, also by a new
 * leader that never saw the valid one: the spec is persisted in the object's status (`appliedSpec`), not only in
 * the memory of the replica that validated it. Two controllers against the fake API server play
 * the old and the new leader.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import type {KubeClient} from '../../src/registry/kube-client.ts';
import {DiscoveryConfigController} from '../../src/service/discovery-configs.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {createDiscoveryConfig, DISCOVERY_CONFIGS_PATH} from '../kubernetes/discovery-configs.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';

const PATH = DISCOVERY_CONFIGS_PATH;
const base = parseConfig('version: v1\ndiscovery_service:\n  discovery_group: mgmt\n  aws: [{types: [eks], regions: [us-east-1]}]\n', 'svc.yaml');

let env: KubeEnv;
let client: KubeClient;
const controllers: DiscoveryConfigController[] = [];

/** A leader's controller; `regions()` are the aws regions of the matchers it applied last. */
function leader(): {controller: DiscoveryConfigController; regions: () => string[] | undefined} {
  let applied: Config | undefined;
  const controller = new DiscoveryConfigController({
    client,
    namespace: 'kd',
    base,
    clock: new FakeClock(),
    logger: silentLogger,
    apply: (config) => (applied = config),
    runCycle: () => Promise.resolve({} as CycleReport),
  });
  controllers.push(controller);
  return {controller, regions: () => applied?.discovery_service.aws.flatMap((m) => m.regions)};
}

async function putSpec(name: string, spec: unknown): Promise<void> {
  const current = (await client.request({method: 'GET', path: `${PATH}/${name}`})) as Record<string, unknown>;
  await client.request({method: 'PUT', path: `${PATH}/${name}`, body: {...current, spec}});
}

const ready = async (name: string) =>
  (((await client.request({method: 'GET', path: `${PATH}/${name}`})) as {status?: {conditions?: Array<Record<string, unknown>>}}).status?.conditions ?? []).find((c) => c['type'] === 'Ready');

beforeEach(async () => {
  env = await startKubeEnv();
  client = await env.client();
});
afterEach(async () => {
  for (const c of controllers.splice(0)) c.stop();
  await env.close();
});

describe('DiscoveryConfig across a leader change', () => {
  it('a new leader applies the last valid spec of a DiscoveryConfig that is already invalid', async () => {
    await createDiscoveryConfig(client, 'eu', 'mgmt', ['eu-west-1']);
    const old = leader();
    await old.controller.prime();
    expect(old.regions()).toEqual(['us-east-1', 'eu-west-1']);

    // A typo while the old leader runs: it keeps the valid spec.
    await putSpec('eu', {discovery_group: 'mgmt', aws: [{types: ['eks'], regions: 5}]});
    await old.controller.reconcile();
    expect(old.regions()).toEqual(['us-east-1', 'eu-west-1']);
    old.controller.stop();

    // The new leader never saw the valid spec: it must not drop eu-west-1 (its first cycle would deregister those clusters).
    const next = leader();
    await next.controller.prime();
    expect(next.regions()).toEqual(['us-east-1', 'eu-west-1']);
    expect(await ready('eu')).toMatchObject({status: 'False', reason: 'Invalid', message: expect.stringMatching(/spec\.aws\[0\]\.regions: .*\(the last valid spec stays applied\)$/)});
  });

  it('a DiscoveryConfig that was never valid applies nothing, with a new leader too', async () => {
    await createDiscoveryConfig(client, 'bad', 'mgmt', 5);
    const first = leader();
    await first.controller.prime();
    expect(first.regions()).toEqual(['us-east-1']);
    first.controller.stop();
    const next = leader();
    await next.controller.prime();
    expect(next.regions()).toEqual(['us-east-1']);
    expect((await ready('bad'))?.['message']).not.toMatch(/last valid/);
  });

  it('a persisted spec of another discovery group is not applied', async () => {
    await createDiscoveryConfig(client, 'other', 'other', ['ap-south-1']);
    // Status written by the other group's leader.
    const obj = (await client.request({method: 'GET', path: `${PATH}/other`})) as Record<string, unknown>;
    await client.request({method: 'PUT', path: `${PATH}/other/status`, body: {...obj, status: {appliedSpec: {discovery_group: 'other', aws: [{types: ['eks'], regions: ['ap-south-1']}]}}}});
    await putSpec('other', {discovery_group: 'other', aws: 'typo'});
    const l = leader();
    await l.controller.prime();
    expect(l.regions()).toEqual(['us-east-1']);
  });
});
