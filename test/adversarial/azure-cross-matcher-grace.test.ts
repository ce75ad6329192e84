/**
 * Adversarial: after a start (or in every `once`), the walk grace reads the registry for members
 * a previous walk missed. Entries carry no matcher, so a subscription another matcher lists (a
 * static subscription the `"*"` identity cannot see) looks "missed" to the `"*"` list. A cluster
 * deleted in it must still be deregistered by consecutive runs — not kept stale at every run
 * because that subscription's other, still-listed entries never all carry the mark.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {SUB_A, SUB_B, TENANT, subscriptionHidingClient} from '../clouds/aks-helpers.ts';

let arm: FakeArm;
const world = new ArmWorld();
beforeAll(async () => {
  for (const subscriptionId of [SUB_A, SUB_B]) world.addSubscription({subscriptionId, tenantId: TENANT});
  world.addCluster({subscriptionId: SUB_A, resourceGroup: 'rg', name: 'c-a'});
  world.addCluster({subscriptionId: SUB_B, resourceGroup: 'rg', name: 'c-b1'});
  world.addCluster({subscriptionId: SUB_B, resourceGroup: 'rg', name: 'c-b2'});
  arm = await startFakeArm({world});
});
afterAll(async () => {
  await arm.close();
});


describe('walk grace across matchers', () => {
  it('a cluster deleted in a subscription of another matcher is deregistered by consecutive `once`-style runs', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: g1
  azure:
    - types: [aks]
      subscriptions: ["*"]
      resource_manager_endpoint: ${arm.url}
    - types: [aks]
      subscriptions: ["${SUB_B}"]
      resource_manager_endpoint: ${arm.url}
storage: {type: memory}
`,
      'x.yaml',
    );
    const replica = (): Discovery =>
      new Discovery({config, clock: systemClock, azure: {credential: fakeTokenCredential(), clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 0}, httpClient: subscriptionHidingClient(SUB_B)}}});
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    try {
      const registrar = createRegistrar(backend, heartbeat, 'g1');
      const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
      // Long-running process: first cycle, then the cluster is deleted, then two more cycles.
      const running = replica();
      await running.runCycle(registrar);
      expect(await names()).toHaveLength(3);
      world.removeCluster({subscriptionId: SUB_B, resourceGroup: 'rg', name: 'c-b2'});
      const r1 = await running.runCycle(registrar);
      expect(r1.items.find((i) => i.name.includes('c-b2'))?.action).toBe('delete');
      world.addCluster({subscriptionId: SUB_B, resourceGroup: 'rg', name: 'c-b2'});
      await running.runCycle(registrar);
      expect(await names()).toHaveLength(3);
      world.removeCluster({subscriptionId: SUB_B, resourceGroup: 'rg', name: 'c-b2'});
      // Now `once`-style runs (one Discovery per run): a new process every run.
      // The first run of a new process may keep it once (it cannot tell the matchers apart); the second deletes it.
      for (let run = 1; run <= 2; run++) await replica().runCycle(registrar);
      expect((await names()).some((n) => n.includes('c-b2'))).toBe(false);
      expect((await names()).filter((n) => n.includes('c-b1') || n.includes('c-a'))).toHaveLength(2);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});
