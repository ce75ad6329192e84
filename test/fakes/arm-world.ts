/**
 * The state behind the fake Azure Resource Manager: subscriptions, resource groups and AKS
 * managed clusters. Tests and the cloud simulator mutate it between (or during) discovery
 * cycles; the ARM server only reads it, so every request sees the current world.
 */
import {randomBytes, randomUUID} from 'node:crypto';
import {FakeManagementGroups} from './arm-management-groups.ts';

/** Subscription states as `subscriptions.list` reports them. */
export type SubscriptionState = 'Enabled' | 'Warned' | 'PastDue' | 'Disabled' | 'Deleted';

/** A subscription the identity can see. */
export interface FakeSubscription {
  readonly subscriptionId: string;
  readonly displayName: string;
  readonly tenantId: string;
  readonly state: SubscriptionState;
}

/** Entra ID integration of a cluster (`properties.aadProfile`). */
export interface FakeAadProfile {
  readonly managed: true;
  readonly enableAzureRBAC: boolean;
  /** Defaults to the subscription's tenant in API answers. */
  readonly tenantID?: string;
}

/** Addresses one managed cluster. Names compare case-insensitively, as in ARM. */
export interface ClusterRef {
  readonly subscriptionId: string;
  readonly resourceGroup: string;
  readonly name: string;
}

/** An AKS managed cluster. */
export interface FakeManagedCluster extends ClusterRef {
  readonly location: string;
  readonly tags: Readonly<Record<string, string>>;
  /** `Succeeded`, `Creating`, `Updating`, `Deleting`, `Failed`, `Canceled`... */
  readonly provisioningState: string;
  readonly powerState: 'Running' | 'Stopped';
  readonly kubernetesVersion: string;
  readonly fqdn: string;
  readonly aadProfile?: FakeAadProfile;
  readonly disableLocalAccounts?: boolean;
  /** Whether the cluster's OIDC issuer is enabled (`properties.oidcIssuerProfile`); off by default, as on AKS. */
  readonly oidcIssuer?: boolean;
  /** API server URL written into the kubeconfig (point it at a fake Kubernetes API). */
  readonly server: string;
  /** CA of that API server, written as `certificate-authority-data`; '' leaves it out. */
  readonly caPem: string;
  /** Static bearer token of the local `clusterUser` account (a secret: never log it). */
  readonly localAccountToken: string;
}

/** What a test supplies to add a cluster; everything but the address has a realistic default. */
export type ManagedClusterInput = ClusterRef & Partial<Omit<FakeManagedCluster, keyof ClusterRef>>;

/** Fields a test may change on an existing cluster. */
export type ManagedClusterPatch = Partial<Omit<FakeManagedCluster, keyof ClusterRef | 'localAccountToken'>>;

/** Identity the Kubernetes API fake should map a local-account token to. */
export interface LocalAccountIdentity {
  readonly cluster: FakeManagedCluster;
  readonly user: string;
  readonly groups: readonly string[];
}

/** A role assignment (`Microsoft.Authorization/roleAssignments`). */
export interface FakeRoleAssignment {
  readonly name: string;
  readonly scope: string;
  readonly principalId: string;
  readonly principalType?: string;
  readonly roleDefinitionId: string;
  readonly description?: string;
  readonly createdOn: string;
}

/** ARM resource id of a role assignment. */
export function roleAssignmentId(scope: string, name: string): string {
  return `${scope.replace(/\/+$/, '')}/providers/Microsoft.Authorization/roleAssignments/${name}`;
}

/** ARM resource id of a managed cluster, spelled as AKS returns it (lower-case `resourcegroups`). */
export function managedClusterId(ref: ClusterRef): string {
  return `/subscriptions/${ref.subscriptionId}/resourcegroups/${ref.resourceGroup}/providers/Microsoft.ContainerService/managedClusters/${ref.name}`;
}

/** In-memory Azure: subscriptions, resource groups and managed clusters. */
export class ArmWorld {
  readonly #subscriptions = new Map<string, FakeSubscription>();
  readonly #resourceGroups = new Map<string, Map<string, string>>();
  readonly #clusters = new Map<string, FakeManagedCluster>();
  /**
   * Keys of each subscription's clusters (lower-cased id), in the order of `#clusters`: a list
   * call scanned every cluster of the world, which at W5's 5,250 clusters made the simulator's
   * own CPU per steady cycle (~0.5 s for 500 lists) larger than the service's it measures.
   */
  readonly #clusterKeys = new Map<string, Set<string>>();
  /** Local-account token -> cluster key, so a Kubernetes fake serving thousands of clusters authenticates in O(1). */
  readonly #byToken = new Map<string, string>();
  /** Role assignments by lower-cased resource id. */
  readonly #roleAssignments = new Map<string, FakeRoleAssignment>();
  /** Management groups and the subscriptions placed in them (test/fakes/arm-management-groups.ts). */
  readonly managementGroups = new FakeManagementGroups();

