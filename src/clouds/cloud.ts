/**
 * The per-cloud half of the pure core: every rule in which EKS and AKS differ (labels, names,
 * the document's cloud block, which entries a source's listing covers, the no-credentials
 * warning) is a field of a `CloudModule`, so evaluate, reconcile and the metrics never name a cloud.
 */
import type {KubeAccess, KubeCluster, KubeServerDraft} from '../../heartbeats/kube-server.ts';
import type {TagMatcherInput} from '../../matchers/index.ts';
import type {DiscoveredCluster, SourceRef} from '../core/types.ts';
import type {DiscoveryServiceConfig} from '../config/schema.ts';
import type {MessageTarget} from '../probe/messages.ts';
import type {SourcePlanner} from '../discovery/cycle.ts';
import type {DiscoveryOptions} from '../discovery/discovery.ts';

/** The cloud block of a kube_cluster spec (`spec.aws`, `spec.azure`), as Teleport writes it. */
export type CloudClusterSpec = Omit<KubeCluster['spec'], 'dynamic_labels'>;

/** The cluster a registered entry describes, read back from its document. */
export interface RegisteredCluster {
  /** The cluster's own name in the cloud. */
  readonly name: string;
  /** Account or subscription id. */
  readonly account: string;
  /** Region or location; undefined when the document does not say. */
  readonly region: string | undefined;
  /** Resource group ('' for clouds without one). */
  readonly resourceGroup: string;
}

/** What the access probe reads from a cloud's entries and tells an operator about its clusters. */
export interface CloudProbeAdvice {
  /** `status.access.kind` of the cloud's entries (`eks`, `aks`). */
  readonly accessKind: string;
  /** The cluster's name in the cloud, from its access (what `aws eks` / `az aks` take). */
  clusterName(access: KubeAccess): string | undefined;
  /** The identity the probe authenticates as, when the access names it (an assumed role). */
  principal(access: KubeAccess): string | undefined;
  /** The cloud API that reported the endpoint and CA, as messages name it: `EKS`. */
  readonly apiName: string;
  /** What to check when the API server cannot be reached. */
  readonly networkHint: string;
  /** What to check when no token could be minted. */
  readonly credentialsHint: string;
  /** The whole message when the cluster refused the token (HTTP 401); `rbacFix` is the ClusterRole advice. */
  unauthorized(target: MessageTarget, rbacFix: string): string;
  /** The suggested ClusterRoleBinding's subject (`--group=…`, `--user=…`) and a note on where it comes from ('' for none). */
  rbacSubject(target: MessageTarget): {readonly subject: string; readonly note: string};
}

/**
 * What the pure core asks of one cloud. Implementations live in `src/clouds/<cloud>/cloud-module.ts`
 * and import no SDK statically; `P` is the planner the module builds (the Azure one also answers
 * AKS access set-up).
 */
export interface CloudModule<P extends SourcePlanner = SourcePlanner> {
  /** `teleport.dev/cloud`, the `cloud` of its sources and clusters, and its `cloud` metric label: `AWS`, `Azure`. */
  readonly cloud: string;
  /** `teleport.dev/discovery-type` and the prefix of its source ids: `eks`, `aks`. */
  readonly type: string;
  /** Its matchers in the config (`discovery_service.aws`); matcher `i` judges sources with `matcherIndex` `i`. */
  matchers(config: DiscoveryServiceConfig): readonly {readonly tags: TagMatcherInput}[];
  /** Tags whose non-empty value names a cluster whole, in precedence order. */
  readonly nameOverrideTags: readonly string[];
  /** The parts of Teleport's name suffix (`<name>-<parts...>`), before cleaning. */
  nameParts(cluster: DiscoveredCluster): readonly string[];
  /** Labels that place the cluster besides `region` (`account-id`; `subscription-id`, `resource-group`), in document order. */
  locationLabels(cluster: DiscoveredCluster): Readonly<Record<string, string>>;
  /** Whether an entry of this cloud, type and region lies in what the source lists (its account, resource group). */
  coversLocation(source: SourceRef, labels: Readonly<Record<string, string>>): boolean;
  /** Teleport's kube_cluster description. */
  description(cluster: DiscoveredCluster): string;
  /** The cloud block of `spec.cluster.spec`. */
  clusterSpec(cluster: DiscoveredCluster): CloudClusterSpec;
  /** `status.access`: what the `token` command and the probe need to mint a token; never a credential. */
  access(cluster: DiscoveredCluster): KubeAccess | undefined;
  /** The cluster a registered document describes, when its cloud block is this cloud's. */
  registeredCluster(server: KubeServerDraft): RegisteredCluster | undefined;
  /** The warning when every source of the cloud found no credentials at all, given the first failure's message; undefined says nothing. */
  noCredentialsWarning(firstMessage: string | undefined): string | undefined;
  /** The access probe's side. */
  readonly probe: CloudProbeAdvice;
  /**
   * Its source planner for discovery's options (config, clock, events, shared credentials and the
   * caller's overrides: `aws`, `azure`, or `cloudOptions[cloud]` for another cloud), or undefined
   * when the config has none of its matchers. Called once per `Discovery`; the SDKs load on the
   * first `plan()`, so a deployment without this cloud never loads them. Discovery supplies
   * `coversAll` (`everySource`) when the planner has none.
   */
  planner?(options: DiscoveryOptions): P | undefined;
}

/** The catch-all source of a cloud (`eks:*`): region '*' and account '' cover every entry of the cloud, so a planning failure protects them all. */
export function everySource(cloud: Pick<CloudModule, 'cloud' | 'type'>): SourceRef {
  return {id: `${cloud.type}:*`, cloud: cloud.cloud, type: cloud.type, region: '*', account: '', matcherIndex: 0};
}

/** The cloud modules discovery knows, by cloud name. Built once from a list (see `src/clouds/index.ts`). */
export class Clouds {
  readonly #byName = new Map<string, CloudModule>();

  constructor(modules: readonly CloudModule[]) {
    for (const module of modules) {
      if (this.#byName.has(module.cloud)) throw new Error(`cloud ${JSON.stringify(module.cloud)} is registered twice`);
      if (modules.some((other) => other !== module && other.type === module.type)) throw new Error(`discovery type ${JSON.stringify(module.type)} is registered twice`);
      this.#byName.set(module.cloud, module);
    }
  }

  /** Every module, in registration order (the order of metric series and warnings). */
  get all(): readonly CloudModule[] {
    return [...this.#byName.values()];
  }

  /** The module of a cloud a fetcher reported; an unknown name is a programming error and names the known ones. */
  get(cloud: string): CloudModule {
    const module = this.#byName.get(cloud);
    if (!module) throw new Error(`unknown cloud ${JSON.stringify(cloud)}; known: ${[...this.#byName.keys()].join(', ')}`);
    return module;
  }

  /** The module of a cloud name read from data (a label, a stored entry), if it is one of ours. */
  find(cloud: string | undefined): CloudModule | undefined {
    return cloud === undefined ? undefined : this.#byName.get(cloud);
  }

  /** The module whose entries carry this `status.access.kind`. */
  forAccess(access: KubeAccess): CloudModule | undefined {
    return [...this.#byName.values()].find((module) => module.probe.accessKind === access.kind);
  }

  /** The first module that reads a registered document's cloud block, with what it read. */
  registeredCluster(server: KubeServerDraft): {readonly module: CloudModule; readonly cluster: RegisteredCluster} | undefined {
    for (const module of this.#byName.values()) {
      const cluster = module.registeredCluster(server);
      if (cluster) return {module, cluster};
    }
    return undefined;
  }
}
