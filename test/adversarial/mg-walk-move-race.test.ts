/**
 * Adversarial: the management groups walk is no snapshot. A subscription moved between groups
 * while it runs can be missing from every answer of a successful, well-formed walk although it
 * never left the matcher's scope:
 * - two named groups are walked in parallel: the new group answered before the move, the old one
 *   after it;
 * - one named group is read page by page: the subscription moved from a group late in the
 *   descendants order to one already paged past.
 * Its clusters must not be deregistered by that one walk (kept, stale); a subscription missing
 * from two walks in a row is deregistered. The ARM fake answers over the wire; the real SDK
 * clients of AzureSources read it. The rule holds across a restart, a leader change, a rebuilt
 * planner and `once`: the previous walk is read back from the registry's stale marks.
 */
import {createDefaultHttpClient, type HttpClient} from '@azure/core-rest-pipeline';
import {afterEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import type {SourceResult} from '../../src/core/types.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {reconcile} from '../../src/discovery/reconcile.ts';
import {context, stored} from '../discovery/builders.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {TENANT, fakeSources, matcher, resultOf, runPlan} from '../clouds/aks-helpers.ts';

const STAYS = '00000000-0000-0000-0000-0000000000a1';
const ALSO = '00000000-0000-0000-0000-0000000000a2';
const MOVES = '00000000-0000-0000-0000-0000000000b2';

let arm: FakeArm | undefined;

afterEach(async () => {
  await arm?.close();
  arm = undefined;
});

function worldWith(groups: readonly [string, string?][], placement: readonly [string, string][]): ArmWorld {
  const world = new ArmWorld();
  for (const [id, parent] of groups) world.managementGroups.add(id, parent === undefined ? {} : {parent});
  for (const [id, group] of placement) {
    world.addSubscription({subscriptionId: id, tenantId: TENANT});
    world.managementGroups.placeSubscription(id, group);
    world.addCluster({subscriptionId: id, resourceGroup: 'rg', name: `c-${id.slice(-2)}`});
  }
  return world;
}

type Stored = ReturnType<typeof stored>;
const actions = (current: Stored[], results: readonly SourceResult[]): [string | undefined, string][] =>
  reconcile(current, evaluate(results, context()), results, 'g1').items.map((i) => [i.labels['subscription-id'], i.action]);
const registered = (results: readonly SourceResult[]): Stored[] => [...evaluate(results, context()).candidates.values()].map((c) => stored(c.server));

/**
 * The same walk four times: raced (the mover missed), settled (found in its new group), then the
 * mover taken out of every named group: the first walk without it keeps it, the second deregisters it.
 */
async function raceThenLeave(plan: () => Promise<SourceResult[]>, arm: {race(): void; raced(): boolean; leave(): void}): Promise<void> {
  const first = await plan();
  const current = registered(first);
  expect(current.map((s) => s.spec.cluster.metadata.labels['subscription-id']).sort()).toEqual([STAYS, ALSO, MOVES].sort());

  arm.race();
  const raced = await plan();
  expect(arm.raced()).toBe(true);
  expect(raced.every((r) => r.ok)).toBe(true);
  expect(actions(current, raced).filter(([, a]) => a !== 'unchanged')).toEqual([[MOVES, 'stale']]);
  expect(resultOf(raced, `aks:${MOVES}`)).toMatchObject({ok: true, clusters: [], notAListing: true, skippedReason: expect.stringContaining('missing from this management group walk') as unknown});

  const settled = await plan();
  expect(actions(current, settled).filter(([, a]) => a !== 'unchanged')).toEqual([]);

  arm.leave();
  const once = await plan();
  expect(actions(current, once).filter(([, a]) => a !== 'unchanged')).toEqual([[MOVES, 'stale']]);
  const twice = await plan();
  expect(actions(current, twice).filter(([, a]) => a !== 'unchanged')).toEqual([[MOVES, 'delete']]);
}

describe('a subscription moving between management groups while the walk runs', () => {
  it('two named groups walked in parallel: the new one answered before the move, the old one after', async () => {
    const world = worldWith([['mg-new'], ['mg-old'], ['mg-elsewhere']], [[STAYS, 'mg-new'], [ALSO, 'mg-new'], [MOVES, 'mg-old']]);
    arm = await startFakeArm({world});
    // The SDK's own HTTP client; when armed, mg-old's descendants request is held until mg-new's
    // answer has arrived, and the subscription moves in between (the fake answers both for real).
    const inner = createDefaultHttpClient();
    let armed = false;
    let raced = false;
    let newAnswered: Promise<void> = Promise.resolve();
    let markNewAnswered = (): void => undefined;
    const httpClient: HttpClient = {
      async sendRequest(request) {
        const racing = armed && request.url.includes('/descendants');
        if (racing && request.url.includes('/mg-old/')) await newAnswered;
        const response = await inner.sendRequest(request);
        if (racing && request.url.includes('/mg-new/') && !request.url.includes('skiptoken')) {
          world.managementGroups.placeSubscription(MOVES, 'mg-new');
          armed = false;
          raced = true;
          markNewAnswered();
        }
        return response;
      },
    };
    const {sources} = fakeSources(arm, {clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 0}, httpClient}});
    // One page per group, so mg-new's first answer is its whole answer.
    const m = [matcher(arm, {management_groups: ['mg-new', 'mg-old']})];
    await raceThenLeave(async () => runPlan(await sources.plan(m)), {
      race() {
        armed = true;
        newAnswered = new Promise<void>((resolve) => (markNewAnswered = resolve));
      },
      raced: () => raced,
      leave: () => world.managementGroups.placeSubscription(MOVES, 'mg-elsewhere'),
    });
  });

  it('one named group read page by page: moved to a nested group the walk had already paged past', async () => {
    // Descendants of mg-root in order: mg-a, mg-b | ALSO, STAYS | MOVES (pages of two). Moved to
    // mg-a before the third page: mg-a, mg-b | ALSO, MOVES | STAYS — no page has it.
    const world = worldWith([['mg-root'], ['mg-a', 'mg-root'], ['mg-b', 'mg-root'], ['mg-elsewhere']], [[ALSO, 'mg-a'], [STAYS, 'mg-b'], [MOVES, 'mg-b']]);
    let armed = false;
    let raced = false;
    let pages = 0;
    arm = await startFakeArm({
      world,
      pageSize: 2,
      fault: (ctx) => {
        if (!armed || ctx.operation !== 'managementGroups.descendants') return undefined;
        if (++pages === 3) {
          world.managementGroups.placeSubscription(MOVES, 'mg-a');
          armed = false;
          raced = true;
        }
        return undefined;
      },
    });
    const {sources} = fakeSources(arm);
    const m = [matcher(arm, {management_groups: ['mg-root']})];
    await raceThenLeave(async () => runPlan(await sources.plan(m)), {
      race() {
        armed = true;
        pages = 0;
      },
      raced: () => raced,
      leave: () => world.managementGroups.placeSubscription(MOVES, 'mg-elsewhere'),
    });
  });
});

