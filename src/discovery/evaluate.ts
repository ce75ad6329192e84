/**
 * The pure step between fetching and reconciling: turns each source's clusters into
 * candidate kube_servers or skip decisions, each with a reason (`once --explain`).
 */
import {canonicalJson, type KubeAccess, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {matchLabels, type MatchDecision, type TagMatcher} from '../../matchers/index.ts';
import {builtInClouds} from '../clouds/index.ts';
import type {Clouds} from '../clouds/cloud.ts';
import type {DiscoveredCluster, SourceRef, SourceResult} from '../core/types.ts';
import {compareText} from '../core/collate.ts';
import {flatString} from '../core/intern.ts';
import {clusterLabels, LABEL} from './labels.ts';
import {isValidKubeName, kubeServerName} from './naming.ts';

/** Health reasons discovery itself decides from the cloud's answer (no probe can do better until the cloud changes). */
export const DISCOVERY_HEALTH_REASONS: ReadonlySet<string> = new Set(['invalid_ca', 'no_endpoint']);

/** A cluster discovery wants registered. */
export interface Candidate {
  readonly name: string;
  readonly cluster: DiscoveredCluster;
  readonly source: SourceRef;
  readonly labels: Readonly<Record<string, string>>;
  readonly reason: string;
  /**
   * The document to register, built on each read and not held: a cycle builds, compares and writes
   * the documents a few at a time, so 50,000 clusters never have a draft each alive at once.
   */
  readonly server: KubeServerDraft;
  /**
   * Lets go of the built document (built again if read again): once the registry holds it as it is,
   * the registered entry stands for it, and a copy kept per cluster across cycles is ~200 bytes each.
   */
  releaseServer?(): void;
}

/** Why a listed cluster is not registered. */
export type SkipKind = 'filtered' | 'status' | 'malformed' | 'invalid_name' | 'collision';

/** A listed cluster discovery does not register. */
export interface Skip {
  /** The kube_server name it would have had ('' when none could be built). */
  readonly name: string;
  readonly cloudName: string;
  readonly source: SourceRef;
  readonly kind: SkipKind;
  readonly reason: string;
  readonly labels?: Readonly<Record<string, string>>;
}

/** What evaluate needs to know about the config and this replica. */
export interface EvaluateContext {
  readonly discoveryGroup: string;
  /** Compiled tag matcher per matcher index of each cloud. */
  readonly matcherFor: (source: SourceRef) => TagMatcher;
  /** `kubernetes_service.labels`, applied to every cluster. */
  readonly staticLabels: Readonly<Record<string, string>>;
  /** Identity (see `clusterIdentity`) of the cluster each registered name belongs to: it keeps its name on a collision. */
  readonly registered?: Pick<ReadonlyMap<string, string>, 'get'>;
  /** Dynamic labels as of now (command outputs). */
  readonly dynamicLabels?: KubeServerDraft['spec']['cluster']['spec']['dynamic_labels'];
  /** The cloud modules clusters are labelled, named and described by; default the built-in ones. */
  readonly clouds?: Clouds;
}

/** Result of evaluating one cycle's source results. */
export interface Evaluation {
  readonly candidates: ReadonlyMap<string, Candidate>;
  readonly skips: readonly Skip[];
  /** Debug notes: dropped tag keys and the like. */
  readonly notes: readonly string[];
}

/** Evaluates clusters of successful sources in a stable order, so "first wins" on name collisions is deterministic. */
export function evaluate(results: readonly SourceResult[], ctx: EvaluateContext): Evaluation {
  const candidates = new Map<string, Candidate>();
  const skips: Skip[] = [];
  const notes: string[] = [];
  const clouds = ctx.clouds ?? builtInClouds;
  const ordered = [...results].filter((r) => r.ok).sort((a, b) => compareText(a.source.id, b.source.id));
  const settings = settingsKey(ctx);
  for (const result of ordered) {
    for (const bad of result.malformed) {
      skips.push({name: '', cloudName: bad.name, source: result.source, kind: 'malformed', reason: bad.reason});
    }
    const matcher = ctx.matcherFor(result.source);
    for (const cluster of result.clusters) {
      const judgement = judge(cluster, matcher, settings, ctx, clouds);
      const {name, labels, dropped, decision} = judgement;
      if (dropped.length > 0) notes.push(`${cluster.name}: dropped tags with invalid label keys: ${dropped.join(', ')}`);
      const skip = (kind: SkipKind, reason: string): void => {
        skips.push({name, cloudName: cluster.name, source: result.source, kind, reason, labels});
      };
      if (!cluster.statusOk) {
        skip('status', `status ${cluster.status} is not kept`);
        continue;
      }
      if (!decision.matched) {
        skip('filtered', decision.reason);
        continue;
      }
      if (!isValidKubeName(name)) {
        skip('invalid_name', `name ${JSON.stringify(name)} is not a valid kube cluster name`);
        continue;
      }
      const existing = candidates.get(name);
      if (existing) {
        // The same cluster seen by two overlapping matchers is not a collision.
        if (clusterIdentity(existing.cluster) === clusterIdentity(cluster)) continue;
        const owner = ctx.registered?.get(name);
        if (owner === clusterIdentity(cluster) && owner !== clusterIdentity(existing.cluster)) {
          // The cluster already registered under the name keeps it; the newcomer is the one skipped.
          skips.push({name, cloudName: existing.cluster.name, source: existing.source, kind: 'collision', reason: collisionReason(name, cluster), labels: existing.labels});
          candidates.set(name, candidateOf(judgement, cluster, result.source, ctx, clouds));
          continue;
        }
        skip('collision', collisionReason(name, existing.cluster));
        continue;
      }
      candidates.set(name, candidateOf(judgement, cluster, result.source, ctx, clouds));
    }
  }
  return {candidates, skips, notes};
}

/** What evaluate made of one cluster object under one set of settings; the document is built on first use. */
interface Judgement {
  readonly settings: string;
  readonly clouds: Clouds;
  readonly matcher: TagMatcher;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly dropped: readonly string[];
  readonly decision: MatchDecision;
  server: KubeServerDraft | undefined;
}

/**
 * Judgements by cluster object. A fetcher that hands on the same object for a cluster that did
 * not change (the AKS one does) gets the same name, labels and document back without building
 * them again, and reconcile and the heartbeat then compare the document with itself. Weak: a
 * judgement lives as long as its cluster object.
 */
const judgements = new WeakMap<DiscoveredCluster, Judgement>();

/** Everything besides the cluster and its matcher that a judgement depends on, as one string. */
function settingsKey(ctx: EvaluateContext): string {
  return `${ctx.discoveryGroup}\n${canonicalJson(ctx.staticLabels)}\n${canonicalJson(ctx.dynamicLabels ?? null)}`;
}

/** The dropped tag keys of the clusters that have none (nearly all): one shared empty list, not one each. */
const NONE_DROPPED: readonly string[] = Object.freeze([]);

function judge(cluster: DiscoveredCluster, matcher: TagMatcher, settings: string, ctx: EvaluateContext, clouds: Clouds): Judgement {
  const known = judgements.get(cluster);
  if (known && known.settings === settings && known.clouds === clouds && known.matcher === matcher) return known;
  const {name, renamed} = kubeServerName(cluster, clouds);
  const {labels, dropped} = clusterLabels(cluster, ctx.discoveryGroup, renamed, clouds);
  // `server` is named up front (undefined until first read) so the object is built with all its slots: added later, it took a separate property array per cluster.
  const judgement: Judgement = {settings, clouds, matcher, name, labels, dropped: dropped.length > 0 ? dropped : NONE_DROPPED, decision: matchLabels(matcher, labels), server: undefined};
  judgements.set(cluster, judgement);
  return judgement;
}

function serverOf(judgement: Judgement, cluster: DiscoveredCluster, ctx: EvaluateContext, clouds: Clouds): KubeServerDraft {
  judgement.server ??= toServer(judgement.name, cluster, judgement.labels, ctx, clouds);
  return judgement.server;
}

/** A cloud-unique identity, computable from a cluster and from its registered entry alike. */
export function clusterIdentity(cluster: DiscoveredCluster): string {
  // Cluster objects are not changed once listed, and an unchanged cluster is the same object every cycle (see AksListingMemory).
  let id = identities.get(cluster);
  if (id === undefined) {
    // Kept as long as the cluster object (across cycles): flat, not the ~7 pieces it was joined from (~150 bytes more a cluster).
    id = flatString(identity(cluster.cloud, cluster.account, cluster.region, cluster.resourceGroup ?? '', cluster.name));
    identities.set(cluster, id);
  }
  return id;
}

const identities = new WeakMap<DiscoveredCluster, string>();

/** The identity of the cluster a registered kube_server describes (see `clusterIdentity`); '' when no cloud module reads it. */
export function registeredIdentity(server: KubeServerDraft, clouds: Clouds = builtInClouds): string {
  const found = clouds.registeredCluster(server);
  if (!found) return '';
  const {module, cluster} = found;
  return identity(module.cloud, cluster.account, cluster.region ?? '', cluster.resourceGroup, cluster.name);
}

function identity(cloud: string, account: string, region: string, resourceGroup: string, name: string): string {
  return `${cloud}/${account}/${region}/${resourceGroup.toLowerCase()}/${name}`;
}

function collisionReason(name: string, owner: DiscoveredCluster): string {
  return `name ${name} is already taken by ${clusterIdentity(owner)}; set the ${LABEL.nameOverride} tag to rename`;
}

function candidateOf(judgement: Judgement, cluster: DiscoveredCluster, source: SourceRef, ctx: EvaluateContext, clouds: Clouds): Candidate {
  return new LazyCandidate(judgement, cluster, source, ctx, clouds);
}

/** A candidate whose document is built on first read and kept with its judgement (a class: no closure per cluster). */
class LazyCandidate implements Candidate {
  readonly cluster: DiscoveredCluster;
  readonly source: SourceRef;
  readonly #judgement: Judgement;
  readonly #ctx: EvaluateContext;
  readonly #clouds: Clouds;

  constructor(judgement: Judgement, cluster: DiscoveredCluster, source: SourceRef, ctx: EvaluateContext, clouds: Clouds) {
    this.#judgement = judgement;
    this.cluster = cluster;
    this.source = source;
    this.#ctx = ctx;
    this.#clouds = clouds;
  }

  get name(): string {
    return this.#judgement.name;
  }

  get labels(): Record<string, string> {
    return this.#judgement.labels;
  }

  get reason(): string {
    return this.#judgement.decision.reason;
  }

  get server(): KubeServerDraft {
    return serverOf(this.#judgement, this.cluster, this.#ctx, this.#clouds);
  }

  releaseServer(): void {
    this.#judgement.server = undefined;
  }
}

function toServer(name: string, cluster: DiscoveredCluster, labels: Record<string, string>, ctx: EvaluateContext, clouds: Clouds): KubeServerDraft {
  // Without static labels the cluster's own label object is the document's: one object per cluster, not two.
  const allLabels = hasOwnKeys(ctx.staticLabels) ? {...ctx.staticLabels, ...labels} : labels;
  const cloud = clouds.get(cluster.cloud);
  const access = cloud.access(cluster);
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: groupLabels(ctx.discoveryGroup)},
    // version, hostname and host_id are the writer's: the heartbeat stamps them when it announces.
    spec: {
      cluster: {
        kind: 'kube_cluster',
        version: 'v3',
        metadata: {name, description: cloud.description(cluster), labels: allLabels},
        spec: {...cloud.clusterSpec(cluster), ...(ctx.dynamicLabels && Object.keys(ctx.dynamicLabels).length > 0 ? {dynamic_labels: ctx.dynamicLabels} : {})},
      },
      proxy_ids: [],
    },
    status: statusOf(cluster, access),
  };
}

