/**
 * Fills the fakes' worlds (FakeAwsWorld, ArmWorld) from a scenario, churns them, and knows which
 * clusters a correct discovery must register at any moment (the "truth" the bench compares
 * against). Everything is derived from the scenario's seed, so two runs build the same world.
 */
import type {ArmWorld, FakeManagedCluster} from '../test/fakes/arm-world.ts';
import type {EksClusterStatus, FakeAwsWorld} from '../test/fakes/aws-fakes.ts';
import {accountsOf, regionsOf, type Scenario} from './scenario.ts';

/** Where a simulated cluster's Kubernetes API lives and what its probe should find. */
export type ClusterHealth = 'healthy' | 'unmapped' | 'forbidden';

/** One simulated cluster, whichever cloud. */
export interface SimCluster {
  readonly cloud: 'AWS' | 'Azure';
  /** Account id or subscription id. */
  readonly account: string;
  /** AWS region or Azure location. */
  readonly region: string;
  readonly resourceGroup?: string;
  readonly name: string;
  readonly health: ClusterHealth;
  /** Entra ID integrated (AKS only). */
  readonly aad?: boolean;
}

/** Identity of a cluster as the registry spells it: cloud, account/subscription, (resource group,) name. */
export function clusterKey(c: {cloud: string; account: string; resourceGroup?: string | undefined; region: string; name: string}): string {
  return c.cloud === 'AWS' ? `AWS/${c.account}/${c.region}/${c.name}` : `Azure/${c.account}/${c.resourceGroup ?? ''}/${c.name}`.toLowerCase();
}

/** A small deterministic PRNG (mulberry32), so worlds and churn repeat run to run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ENVS = ['prod', 'staging', 'dev'] as const;
const TEAMS = ['payments', 'search', 'platform', 'data', 'identity'] as const;
const OTHER_EKS: readonly EksClusterStatus[] = ['CREATING', 'DELETING', 'FAILED'];

/** How a cluster's Kubernetes API is reached: filled in by the simulator once its API servers run. */
export interface KubeEndpoints {
  /** Server URL and base64 CA PEM for a cluster (undefined: a placeholder endpoint nobody can reach). */
  endpointFor(cluster: SimCluster): {url: string; caPem: string} | undefined;
}

/** What a churn step changed. */
export interface ChurnResult {
  readonly created: number;
  readonly deleted: number;
  readonly retagged: number;
}

/** The simulated clusters of both clouds, kept in step with the fakes' worlds. */
export class SimWorld {
  readonly scenario: Scenario;
  readonly aws: FakeAwsWorld;
  readonly arm: ArmWorld;
  readonly #random: () => number;
  readonly #clusters = new Map<string, SimCluster>();
  /** Clusters discovery must skip (other states), by key. */
  readonly #skipped = new Set<string>();
  #endpoints: KubeEndpoints | undefined;
  #serial = 0;

  constructor(scenario: Scenario, aws: FakeAwsWorld, arm: ArmWorld) {
    this.scenario = scenario;
    this.aws = aws;
    this.arm = arm;
    this.#random = seededRandom(scenario.seed);
  }

