/**
 * The organization workloads' world (W4): a management account, member accounts spread over
 * nested OUs of a FakeOrganization, each with the discovery role (a share of them refusing it)
 * and EKS clusters over the regions. It knows what a correct discovery must have registered
 * after each step, and moves accounts in and out of the organization between cycles.
 */
import {FakeAwsWorld, FakeOrganization} from '../test/fakes/aws-fakes.ts';
import type {Clock} from '../src/core/clock.ts';
import * as z from 'zod';
import {clusterKey, seededRandom} from './sim-world.ts';

/** The scenario of an organization workload (bench/scenarios/w4-organization.json). */
export const orgScenarioSchema = z.strictObject({
  name: z.string().min(1),
  description: z.string().optional(),
  seed: z.number().int().default(4),
  accounts: z.number().int().min(1).max(10_000),
  /** Top-level OUs; each has `child_units` nested OUs, and accounts live in the children (or the top OUs when none). */
  top_units: z.number().int().min(1),
  child_units: z.number().int().min(0).default(0),
  regions: z.array(z.string()).min(1),
  clusters: z.number().int().min(0),
  latency_ms: z.number().min(0).default(0),
  page_size: z.number().int().min(1).max(100).default(20),
  /** Share of member accounts whose role does not trust the discovery principal (AssumeRole denied). */
  denied_share: z.number().min(0).max(1).default(0),
  /** Sources and per-region describe concurrency the service runs with. */
  concurrency: z.strictObject({sources: z.number().int().min(1), per_region: z.number().int().min(1)}),
});

/** A validated organization scenario. */
export type OrgScenario = z.output<typeof orgScenarioSchema>;

/** The management account the service runs in. */
export const MANAGEMENT_ACCOUNT = '100000000000';
/** Access key of the service in the management account. */
export const MANAGEMENT_KEY = {accessKeyId: 'AKIAW4MANAGEMENT0001', secretAccessKey: 'w4-management-secret'};
/** Name of the member role. */
export const ROLE_NAME = 'kube-discovery';
/** External id the member roles require. */
export const EXTERNAL_ID = 'w4-external-id';

function accountId(i: number): string {
  return String(200_000_000_000 + i * 7919).padStart(12, '0');
}

/** The W4 world and its truth. */
export class OrgWorld {
  readonly scenario: OrgScenario;
  readonly aws: FakeAwsWorld;
  readonly org: FakeOrganization;
  readonly #leaves: string[] = [];
  readonly #clustersOf = new Map<string, string[]>();
  readonly #denied = new Set<string>();
  readonly #random: () => number;
  #next = 0;
  /** Clusters that left with their account: deregistering them is right. */
  readonly departed = new Set<string>();

  constructor(scenario: OrgScenario, clock?: Clock) {
    this.scenario = scenario;
    this.#random = seededRandom(scenario.seed);
    this.aws = new FakeAwsWorld(clock ? {clock} : {});
    this.aws.addAccount(MANAGEMENT_ACCOUNT, {accessKeys: [MANAGEMENT_KEY]});
    this.org = new FakeOrganization({managementAccount: MANAGEMENT_ACCOUNT});
    this.aws.organization = this.org;
    // The management account sits in the root, so include ["*"] covers it: it gets the role too (no clusters).
    this.aws.addRole({arn: `arn:aws:iam::${MANAGEMENT_ACCOUNT}:role/${ROLE_NAME}`, trust: [MANAGEMENT_ACCOUNT], externalId: EXTERNAL_ID});
    for (let t = 0; t < scenario.top_units; t++) {
      const top = this.org.addUnit(`unit-${t}`);
      if (scenario.child_units === 0) this.#leaves.push(top);
      for (let c = 0; c < scenario.child_units; c++) this.#leaves.push(this.org.addUnit(`unit-${t}-${c}`, top));
    }
    const perAccount = Math.floor(scenario.clusters / scenario.accounts);
    const deniedEvery = scenario.denied_share > 0 ? Math.round(1 / scenario.denied_share) : 0;
    for (let i = 0; i < scenario.accounts; i++) this.#addMember(perAccount, deniedEvery > 0 && i % deniedEvery === deniedEvery - 1);
  }

  /** Every cluster in member accounts (denied ones included). */
  get size(): number {
    let n = 0;
    for (const list of this.#clustersOf.values()) n += list.length;
    return n;
  }

  /** Member accounts whose role refuses the discovery principal. */
  get deniedAccounts(): number {
    return this.#denied.size;
  }

  /** Clusters a correct discovery has registered: every cluster of an ACTIVE member whose role it can assume. */
  expectedKeys(): Set<string> {
    const keys = new Set<string>();
    for (const [account, list] of this.#clustersOf) {
      if (this.#denied.has(account) || !this.org.has(account)) continue;
      for (const key of list) keys.add(key);
    }
    return keys;
  }

  /** One step between cycles: an account joins an OU (with its clusters), another (assumable) one leaves the organization. */
  joinAndLeave(): {joined: string; left: string} {
    const perAccount = Math.floor(this.scenario.clusters / this.scenario.accounts);
    const joined = this.#addMember(perAccount, false);
    const candidates = [...this.#clustersOf.keys()].filter((a) => a !== joined && !this.#denied.has(a) && this.org.has(a));
    const left = candidates[Math.floor(this.#random() * candidates.length)] ?? '';
    this.org.removeAccount(left);
    for (const key of this.#clustersOf.get(left) ?? []) this.departed.add(key);
    return {joined, left};
  }

  #addMember(clusters: number, denied: boolean): string {
    const id = accountId(this.#next++);
    const unit = this.#leaves[Math.floor(this.#random() * this.#leaves.length)] ?? this.org.rootId;
    this.org.addAccount(id, {parent: unit});
    this.aws.addAccount(id, {
      roles: [{arn: `arn:aws:iam::${id}:role/${ROLE_NAME}`, trust: denied ? ['999999999999'] : [MANAGEMENT_ACCOUNT], externalId: EXTERNAL_ID}],
    });
    if (denied) this.#denied.add(id);
    const regions = this.scenario.regions;
    const keys: string[] = [];
    for (let i = 0; i < clusters; i++) {
      const region = regions[i % regions.length] ?? 'us-east-1';
      const name = `eks-${String(i).padStart(3, '0')}`;
      this.aws.addCluster(id, region, {name, tags: {env: this.#random() < 0.7 ? 'prod' : 'staging'}});
      keys.push(clusterKey({cloud: 'AWS', account: id, region, name}));
    }
    this.#clustersOf.set(id, keys);
    return id;
  }
}