  /** Adds (or replaces) a role assignment, as `az role assignment create` or the PUT of the fake server would. */
  putRoleAssignment(input: Omit<FakeRoleAssignment, 'createdOn'> & {createdOn?: string}): FakeRoleAssignment {
    const assignment: FakeRoleAssignment = {createdOn: new Date().toISOString(), ...input};
    this.#roleAssignments.set(roleAssignmentId(input.scope, input.name).toLowerCase(), assignment);
    return assignment;
  }

  /** The role assignment `name` at `scope` (case-insensitive), if any. */
  getRoleAssignment(scope: string, name: string): FakeRoleAssignment | undefined {
    return this.#roleAssignments.get(roleAssignmentId(scope, name).toLowerCase());
  }

  /** Deletes a role assignment; false when there was none. */
  deleteRoleAssignment(scope: string, name: string): boolean {
    return this.#roleAssignments.delete(roleAssignmentId(scope, name).toLowerCase());
  }

  /** Every role assignment, in insertion order. */
  roleAssignments(): FakeRoleAssignment[] {
    return [...this.#roleAssignments.values()];
  }

  /** As ARM lists them for a scope: assignments at, above or below it, optionally of one principal. */
  listRoleAssignments(scope: string, principalId?: string): FakeRoleAssignment[] {
    const within = (outer: string, inner: string): boolean => {
      const o = outer.toLowerCase().replace(/\/+$/, '');
      const i = inner.toLowerCase().replace(/\/+$/, '');
      return i === o || i.startsWith(`${o}/`);
    };
    return this.roleAssignments().filter((a) =>
      (within(a.scope, scope) || within(scope, a.scope)) && (principalId === undefined || a.principalId.toLowerCase() === principalId.toLowerCase()));
  }

  /** Adds (or replaces) a subscription; a random GUID is used when no id is given. */
  addSubscription(input: Partial<FakeSubscription> = {}): FakeSubscription {
    const subscriptionId = input.subscriptionId ?? randomUUID();
    const sub: FakeSubscription = {
      subscriptionId,
      displayName: input.displayName ?? `subscription-${subscriptionId.slice(0, 8)}`,
      tenantId: input.tenantId ?? '72f988bf-86f1-41af-91ab-2d7cd011db47',
      state: input.state ?? 'Enabled',
    };
    this.#subscriptions.set(subscriptionId.toLowerCase(), sub);
    return sub;
  }

  /** Removes a subscription with its resource groups and clusters. */
  removeSubscription(subscriptionId: string): boolean {
    const key = subscriptionId.toLowerCase();
    for (const c of this.listClusters(key)) this.removeCluster(c);
    this.#resourceGroups.delete(key);
    this.managementGroups.placeSubscription(subscriptionId, undefined);
    return this.#subscriptions.delete(key);
  }

  /** Changes a subscription's display name or state. */
  updateSubscription(subscriptionId: string, patch: Partial<Omit<FakeSubscription, 'subscriptionId'>>): FakeSubscription {
    const sub = this.#requireSubscription(subscriptionId);
    const next = {...sub, ...patch};
    this.#subscriptions.set(sub.subscriptionId.toLowerCase(), next);
    return next;
  }

  /** The subscription with this id (case-insensitive), if any. */
  getSubscription(subscriptionId: string): FakeSubscription | undefined {
    return this.#subscriptions.get(subscriptionId.toLowerCase());
  }

  /** Every subscription, in insertion order. */
  listSubscriptions(): FakeSubscription[] {
    return [...this.#subscriptions.values()];
  }

  /** Creates an (empty) resource group; adding a cluster creates its group implicitly. */
  addResourceGroup(subscriptionId: string, resourceGroup: string): void {
    const sub = this.#requireSubscription(subscriptionId);
    const groups = this.#resourceGroups.get(sub.subscriptionId.toLowerCase()) ?? new Map<string, string>();
    if (!groups.has(resourceGroup.toLowerCase())) groups.set(resourceGroup.toLowerCase(), resourceGroup);
    this.#resourceGroups.set(sub.subscriptionId.toLowerCase(), groups);
  }

  /** True when the resource group exists (case-insensitive). */
  hasResourceGroup(subscriptionId: string, resourceGroup: string): boolean {
    return this.#resourceGroups.get(subscriptionId.toLowerCase())?.has(resourceGroup.toLowerCase()) ?? false;
  }

  /** Adds a managed cluster with realistic defaults; its subscription must exist. */
  addCluster(input: ManagedClusterInput): FakeManagedCluster {
    const sub = this.#requireSubscription(input.subscriptionId);
    this.addResourceGroup(sub.subscriptionId, input.resourceGroup);
    const location = input.location ?? 'eastus';
    const fqdn = input.fqdn ?? `${input.name.toLowerCase()}-dns-${randomBytes(4).toString('hex')}.hcp.${location}.azmk8s.io`;
    const cluster: FakeManagedCluster = {
      subscriptionId: sub.subscriptionId,
      resourceGroup: input.resourceGroup,
      name: input.name,
      location,
      tags: {...input.tags},
      provisioningState: input.provisioningState ?? 'Succeeded',
      powerState: input.powerState ?? 'Running',
      kubernetesVersion: input.kubernetesVersion ?? '1.31.2',
      fqdn,
      ...(input.aadProfile === undefined ? {} : {aadProfile: input.aadProfile}),
      ...(input.disableLocalAccounts === undefined ? {} : {disableLocalAccounts: input.disableLocalAccounts}),
      ...(input.oidcIssuer === undefined ? {} : {oidcIssuer: input.oidcIssuer}),
      server: input.server ?? `https://${fqdn}:443`,
      caPem: input.caPem ?? '',
      localAccountToken: input.localAccountToken ?? randomBytes(32).toString('hex'),
    };
    const previous = this.#clusters.get(clusterKey(cluster));
    if (previous !== undefined) this.#byToken.delete(previous.localAccountToken);
    this.#clusters.set(clusterKey(cluster), cluster);
    const subKey = cluster.subscriptionId.toLowerCase();
    const keys = this.#clusterKeys.get(subKey) ?? new Set<string>();
    keys.add(clusterKey(cluster));
    this.#clusterKeys.set(subKey, keys);
    this.#byToken.set(cluster.localAccountToken, clusterKey(cluster));
    return cluster;
  }

  /** Deletes a cluster; false when it did not exist. */
  removeCluster(ref: ClusterRef): boolean {
    const cluster = this.#clusters.get(clusterKey(ref));
    if (cluster === undefined) return false;
    this.#byToken.delete(cluster.localAccountToken);
    this.#clusterKeys.get(cluster.subscriptionId.toLowerCase())?.delete(clusterKey(ref));
    return this.#clusters.delete(clusterKey(ref));
  }

  /** Replaces a cluster's tags. */
  retagCluster(ref: ClusterRef, tags: Readonly<Record<string, string>>): FakeManagedCluster {
    return this.updateCluster(ref, {tags: {...tags}});
  }

  /** Changes fields of an existing cluster (state, power, version, server...). */
  updateCluster(ref: ClusterRef, patch: ManagedClusterPatch): FakeManagedCluster {
    const current = this.getCluster(ref);
    if (current === undefined) throw new Error(`ArmWorld: expected an existing cluster ${managedClusterId(ref)}, found none`);
    const next: FakeManagedCluster = {...current, ...patch};
    this.#clusters.set(clusterKey(ref), next);
    return next;
  }

  /** The cluster at this address (case-insensitive), if any. */
  getCluster(ref: ClusterRef): FakeManagedCluster | undefined {
    return this.#clusters.get(clusterKey(ref));
  }

  /** Clusters of a subscription, optionally of one resource group, in insertion order. */
  listClusters(subscriptionId: string, resourceGroup?: string): FakeManagedCluster[] {
    const sub = subscriptionId.toLowerCase();
    const rg = resourceGroup?.toLowerCase();
    const clusters: FakeManagedCluster[] = [];
    for (const key of this.#clusterKeys.get(sub) ?? []) {
      const c = this.#clusters.get(key);
      if (c !== undefined && (rg === undefined || c.resourceGroup.toLowerCase() === rg)) clusters.push(c);
    }
    return clusters;
  }

  /**
   * Maps a bearer token to the local `clusterUser` account that owns it, for a Kubernetes API
   * fake's `authenticate` callback. Clusters with local accounts disabled accept none.
   */
  localAccountIdentity(token: string): LocalAccountIdentity | undefined {
    const key = this.#byToken.get(token);
    const cluster = key === undefined ? undefined : this.#clusters.get(key);
    if (cluster === undefined || cluster.disableLocalAccounts === true) return undefined;
    return {cluster, user: 'masterclient', groups: ['system:masters', 'system:authenticated']};
  }

  #requireSubscription(subscriptionId: string): FakeSubscription {
    const sub = this.getSubscription(subscriptionId);
    if (sub === undefined) {
      throw new Error(`ArmWorld: expected subscription ${subscriptionId} to exist (call addSubscription first), found none`);
    }
    return sub;
  }
}

function clusterKey(ref: ClusterRef): string {
  return `${ref.subscriptionId}/${ref.resourceGroup}/${ref.name}`.toLowerCase();
}
