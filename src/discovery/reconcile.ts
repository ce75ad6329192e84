/**
 * Reconcile is a pure function of (current registry of this discovery group, evaluated
 * candidates, source outcomes). It creates what is new, updates what changed and deletes
 * what vanished — but only where a source that covers the entry succeeded this cycle.
 * Entries a failed source covers are kept and marked stale.
 */
import {sameAsStored, sameJson, statusWith, type KubeServer, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {builtInClouds} from '../clouds/index.ts';
import type {Clouds} from '../clouds/cloud.ts';
import type {DiscoveredCluster, SourceRef, SourceResult} from '../core/types.ts';
import {clusterIdentity, DISCOVERY_HEALTH_REASONS, registeredIdentity, type Candidate, type Evaluation, type Skip, type SkipKind} from './evaluate.ts';
import {LABEL} from './labels.ts';
import {compareText} from '../core/collate.ts';

/** What reconcile decided for one name. */
export type Action = 'create' | 'update' | 'delete' | 'unchanged' | 'stale' | 'skip';

/** One decision of the plan. */
export interface PlanItem {
  readonly name: string;
  readonly action: Action;
  readonly reason: string;
  /** On a skip: why, as a fixed vocabulary (metrics count by it; `reason` is for people). */
  readonly skipKind?: SkipKind;
  /** Source id that listed (or covers) the cluster. */
  readonly source: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The tag matcher's reason (shown by `once --explain`). */
  readonly match?: string;
  /** The document to announce for create / update / unchanged / stale. */
  readonly server?: KubeServerDraft;
  /** On a delete: the name the same cluster is registered under from this cycle on (the naming rule changed). */
  readonly renamedTo?: string;
}

/** The whole plan of a cycle, in name order. */
export interface Plan {
  readonly items: readonly PlanItem[];
}

/**
 * Whether a source's listing covers an existing entry: same cloud, type and region (`*` is every
 * region), and — the cloud module's rule — the same account, subscription or resource group.
 */
export function covers(source: SourceRef, entry: KubeServer, clouds: Clouds = builtInClouds): boolean {
  const labels = entry.spec.cluster.metadata.labels;
  if (labels[LABEL.cloud] !== source.cloud || labels[LABEL.discoveryType] !== source.type) return false;
  if (source.region !== '*' && labels[LABEL.region] !== source.region) return false;
  return clouds.get(source.cloud).coversLocation(source, labels);
}

/**
 * A listed cluster whose decision (create, update or unchanged) waits until its document is built
 * (`decidePending`): a cycle builds, compares and writes the documents a few at a time instead of
 * holding a draft of every cluster at once.
 */
export interface PendingItem {
  readonly name: string;
  readonly candidate: Candidate;
  /** The entry registered under the name, if any. */
  readonly existing: KubeServer | undefined;
  /** The entry's previous name, when the cluster moves to this name in the same plan. */
  readonly renamedFrom: string | undefined;
}

/** A plan in two parts: what is decided without documents (skips, deletes, stale marks) and the listed clusters still to decide. */
export interface StagedPlan {
  readonly decided: readonly PlanItem[];
  readonly pending: readonly PendingItem[];
}

/** Builds the plan. `current` must hold only this discovery group's entries; others are ignored defensively. */
export function reconcile(current: readonly KubeServer[], evaluation: Evaluation, results: readonly SourceResult[], discoveryGroup: string, clouds: Clouds = builtInClouds): Plan {
  const {decided, pending} = stagePlan(current, evaluation, results, discoveryGroup, clouds);
  return {items: sortPlanItems([...pending.map(decidePending), ...decided])};
}

/** Plan order: by name, then action. */
export function sortPlanItems(items: PlanItem[]): PlanItem[] {
  return items.sort((a, b) => compareText(a.name, b.name) || compareText(a.action, b.action));
}

/** Decides one listed cluster: builds its document and compares it with the registered entry. */
export function decidePending(pending: PendingItem): PlanItem {
  const item = decideCandidate(pending.candidate, pending.existing);
  return item.action === 'create' && pending.renamedFrom !== undefined ? {...item, reason: `new name of ${pending.renamedFrom}`} : item;
}

/** `reconcile` without deciding the listed clusters yet (see `PendingItem`); the same plan once they are decided. */
export function stagePlan(current: readonly KubeServer[], evaluated: Evaluation, results: readonly SourceResult[], discoveryGroup: string, clouds: Clouds = builtInClouds): StagedPlan {
  const decided: PlanItem[] = [];
  const byName = new Map<string, KubeServer>();
  for (const entry of current) {
    if (entry.spec.cluster.metadata.labels[LABEL.discoveryGroup] !== discoveryGroup) continue;
    byName.set(entry.metadata.name, entry);
  }
  const evaluation = keepOwnedNames(byName, evaluated, results, clouds);

  const renames = findRenames(byName, evaluation, clouds);
  const renamedFrom = new Map([...renames].map(([from, to]) => [to, from]));
  const pending: PendingItem[] = [];
  for (const candidate of evaluation.candidates.values()) {
    pending.push({name: candidate.name, candidate, existing: byName.get(candidate.name), renamedFrom: renamedFrom.get(candidate.name)});
  }

  const skipsByName = new Map<string, Skip>();
  for (const skip of evaluation.skips) {
    if (skip.name !== '' && !skipsByName.has(skip.name)) skipsByName.set(skip.name, skip);
    decided.push({
      name: skip.name || skip.cloudName,
      action: 'skip',
      reason: `${skip.kind}: ${skip.reason}`,
      skipKind: skip.kind,
      source: skip.source.id,
      labels: skip.labels ?? {},
      ...(skip.kind === 'filtered' ? {match: skip.reason} : {}),
    });
  }

  for (const [name, entry] of byName) {
    if (evaluation.candidates.has(name)) continue;
    const to = renames.get(name);
    const renamed = to === undefined ? undefined : evaluation.candidates.get(to);
    if (to !== undefined && renamed) {
      // Registered under its new name in this same plan, so readers never see a gap.
      decided.push({name, action: 'delete', reason: `renamed to ${to}`, source: renamed.source.id, labels: entry.spec.cluster.metadata.labels, renamedTo: to});
      continue;
    }
    decided.push(decideVanished(name, entry, results, evaluation, skipsByName.get(name), clouds));
  }
  return {decided, pending};
}

/**
 * A listed cluster whose name is registered to another cluster takes it over only when that
 * cluster's entry would go anyway (a successful listing lacks it, or it no longer matches). While
 * the owner is merely not seen (its source failed, its record was unusable this cycle) the entry
 * stays, stale, and the newcomer is skipped as a collision: replacing the entry would drop the owner
 * without any listing lacking it, and the newcomer, registered from then on, would keep the name.
 */
function keepOwnedNames(byName: ReadonlyMap<string, KubeServer>, evaluation: Evaluation, results: readonly SourceResult[], clouds: Clouds): Evaluation {
  let candidates: Map<string, Candidate> | undefined;
  const skips: Skip[] = [];
  for (const candidate of evaluation.candidates.values()) {
    const entry = byName.get(candidate.name);
    if (!entry || !registeredToAnother(entry, candidate, clouds)) continue;
    const verdict = decideVanished(candidate.name, entry, results, evaluation, undefined, clouds);
    if (verdict.action !== 'stale') continue;
    candidates ??= new Map(evaluation.candidates);
    candidates.delete(candidate.name);
    skips.push({
      name: candidate.name,
      cloudName: candidate.cluster.name,
      source: candidate.source,
      kind: 'collision',
      reason: `name ${candidate.name} is registered to ${registeredIdentity(entry, clouds)}, which is kept (${verdict.reason}); set the ${LABEL.nameOverride} tag to rename`,
      labels: candidate.labels,
    });
  }
  return candidates ? {...evaluation, candidates, skips: [...evaluation.skips, ...skips]} : evaluation;
}

/** Whether the entry describes a cluster other than the candidate's (an entry no cloud module reads is not judged). */
function registeredToAnother(entry: KubeServer, candidate: Candidate, clouds: Clouds): boolean {
  const found = clouds.registeredCluster(entry);
  if (!found) return false;
  const {module, cluster: registered} = found;
  const {cluster} = candidate;
  // Field by field, as `clusterIdentity` compares them, without building an identity string per entry every cycle.
  return !(
    module.cloud === cluster.cloud &&
    registered.name === cluster.name &&
    registered.account === cluster.account &&
    (registered.region ?? '') === cluster.region &&
    sameCaseless(registered.resourceGroup, cluster.resourceGroup ?? '')
  );
}

/** Resource groups compare without case (ARM's names are case-insensitive); most are spelled alike, so no lower-cased copies then. */
function sameCaseless(a: string, b: string): boolean {
  return a === b || a.toLowerCase() === b.toLowerCase();
}

/**
 * Entries of clusters that are still discovered but now named differently (e.g. registered
 * under an older naming rule): old name → new name.
 */
function findRenames(byName: ReadonlyMap<string, KubeServer>, evaluation: Evaluation, clouds: Clouds): Map<string, string> {
  const renames = new Map<string, string>();
  // The identities of the entries not listed under their name: usually none (a steady cycle) or
  // a few (a subscription that left), so the candidates are looked up in them rather than every
  // candidate's identity put in a map each cycle.
  const unlisted = new Map<string, string[]>();
  for (const [name, entry] of byName) {
    if (evaluation.candidates.has(name)) continue;
    const identity = registeredIdentity(entry, clouds);
    const names = unlisted.get(identity);
    if (names) names.push(name);
    else unlisted.set(identity, [name]);
  }
  if (unlisted.size === 0) return renames;
  const nameOf = new Map<string, string>();
  for (const candidate of evaluation.candidates.values()) {
    const identity = clusterIdentity(candidate.cluster);
    if (unlisted.has(identity)) nameOf.set(identity, candidate.name);
  }
  for (const [identity, to] of nameOf) {
    for (const name of unlisted.get(identity) ?? []) if (to !== name) renames.set(name, to);
  }
  return renames;
}

/**
 * The decision last made for a cluster object (a source hands on the same object while the cluster
 * is unchanged, and evaluate keeps one judgement for it: evaluate.ts): with the same registered
 * entry object, source, labels object (a new judgement makes new labels: other settings, matcher or
 * cloud modules), match and name, it is that decision again, and its document the same object,
 * which the heartbeat then knows to be unchanged without comparing it. Keyed by the cluster, not its
 * document: the document is let go once the registry holds it (`settleUnchanged`).
 */
const decisions = new WeakMap<DiscoveredCluster, {readonly existing: KubeServer; readonly item: PlanItem}>();

/**
 * After the cycle announced an unchanged decision and the registry kept the entry as it was, the
 * decision holds the registered entry as its document from then on, not its own copy (the draft
 * with the entry's health and discovery time): the same content, one document per cluster held
 * across cycles instead of two. The heartbeat knows its own stored copy without comparing it.
 */
export function settleUnchanged(pending: PendingItem, item: PlanItem): void {
  const {candidate, existing} = pending;
  if (item.action !== 'unchanged' || existing === undefined || item.server === undefined || item.server === existing) return;
  if (decisions.get(candidate.cluster)?.item !== item || !sameAsStored(existing, item.server)) return;
  decisions.set(candidate.cluster, {existing, item: {...item, server: existing}});
  candidate.releaseServer?.();
}

function decideCandidate(candidate: Candidate, existing: KubeServer | undefined): PlanItem {
  if (existing === undefined) return decideFresh(candidate, existing);
  const last = decisions.get(candidate.cluster);
  if (last !== undefined && last.existing === existing && last.item.source === candidate.source.id && last.item.labels === candidate.labels && last.item.match === candidate.reason && last.item.name === candidate.name) return last.item;
  const item = decideFresh(candidate, existing);
  decisions.set(candidate.cluster, {existing, item});
  return item;
}

function decideFresh(candidate: Candidate, existing: KubeServer | undefined): PlanItem {
  // Items are built with all their keys at once (spread and added to, the last keys took a property array per item).
  const {name, labels} = candidate;
  const source = candidate.source.id;
  const match = candidate.reason;
  if (!existing) return {name, source, labels, match, action: 'create', reason: 'new cluster', server: candidate.server};
  // Keep what the probe learnt; discovery does not know health — except that an endpoint or CA
  // the cloud reports as unusable (or usable again) is discovery's own finding.
  const wanted = candidate.server.status?.target_health;
  const previous = existing.status?.target_health;
  const discoveryDecides = DISCOVERY_HEALTH_REASONS.has(wanted?.reason ?? '') || DISCOVERY_HEALTH_REASONS.has(previous?.reason ?? '');
  const health = discoveryDecides ? undefined : previous;
  const discoveredAt = existing.status?.discovered_at;
  const server: KubeServerDraft = health || discoveredAt ? {...candidate.server, status: statusWith(candidate.server.status, health, discoveredAt)} : candidate.server;
  if (existing.status?.stale) return {name, source, labels, match, action: 'update', reason: 'source recovered; no longer stale', server};
  const changed = changedFields(existing, server);
  if (changed.length > 0) return {name, source, labels, match, action: 'update', reason: `changed: ${changed.join(', ')}`, server};
  return {name, source, labels, match, action: 'unchanged', reason: 'still discovered', server};
}

function decideVanished(name: string, entry: KubeServer, results: readonly SourceResult[], evaluation: Evaluation, skip: Skip | undefined, clouds: Clouds): PlanItem {
  const labels = entry.spec.cluster.metadata.labels;
  const covered = (source: SourceRef): boolean => covers(source, entry, clouds);
  const covering = results.filter((r) => covered(r.source));
  const failed = covering.find((r) => !r.ok);
  const keep = (reason: string, source: string): PlanItem => ({
    name,
    action: 'stale',
    reason,
    source,
    labels,
    server: markStale(entry, reason),
  });
  if (failed) {
    const err = failed.error;
    return keep(`source ${failed.source.id} failed (${err ? `${err.operation}: ${err.code}` : 'unknown error'}); kept until it answers again`, failed.source.id);
  }
  const unlisted = covering.find((r) => r.ok && r.notAListing === true);
  if (unlisted) return keep(`source ${unlisted.source.id} was skipped (${unlisted.skippedReason ?? 'no listing'}); kept until it lists again`, unlisted.source.id);
  // The cloud's own name: Teleport records discovered-name only for suffixed names, so read the spec first.
  const cloudName = clouds.registeredCluster(entry)?.cluster.name ?? labels[LABEL.discoveredName];
  const malformed = evaluation.skips.find((s) => s.kind === 'malformed' && s.cloudName === cloudName && covered(s.source));
  if (malformed) return keep(`cluster record unusable this cycle (${malformed.reason}); kept`, malformed.source.id);
  // Still listed, but the name it would move to is taken or invalid: the entry under this name is all it has.
  const unnamed = evaluation.skips.find((s) => (s.kind === 'collision' || s.kind === 'invalid_name') && s.name !== name && s.cloudName === cloudName && covered(s.source));
  if (unnamed) return keep(`still listed, but its new name ${unnamed.name || '(none)'} cannot be used (${unnamed.kind}: ${unnamed.reason}); kept under this name`, unnamed.source.id);
  const ok = covering.find((r) => r.ok);
  if (skip) return {name, action: 'delete', reason: `no longer matches: ${skip.kind}: ${skip.reason}`, source: skip.source.id, labels};
  if (ok) return {name, action: 'delete', reason: `no longer listed by ${ok.source.id}`, source: ok.source.id, labels};
  return {name, action: 'delete', reason: 'no matcher in the config covers its cloud, region and account any more', source: '', labels};
}

function markStale(entry: KubeServer, reason: string): KubeServerDraft {
  const {expires: _expires, revision: _revision, ...metadata} = entry.metadata;
  return {...entry, metadata, status: {...entry.status, stale: true, stale_reason: reason}};
}

/** Fields that differ between the stored entry and the wanted document (ignoring expiry, revision, writer and health). */
export function changedFields(existing: KubeServer, wanted: KubeServerDraft): string[] {
  // The same objects on both sides (an unchanged cluster, see evaluate's judgements) need no comparing.
  const sameCluster = existing.spec.cluster === wanted.spec.cluster;
  const a = existing.status;
  const b = wanted.status;
  if (sameCluster && a?.endpoint === b?.endpoint && a?.ca_data === b?.ca_data && a?.access === b?.access && a?.auth_mode === b?.auth_mode && a?.oidc_issuer === b?.oidc_issuer && a?.target_health === b?.target_health) return [];
  const pairs: [string, unknown, unknown][] = [];
  if (!sameCluster) {
    // The cloud block (`spec.aws`, `spec.azure` ...) is everything in the cluster spec but the dynamic labels.
    const {dynamic_labels: _before, ...cloudBefore} = existing.spec.cluster.spec;
    const {dynamic_labels: _after, ...cloudAfter} = wanted.spec.cluster.spec;
    pairs.push(
      ['labels', existing.spec.cluster.metadata.labels, wanted.spec.cluster.metadata.labels],
      ['description', existing.spec.cluster.metadata.description, wanted.spec.cluster.metadata.description],
      ['cloud', cloudBefore, cloudAfter],
      ['dynamic_labels', existing.spec.cluster.spec.dynamic_labels, wanted.spec.cluster.spec.dynamic_labels],
    );
  }
  pairs.push(
    ['endpoint', existing.status?.endpoint, wanted.status?.endpoint],
    ['ca', existing.status?.ca_data, wanted.status?.ca_data],
    ['access', existing.status?.access, wanted.status?.access],
    ['auth_mode', existing.status?.auth_mode, wanted.status?.auth_mode],
    ['oidc_issuer', existing.status?.oidc_issuer, wanted.status?.oidc_issuer],
  );
  // Discovery's own health findings (CA unusable, no endpoint) are part of what it announces.
  const before = existing.status?.target_health;
  const after = wanted.status?.target_health;
  if ((DISCOVERY_HEALTH_REASONS.has(before?.reason ?? '') || DISCOVERY_HEALTH_REASONS.has(after?.reason ?? '')) && (before?.reason !== after?.reason || before?.message !== after?.message)) {
    pairs.push(['health', before?.reason, after?.reason]);
  }
  return pairs.filter(([, a, b]) => !sameJson(a, b)).map(([field]) => field);
}
