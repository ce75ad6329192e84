/**
 * The management-group workload's world (W5): an ArmWorld whose subscriptions sit in nested
 * management groups under one root group the matcher names, a share of them denying the
 * discovery identity (403 on the managed clusters list), and subscriptions outside the root
 * group that the identity also sees (their clusters must never be registered). Between cycles
 * one outside subscription moves into the tree and one inside moves out. It knows what a correct
 * discovery must have registered after each step.
 */
import * as z from 'zod';
import type {ArmFaultHook} from '../test/fakes/arm-server.ts';
import {ArmWorld} from '../test/fakes/arm-world.ts';
import {clusterKey, seededRandom, subscriptionIdOf} from './sim-world.ts';

/** The scenario of a management-group workload (bench/scenarios/w5-management-groups.json). */
export const mgScenarioSchema = z.strictObject({
  name: z.string().min(1),
  description: z.string().optional(),
  seed: z.number().int().default(5),
  /** Subscriptions under the root group the matcher names. */
  subscriptions: z.number().int().min(1).max(10_000),
  /** Subscriptions the identity sees outside that root group. */
  outside_subscriptions: z.number().int().min(1).default(10),
  /** Groups directly under the root; each has `child_groups` nested ones, and subscriptions live in the children (or the top groups when none). */
  top_groups: z.number().int().min(1),
  child_groups: z.number().int().min(0).default(0),
  clusters_per_subscription: z.number().int().min(0),
  resource_groups_per_subscription: z.number().int().min(1).default(2),
  locations: z.array(z.string().regex(/^[a-z0-9]+$/)).min(1).default(['eastus', 'westeurope', 'southeastasia']),
  latency_ms: z.number().min(0).default(0),
  page_size: z.number().int().min(1).max(1000).default(100),
  /** Share of the subscriptions under the root that answer the managed clusters list with 403. */
  denied_share: z.number().min(0).max(1).default(0),
  concurrency: z.strictObject({sources: z.number().int().min(1), per_region: z.number().int().min(1)}),
});

/** A validated management-group scenario. */
export type MgScenario = z.output<typeof mgScenarioSchema>;

/** The group the matcher names. */
export const ROOT_GROUP = 'mg-bench-root';
/** Where outside subscriptions live (seen by the identity, not under the root). */
export const OUTSIDE_GROUP = 'mg-bench-sandbox';

/** The W5 world and its truth. */
export class ManagementGroupWorld {
  readonly scenario: MgScenario;
  readonly arm = new ArmWorld();
  readonly #leaves: string[] = [];
  readonly #clustersOf = new Map<string, string[]>();
  readonly #denied = new Set<string>();
  readonly #random: () => number;
  #next = 0;
  /** The subscription the last step moved out of the tree. */
  #lastLeft = '';
  /** Every subscription a step moved out of the tree. */
  readonly #movedOut = new Set<string>();

  constructor(scenario: MgScenario) {
    this.scenario = scenario;
    this.#random = seededRandom(scenario.seed);
    const groups = this.arm.managementGroups;
    groups.add(ROOT_GROUP);
    groups.add(OUTSIDE_GROUP);
    for (let t = 0; t < scenario.top_groups; t++) {
      const top = groups.add(`mg-bench-${t}`, {parent: ROOT_GROUP}).id;
      if (scenario.child_groups === 0) this.#leaves.push(top);
      for (let c = 0; c < scenario.child_groups; c++) this.#leaves.push(groups.add(`mg-bench-${t}-${c}`, {parent: top}).id);
    }
    const deniedEvery = scenario.denied_share > 0 ? Math.round(1 / scenario.denied_share) : 0;
    for (let i = 0; i < scenario.subscriptions; i++) this.#addSubscription(this.#leaf(), deniedEvery > 0 && i % deniedEvery === deniedEvery - 1);
    for (let i = 0; i < scenario.outside_subscriptions; i++) this.#addSubscription(OUTSIDE_GROUP, false);
  }

