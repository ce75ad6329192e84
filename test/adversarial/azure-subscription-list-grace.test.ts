/**
 * Adversarial: `subscriptions: ["*"]` re-lists the subscriptions every cycle, and that list is no
 * listing of clusters. A subscription it does not show for one answer (a role assignment being
 * propagated, an eventually consistent read) still holds its clusters: they must not be
 * deregistered on that one answer, nor on the first answer after a restart. A subscription
 * missing from two successful lists in a row is deregistered, whichever process read them. The
 * ARM fake answers over the wire; the subscription list's answer is filtered on the way back.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import {SUB_A, SUB_B, TENANT, subscriptionHidingClient} from '../clouds/aks-helpers.ts';

let arm: FakeArm;
/** While set, the subscription list's answers leave SUB_B out. */
let hidden = false;

beforeAll(async () => {
  const world = new ArmWorld();
  for (const subscriptionId of [SUB_A, SUB_B]) {
    world.addSubscription({subscriptionId, tenantId: TENANT});
    world.addCluster({subscriptionId, resourceGroup: 'rg', name: `c-${subscriptionId.slice(-2)}`});
  }
  arm = await startFakeArm({world});
});

afterAll(async () => {
  await arm.close();
});

describe('a subscription missing from one subscription list', () => {
  it('is kept (stale) by that list, also after a restart, and deregistered only by the second list in a row without it', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: g1
  azure:
    - types: [aks]
      subscriptions: ["*"]
      resource_manager_endpoint: ${arm.url}
storage: {type: memory}
`,
      'sub-grace.yaml',
    );
    const caPem = arm.caPem;
    // One Discovery per process: a restart, another replica taking the lead, a DiscoveryConfig change or a `once` run.
    const replica = (): Discovery =>
      new Discovery({config, clock: systemClock, azure: {credential: fakeTokenCredential(), clientOptions: {tlsOptions: {ca: caPem}, retryOptions: {maxRetries: 0}, httpClient: subscriptionHidingClient(SUB_B, () => hidden)}}});
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    try {
      const registrar = createRegistrar(backend, heartbeat, 'g1');
      const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
      const deletes = (report: CycleReport): string[] => report.items.filter((i) => i.action === 'delete').map((i) => i.name);
      const running = replica();
      await running.runCycle(registrar);
      const all = await names();
      expect(all).toHaveLength(2);
      const b = all.find((n) => n.endsWith(SUB_B)) ?? '';

      hidden = true;
      const once = await running.runCycle(registrar);
      expect(deletes(once)).toEqual([]);
      expect(once.items.find((i) => i.name === b)).toMatchObject({action: 'stale', reason: expect.stringContaining('missing from this subscription list only') as unknown});
      hidden = false;
      expect((await running.runCycle(registrar)).items.find((i) => i.name === b)?.action).toBe('update');

      // Missing again, and the process restarts between the two lists: the first keeps, the second deregisters.
      hidden = true;
      const restarted = await replica().runCycle(registrar);
      expect(deletes(restarted)).toEqual([]);
      expect(await names()).toEqual(all);
      expect(deletes(await replica().runCycle(registrar))).toEqual([b]);
      expect(await names()).toEqual(all.filter((n) => n !== b));
    } finally {
      hidden = false;
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});
