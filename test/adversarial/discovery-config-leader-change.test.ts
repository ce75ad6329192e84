/**
 * Adversarial: an invalid edit of a DiscoveryConfig keeps its last valid spec applied ("stale
 * beats partial"). That must survive a leader change (or a restart): the new leader never saw
 * the valid spec, and without it its first cycle deregisters every cluster the config found.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {Config} from '../../src/config/schema.ts';
import {createDiscoveryConfig, DISCOVERY_CONFIGS_PATH as PATH, dynBaseConfig as base, recordingController as leaderOf} from '../kubernetes/discovery-configs.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let kube: KubeEnv;

beforeAll(async () => {
  kube = await startKubeEnv();
});

afterAll(async () => {
  await kube.close();
});

const leader = (applied: Config[]) => leaderOf(kube, applied);

const regionsOf = (applied: Config[]): string[] => (applied.at(-1) ?? base).discovery_service.aws.flatMap((m) => m.regions);

describe('the last valid DiscoveryConfig spec across a leader change', () => {
  it('stays applied by the next leader after an invalid edit', async () => {
    const client = await kube.client();
    await createDiscoveryConfig(client, 'eu', 'dyn', ['eu-west-1']);
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