  /** Every cluster of the scenario, before its API servers exist (endpoints are set by `attachEndpoints`). */
  plan(): SimCluster[] {
    const out: SimCluster[] = [];
    const {aws, azure, kube} = this.scenario;
    let unmapped = kube?.unmapped ?? 0;
    // Both clouds get forbidden clusters when both are simulated.
    let forbidden = aws && azure ? Math.ceil((kube?.forbidden ?? 0) / 2) : kube?.forbidden ?? 0;
    let forbiddenAzure = (kube?.forbidden ?? 0) - forbidden;
    if (aws) {
      const accounts = accountsOf(aws);
      const regions = regionsOf(aws);
      for (const account of accounts) {
        for (const region of regions) {
          for (let i = 0; i < aws.clusters_per_region; i++) {
            const health: ClusterHealth = unmapped-- > 0 ? 'unmapped' : forbidden-- > 0 ? 'forbidden' : 'healthy';
            out.push({cloud: 'AWS', account, region, name: `eks-${region}-${pad(i)}`, health});
          }
        }
      }
    }
    if (azure) {
      for (let s = 0; s < azure.subscriptions; s++) {
        const subscriptionId = subscriptionIdOf(s);
        for (let g = 0; g < azure.resource_groups_per_subscription; g++) {
          for (let i = 0; i < azure.clusters_per_resource_group; i++) {
            const location = azure.locations[(g + i) % azure.locations.length] ?? 'eastus';
            const health: ClusterHealth = forbiddenAzure-- > 0 ? 'forbidden' : 'healthy';
            out.push({cloud: 'Azure', account: subscriptionId, region: location, resourceGroup: `rg-${pad(g)}`, name: `aks-${pad(s)}-${pad(g)}-${pad(i)}`, health, aad: this.#random() < azure.aad_share});
          }
        }
      }
    }
    return out;
  }

  /** Adds the planned clusters to the worlds, pointing their APIs at `endpoints`. */
  populate(clusters: readonly SimCluster[], endpoints: KubeEndpoints | undefined): void {
    this.#endpoints = endpoints;
    for (const c of clusters) this.#add(c, this.#random() < this.#otherShare(c.cloud));
  }

  /** Clusters a correct discovery registers now (kept states, sources not failing), by key. */
  expectedKeys(): Set<string> {
    const failRegions = new Set(this.scenario.aws?.fail_regions ?? []);
    const failing = new Set(this.failingSubscriptions());
    const keys = new Set<string>();
    for (const [key, c] of this.#clusters) {
      if (this.#skipped.has(key)) continue;
      if (c.cloud === 'AWS' && failRegions.has(c.region)) continue;
      if (c.cloud === 'Azure' && failing.has(c.account)) continue;
      keys.add(key);
    }
    return keys;
  }

  /** Every cluster in the worlds, including skipped ones. */
  get size(): number {
    return this.#clusters.size;
  }

  /** Subscriptions the scenario makes fail (the last `failing_subscriptions`). */
  failingSubscriptions(): string[] {
    const azure = this.scenario.azure;
    if (!azure) return [];
    return Array.from({length: azure.failing_subscriptions}, (_, i) => subscriptionIdOf(azure.subscriptions - 1 - i));
  }

  /** One churn step: `percent` of the clusters, a third each created, deleted and retagged. */
  churn(percent: number): ChurnResult {
    const total = this.#clusters.size;
    const changes = Math.round((total * percent) / 100);
    const third = Math.floor(changes / 3);
    const live = [...this.#clusters.values()];
    const pick = (): SimCluster | undefined => live.splice(Math.floor(this.#random() * live.length), 1)[0];
    let deleted = 0;
    let retagged = 0;
    let created = 0;
    for (let i = 0; i < third; i++) {
      const c = pick();
      if (!c) break;
      this.#remove(c);
      deleted++;
    }
    for (let i = 0; i < changes - 2 * third; i++) {
      const c = pick();
      if (!c) break;
      this.#retag(c);
      retagged++;
    }
    for (let i = 0; i < third; i++) {
      const template = live[Math.floor(this.#random() * live.length)];
      if (!template) break;
      const name = `${template.cloud === 'AWS' ? 'eks' : 'aks'}-new-${pad(this.#serial++, 5)}`;
      this.#add({...template, name, health: 'healthy'}, false);
      created++;
    }
    return {created, deleted, retagged};
  }

  #otherShare(cloud: 'AWS' | 'Azure'): number {
    return (cloud === 'AWS' ? this.scenario.aws?.other_status_share : this.scenario.azure?.other_status_share) ?? 0;
  }

  #tags(): Record<string, string> {
    const env = ENVS[Math.floor(this.#random() * ENVS.length)] ?? 'prod';
    const team = TEAMS[Math.floor(this.#random() * TEAMS.length)] ?? 'platform';
    return {env, team, 'cost-center': String(1000 + Math.floor(this.#random() * 50))};
  }

  #add(c: SimCluster, otherState: boolean): void {
    const key = clusterKey(c);
    const api = otherState ? undefined : this.#endpoints?.endpointFor(c);
    if (c.cloud === 'AWS') {
      const status = otherState ? OTHER_EKS[Math.floor(this.#random() * OTHER_EKS.length)] ?? 'FAILED' : this.#random() < 0.05 ? 'UPDATING' : 'ACTIVE';
      this.aws.addCluster(c.account, c.region, {
        name: c.name,
        status,
        tags: this.#tags(),
        ...(api ? {endpoint: api.url, caData: Buffer.from(api.caPem).toString('base64')} : {}),
        authenticationMode: 'API_AND_CONFIG_MAP',
      });
      if (!otherState && c.health !== 'unmapped') {
        this.aws.addAccessEntry(c.account, c.region, c.name, {principalArn: discoveryPrincipal(c.account, this.#managementAccount()), kubernetesGroups: ['kube-discovery']});
      }
    } else {
      const provisioningState = otherState ? (this.#random() < 0.5 ? 'Creating' : 'Failed') : 'Succeeded';
      const powerState: FakeManagedCluster['powerState'] = otherState && provisioningState === 'Failed' ? 'Stopped' : 'Running';
      this.arm.addCluster({
        subscriptionId: c.account,
        resourceGroup: c.resourceGroup ?? 'rg-000',
        name: c.name,
        location: c.region,
        tags: this.#tags(),
        provisioningState,
        powerState,
        ...(c.aad ? {aadProfile: {managed: true, enableAzureRBAC: true}, disableLocalAccounts: true} : {}),
        ...(api ? {server: api.url, caPem: api.caPem} : {}),
      });
    }
    this.#clusters.set(key, c);
    if (otherState) this.#skipped.add(key);
  }

  #remove(c: SimCluster): void {
    const key = clusterKey(c);
    if (c.cloud === 'AWS') this.aws.removeCluster(c.account, c.region, c.name);
    else this.arm.removeCluster({subscriptionId: c.account, resourceGroup: c.resourceGroup ?? '', name: c.name});
    this.#clusters.delete(key);
    this.#skipped.delete(key);
  }

  #retag(c: SimCluster): void {
    const tags = {...this.#tags(), churned: String(this.#serial++)};
    if (c.cloud === 'AWS') this.aws.retagCluster(c.account, c.region, c.name, tags);
    else this.arm.retagCluster({subscriptionId: c.account, resourceGroup: c.resourceGroup ?? '', name: c.name}, tags);
  }

  #managementAccount(): string {
    return this.scenario.aws ? (accountsOf(this.scenario.aws)[0] ?? '') : '';
  }
}

/** The principal the discovery service signs EKS tokens as in `account`: the management user, or the role it assumes. */
export function discoveryPrincipal(account: string, management: string): string {
  return account === management ? `arn:aws:iam::${management}:user/kube-discovery` : discoveryRoleArn(account);
}

/** The role the service assumes in a member account. */
export function discoveryRoleArn(account: string): string {
  return `arn:aws:iam::${account}:role/kube-discovery`;
}

/** Subscription GUID number `i` of a scenario. */
export function subscriptionIdOf(i: number): string {
  return `00000000-0000-4000-8000-${String(i + 1).padStart(12, '0')}`;
}

function pad(n: number, width = 3): string {
  return String(n).padStart(width, '0');
}