describe('the two-walk rule across a restart (leader change, rebuilt planner, `once`)', () => {
  it('a new discovery keeps a subscription its first walk missed, and deregisters only after two walks without it, whichever process made them', async () => {
    // Pages of two, as in the page-by-page race above: a move to mg-a before the third page is missed.
    const world = worldWith([['mg-root'], ['mg-a', 'mg-root'], ['mg-b', 'mg-root'], ['mg-elsewhere']], [[ALSO, 'mg-a'], [STAYS, 'mg-b'], [MOVES, 'mg-b']]);
    let armed = false;
    let pages = 0;
    arm = await startFakeArm({
      world,
      pageSize: 2,
      fault: (ctx) => {
        if (armed && ctx.operation === 'managementGroups.descendants' && ++pages === 3) {
          world.managementGroups.placeSubscription(MOVES, 'mg-a');
          armed = false;
        }
        return undefined;
      },
    });
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: g1
  azure:
    - types: [aks]
      subscriptions: ["*"]
      management_groups: [mg-root]
      resource_manager_endpoint: ${arm.url}
storage: {type: memory}
`,
      'mg-restart.yaml',
    );
    const caPem = arm.caPem;
    // One Discovery per process: a restart, another replica taking the lead, a DiscoveryConfig change or a `once` run.
    const replica = (): Discovery =>
      new Discovery({config, clock: systemClock, azure: {credential: fakeTokenCredential(), clientOptions: {tlsOptions: {ca: caPem}, retryOptions: {maxRetries: 0}}}});
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    try {
      const registrar = createRegistrar(backend, heartbeat, 'g1');
      const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
      const deletes = (report: Awaited<ReturnType<Discovery['runCycle']>>): string[] => report.items.filter((i) => i.action === 'delete').map((i) => i.name);
      await replica().runCycle(registrar);
      const all = await names();
      expect(all).toHaveLength(3);
      const mover = all.find((n) => n.endsWith(MOVES)) ?? '';

      // Restarted: the new process's first walk races the move and misses the subscription.
      const restarted = replica();
      armed = true;
      const raced = await restarted.runCycle(registrar);
      expect(armed).toBe(false);
      expect(deletes(raced)).toEqual([]);
      expect(raced.items.find((i) => i.name === mover)).toMatchObject({action: 'stale', reason: expect.stringContaining('missing from this management group walk only') as unknown});
      expect((await restarted.runCycle(registrar)).items.find((i) => i.name === mover)?.action).toBe('update');
      expect(await names()).toEqual(all);

      // Moved out for real; a restart between the two walks that miss it: the second still deregisters it.
      world.managementGroups.placeSubscription(MOVES, 'mg-elsewhere');
      expect(deletes(await restarted.runCycle(registrar))).toEqual([]);
      expect(deletes(await replica().runCycle(registrar))).toEqual([mover]);

      // `once` after `once` (a new process every walk): the first keeps, the second deregisters.
      world.managementGroups.placeSubscription(MOVES, 'mg-b');
      await replica().runCycle(registrar);
      expect(await names()).toEqual(all);
      world.managementGroups.placeSubscription(MOVES, 'mg-elsewhere');
      expect(deletes(await replica().runCycle(registrar))).toEqual([]);
      expect(await names()).toEqual(all);
      expect(deletes(await replica().runCycle(registrar))).toEqual([mover]);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});