function statusOf(cluster: DiscoveredCluster, access: KubeAccess | undefined): NonNullable<KubeServerDraft['status']> {
  const target_health = cluster.unreachable ? {status: 'unhealthy' as const, reason: cluster.unreachable.reason, message: cluster.unreachable.message} : NOT_PROBED;
  const {endpoint, caData, authMode, oidcIssuer} = cluster;
  // All keys at once when the cluster has them all (the usual case): added one by one, the last ones took a property array per cluster.
  if (endpoint && caData && authMode && access) {
    return oidcIssuer ? {target_health, endpoint, ca_data: caData, auth_mode: authMode, access, oidc_issuer: oidcIssuer} : {target_health, endpoint, ca_data: caData, auth_mode: authMode, access};
  }
  return {
    target_health,
    ...(endpoint ? {endpoint} : {}),
    ...(caData ? {ca_data: caData} : {}),
    ...(authMode ? {auth_mode: authMode} : {}),
    ...(access ? {access} : {}),
    ...(oidcIssuer ? {oidc_issuer: oidcIssuer} : {}),
  };
}

// Parts every document of a group has alike are one shared (frozen) object, not one per entry:
// documents are never changed in place, only replaced.
const NOT_PROBED = Object.freeze({status: 'unknown', reason: 'not_probed', message: 'not probed yet'} as const);
const groupLabelObjects = new Map<string, Readonly<Record<string, string>>>();

function groupLabels(group: string): Readonly<Record<string, string>> {
  let labels = groupLabelObjects.get(group);
  if (!labels) {
    labels = Object.freeze({[LABEL.discoveryGroup]: group});
    // A handful of groups per process (a config reload may add one); never more than a few.
    if (groupLabelObjects.size >= 16) groupLabelObjects.clear();
    groupLabelObjects.set(group, labels);
  }
  return labels;
}

function hasOwnKeys(record: Readonly<Record<string, string>>): boolean {
  for (const key in record) if (Object.hasOwn(record, key)) return true;
  return false;
}