  /** Every cluster of every subscription, inside the root group or not. */
  get size(): number {
    let n = 0;
    for (const list of this.#clustersOf.values()) n += list.length;
    return n;
  }

  /** Subscriptions whose managed clusters list answers 403. */
  get deniedSubscriptions(): number {
    return this.#denied.size;
  }

  /** Groups below the root (the nested ones included). */
  get nestedGroups(): number {
    return this.scenario.top_groups * (1 + this.scenario.child_groups);
  }

  /** The fake's fault hook: 403 AuthorizationFailed on every call about a denied subscription. */
  readonly fault: ArmFaultHook = (ctx) => (ctx.subscription !== undefined && this.#denied.has(ctx.subscription.toLowerCase()) ? {status: 403} : undefined);

  /** Whether a subscription sits under the root group now. */
  inScope(subscriptionId: string): boolean {
    const group = this.arm.managementGroups.groupOf(subscriptionId);
    return group !== undefined && group !== OUTSIDE_GROUP;
  }

  /** Clusters a correct discovery has registered: every cluster of a subscription under the root group that does not deny. */
  expectedKeys(): Set<string> {
    const keys = new Set<string>();
    for (const [sub, list] of this.#clustersOf) {
      if (this.#denied.has(sub) || !this.inScope(sub)) continue;
      for (const key of list) keys.add(key);
    }
    return keys;
  }

  /**
   * Clusters a correct discovery may still hold for one more cycle: those of the subscription the
   * last step moved out (while it is still out). A subscription missing from one management group
   * walk is kept (stale) and deregistered when the next walk lacks it too, so the cycle right after
   * the move keeps them; any later cycle must not.
   */
  graceKeys(): Set<string> {
    const left = this.#lastLeft;
    return new Set(left && !this.inScope(left) ? (this.#clustersOf.get(left) ?? []) : []);
  }

  /** Clusters whose deregistration is right: those of subscriptions a step moved out of the tree that are still out. */
  departedKeys(): Set<string> {
    return new Set([...this.#movedOut].filter((s) => !this.inScope(s)).flatMap((s) => this.#clustersOf.get(s) ?? []));
  }

  /** One step between cycles: an outside subscription moves into a nested group, an inside (not denying) one moves out. */
  joinAndLeave(): {joined: string; left: string; leftClusters: number} {
    const outside = [...this.#clustersOf.keys()].filter((s) => !this.inScope(s));
    const joined = outside[Math.floor(this.#random() * outside.length)] ?? '';
    const inside = [...this.#clustersOf.keys()].filter((s) => s !== joined && this.inScope(s) && !this.#denied.has(s));
    const left = inside[Math.floor(this.#random() * inside.length)] ?? '';
    if (joined) this.arm.managementGroups.placeSubscription(joined, this.#leaf());
    if (left) this.arm.managementGroups.placeSubscription(left, OUTSIDE_GROUP);
    this.#lastLeft = left;
    if (left) this.#movedOut.add(left);
    return {joined, left, leftClusters: this.#clustersOf.get(left)?.length ?? 0};
  }

  #leaf(): string {
    return this.#leaves[Math.floor(this.#random() * this.#leaves.length)] ?? ROOT_GROUP;
  }

  #addSubscription(group: string, denied: boolean): string {
    const id = subscriptionIdOf(this.#next++);
    this.arm.addSubscription({subscriptionId: id, displayName: `bench-${id.slice(-4)}`});
    this.arm.managementGroups.placeSubscription(id, group);
    if (denied) this.#denied.add(id);
    const s = this.scenario;
    const keys: string[] = [];
    for (let i = 0; i < s.clusters_per_subscription; i++) {
      const resourceGroup = `rg-${i % s.resource_groups_per_subscription}`;
      const location = s.locations[i % s.locations.length] ?? 'eastus';
      const name = `aks-${String(i).padStart(3, '0')}`;
      this.arm.addCluster({subscriptionId: id, resourceGroup, name, location, tags: {env: this.#random() < 0.7 ? 'prod' : 'staging'}});
      keys.push(clusterKey({cloud: 'Azure', account: id, resourceGroup, region: location, name}));
    }
    this.#clustersOf.set(id, keys);
    return id;
  }
}

/** The root group of the simulator's `azure.management_groups` (bench/sim.ts). */
export const SIM_ROOT_GROUP = 'sim-root';

/** Places `subscriptions` round-robin in `count` groups under SIM_ROOT_GROUP, every other group nested under the one before it. */
export function placeInManagementGroups(world: ArmWorld, subscriptions: readonly string[], count: number): void {
  const groups = world.managementGroups;
  groups.add(SIM_ROOT_GROUP);
  const ids: string[] = [];
  for (let g = 0; g < count; g++) {
    const parent = g % 2 === 1 ? ids[g - 1] : SIM_ROOT_GROUP;
    ids.push(groups.add(`sim-group-${g}`, {parent}).id);
  }
  subscriptions.forEach((sub, i) => groups.placeSubscription(sub, ids[i % ids.length]));
}
