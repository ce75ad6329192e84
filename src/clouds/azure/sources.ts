/**
 * Turns the `azure:` matchers of the config into one AKS fetcher per (matcher, subscription)
 * or (matcher, subscription, resource group). `subscriptions: ["*"]` is re-listed every
 * cycle, so a subscription granted to the identity is picked up without a restart.
 */
import {ContainerServiceClient} from '@azure/arm-containerservice';
import {ManagementGroupsAPI} from '@azure/arm-managementgroups';
import {SubscriptionClient} from '@azure/arm-resources-subscriptions';
import PQueue from 'p-queue';
import {systemClock, type Clock} from '../../core/clock.ts';
import type {SourceRef, SourceResult} from '../../core/types.ts';
import {identityKey, type AzureCredentialFactory, type TokenCredential} from '../../credentials/aks-credential.ts';
import {AzureIdentities} from '../../credentials/azure-identities.ts';
import {parseAksKubeconfig} from '../../credentials/aks-kubeconfig.ts';
import {AksLocalAccounts} from '../../credentials/aks-local-accounts.ts';
import {silentLogger, type Logger} from '../../observability/logger.ts';
import type {ClusterFetcher, PlanContext, PlannedSources} from '../fetcher.ts';
import {createAksFetcher, type AksApi, type AksListingMemory, type CachedUserCredential} from './aks-fetcher.ts';
import {armListPages, pipelineGet} from './arm-list.ts';
import {pooledHttpClient, type PooledHttpClient} from './http-client.ts';
import {LeanArmGet} from './lean-get.ts';
import {azureCloud, type AzureCloudName} from './clouds.ts';
import {azureFailure} from './errors.ts';
import {MANAGEMENT_GROUPS_API_VERSION, ManagementGroupWalkError, scopeToManagementGroups, walkManagementGroups, type DescendantPages, type ManagementGroupWalk} from './management-groups.ts';
import {EarlyListings} from '../early-listings.ts';
import {armClientOptions, type AzureClientOptions, type DiscoveryPolicyOptions} from './pipeline.ts';
import {LABEL} from '../../core/label-names.ts';
import {WalkGrace} from '../walk-grace.ts';

/** The part of an `azure:` matcher that decides where to look. */
export interface AzureSourceMatcher {
  readonly types: readonly string[];
  readonly subscriptions: readonly string[];
  /** With `subscriptions: ["*"]`: only the subscriptions under these management groups (nested ones included). */
  readonly management_groups?: readonly string[] | undefined;
  readonly resource_groups: readonly string[];
  readonly regions: readonly string[];
  readonly cloud?: AzureCloudName | undefined;
  readonly resource_manager_endpoint?: string | undefined;
  readonly client_id?: string | undefined;
}

/** Options of the Azure side of discovery; everything has a production default. */
export interface AzureSourcesOptions {
  /** One credential for every matcher (tests inject a fake); default DefaultAzureCredential per (cloud, client_id). */
  readonly credential?: TokenCredential;
  readonly credentialFactory?: AzureCredentialFactory;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** TLS, retry and extra pipeline policies (metrics) for every ARM client. */
  readonly clientOptions?: AzureClientOptions;
  readonly policyOptions?: DiscoveryPolicyOptions;
  /** Bound on listClusterUserCredential calls in flight per subscription. Default 10. */
  readonly perSubscriptionConcurrency?: number;
  /** Store of local-account tokens shared with the probe's token source; default a new one. */
  readonly localAccounts?: AksLocalAccounts;
  /** The runtime's shared identities (the probes sign in with the same ones); default built from `credential` / `credentialFactory`. */
  readonly identities?: AzureIdentities;
  /** Longest a cluster's kubeconfig is reused while its record is unchanged. Default 1 h. */
  readonly credentialMaxAgeMs?: number;
  /**
   * Managed clusters list pages on the short path (lean-get.ts) when the shared HTTP pool is in
   * use (no `clientOptions.httpClient`). Default true; false sends every page through the SDK's pipeline.
   */
  readonly leanListReads?: boolean;
}

/** Re-exported from its home in src/credentials (the runtime shares the identities). */
export {withTokenDeadline} from '../../credentials/azure-identities.ts';

/** The api-version of the managed clusters list: the one @azure/arm-containerservice 25.3 sends for its other calls. */
const AKS_API_VERSION = '2026-04-01';
const MANAGED_CLUSTERS = 'providers/Microsoft.ContainerService/managedClusters';

/** The api-version of the subscriptions list: the one @azure/arm-resources-subscriptions 2.1 sends. */
const SUBSCRIPTIONS_API_VERSION = '2022-12-01';

/** What the skipped source of a subscription one walk missed says; its entries' stale reason carries it to the next walk (walk-grace.ts). */
const WALK_MISSED = 'subscription missing from this management group walk only';
/** The same for a subscription one answer of the subscription list (`subscriptions: ["*"]`) did not show. */
const LIST_MISSED = 'subscription missing from this subscription list only';

/** Subscription states whose resources can be listed. */
const LISTABLE_STATES: ReadonlySet<string> = new Set(['Enabled', 'Warned', 'PastDue']);
/**
 * A Disabled subscription (unpaid, credit spent) is still the tenant's and comes back when
 * re-enabled, with its clusters: it is not listed, and its entries are kept (stale). A Deleted one is gone.
 */
const HELD_STATE = 'Disabled';
/** A subscription id, lower-cased: a GUID. */
const SUBSCRIPTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** How much of a subscription a state keeps: listed, held (its entries kept), gone. */
const LISTABLE_RANK = 2;
function stateRank(state: unknown): number {
  if (state === undefined || LISTABLE_STATES.has(state as string)) return LISTABLE_RANK;
  return state === HELD_STATE ? 1 : 0;
}
/** Every subscription state Azure documents; any other value is a malformed record. */
const KNOWN_STATES: ReadonlySet<string> = new Set([...LISTABLE_STATES, 'Disabled', 'Deleted']);

interface Target {
  readonly subscriptionId: string;
  readonly tenantId?: string;
}

/** Plans Azure sources; credentials, clients, queues and cached kubeconfigs are kept across cycles. */
export class AzureSources {
  readonly #options: AzureSourcesOptions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #identities: AzureIdentities;
  readonly #clusterClients = new Map<string, {readonly client: ContainerServiceClient; readonly api: AksApi}>();
  /** Each AKS source's last successful listing (see AksListingMemory); only planned sources are kept. */
  readonly #listings: AksListingMemory = new Map();
  /**
   * One HTTP client (one connection pool) for every ARM client: a client per subscription each
   * with its own pool opened a TLS connection per subscription and per credential slot (W5's cold
   * cycle: thousands of handshakes) and kept them all open between cycles. Its pool is capped (http-client.ts).
   */
  #httpClient: PooledHttpClient | undefined;
  /** The short path of the managed clusters list per (endpoint, identity), over the same pool. */
  readonly #leanGets = new Map<string, LeanArmGet>();
  readonly #subscriptionClients = new Map<string, SubscriptionClient>();
  readonly #managementGroupClients = new Map<string, ManagementGroupsAPI>();
  readonly #queues = new Map<string, PQueue>();
  readonly #kubeconfigs = new Map<string, CachedUserCredential>();
  /** Subscriptions of each `management_groups` matcher's last good walk, else the registry's: one missing from the next walk is kept once (see #targets). */
  readonly #walkGrace = new WalkGrace({cloud: 'Azure', type: 'aks', memberLabel: LABEL.subscriptionId, marker: WALK_MISSED});
  /**
   * Subscriptions of each `subscriptions: ["*"]` matcher's last good list, else the registry's: the
   * list is no listing of clusters (a role assignment still propagating hides a subscription), so one
   * it does not show is kept once.
   */
  readonly #listGrace = new WalkGrace({cloud: 'Azure', type: 'aks', memberLabel: LABEL.subscriptionId, marker: LIST_MISSED});
  /** Targets of each `subscriptions: ["*"]` matcher's last good plan: listed early by the next (early-listings.ts). */
  readonly #lastTargets = new Map<number, readonly Target[]>();
  /**
   * Fetchers by (matcher, subscription, resource group, tenant), kept across plans: a fetcher holds
   * nothing of a cycle (its listing memory is `#listings`), so the 500 sources of W5 are not built
   * twice a cycle (early and planned) for nothing. Those no plan has asked for are dropped (see plan).
   */
  readonly #fetchers = new Map<string, {readonly matcher: AzureSourceMatcher; readonly fetcher: ClusterFetcher}>();
  #plannedFetchers = new Set<string>();
  /** Client of each subscription seen by the last plan, for loading local-account credentials on demand. */
  #bySubscription = new Map<string, ContainerServiceClient>();
  /** Local-account tokens, shared with the probe's token source. */
  readonly localAccounts: AksLocalAccounts;

  constructor(options: AzureSourcesOptions = {}) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#identities =
      options.identities ??
      new AzureIdentities({credential: options.credential, credentialFactory: options.credentialFactory, timeoutMs: options.policyOptions?.requestTimeoutMs ?? 30_000});
    this.localAccounts = options.localAccounts ?? new AksLocalAccounts({clock: this.#clock});
    this.localAccounts.setLoader(async (ref) => {
      const client = this.#bySubscription.get(ref.subscriptionId.toLowerCase());
      if (!client) throw new Error(`no azure matcher covers subscription ${ref.subscriptionId}`);
      const result = await client.managedClusters.listClusterUserCredentials(ref.resourceGroup, ref.name, {format: 'exec'});
      const value = result.kubeconfigs?.find((k) => k.value !== undefined)?.value;
      if (!value) throw new Error(`listClusterUserCredential returned no kubeconfig for AKS cluster ${ref.name}`);
      return parseAksKubeconfig(value);
    });
  }

  /**
   * Builds the fetchers of every matcher; a subscription listing that fails becomes a failed source
   * covering every subscription. `context` lets a management group walk read the registry (walk-grace.ts).
   */
  async plan(matchers: readonly AzureSourceMatcher[], context?: PlanContext): Promise<PlannedSources> {
    let fetchers: ClusterFetcher[] = [];
    const late: ClusterFetcher[] = [];
    const failed: SourceResult[] = [];
    const bySubscription = new Map<string, ContainerServiceClient>();
    // While the walk and the subscriptions list run, the subscriptions of the last good plan are listed already (early-listings.ts).
    const early = context?.signal && context.sourceConcurrency ? new EarlyListings(context.sourceConcurrency, context.signal, (error) => azureFailure(error, 'ManagedClusters.List'), context.now) : undefined;
    // The walks and subscriptions lists go out first, the early listings one turn of the event loop
    // later: started together, a hundred listings' requests were written ahead of the walk's first
    // page and their answers read before its own (W5: that page took 55–90 ms for a 20 ms round trip).
    // A plan that is done before that turn (no list to read) starts none.
    const startEarly = early ? setImmediate(() => this.#startEarly(early, matchers)) : undefined;
    let planned;
    try {
      planned = await Promise.all(
        matchers.map(async (matcher, matcherIndex) => ({matcher, matcherIndex, scope: matcher.types.includes('aks') ? await this.#targets(matcher, matcherIndex, context) : {targets: []}})),
      );
    } catch (error) {
      early?.dropRest();
      throw error;
    } finally {
      clearImmediate(startEarly);
    }
    for (const {matcher, matcherIndex, scope} of planned) {
      if ('error' in scope) {
        const source = aksSource(matcherIndex, '');
        const error = scope.error instanceof ManagementGroupWalkError ? scope.error.failure : azureFailure(scope.error, 'Subscriptions.List');
        failed.push({source, ok: false, clusters: [], malformed: [], error});
        this.#logger.warn({source: source.id, operation: error.operation, code: error.code}, 'Azure subscription listing failed; every subscription of the matcher is kept as it is');
        continue;
      }
      const skip = (subscription: string, skippedReason: string): void => {
        failed.push({source: aksSource(matcherIndex, subscription), ok: true, clusters: [], malformed: [], skippedReason, notAListing: true});
      };
      for (const subscription of scope.missed ?? []) {
        skip(subscription, `${WALK_MISSED} (moved while it ran, or gone); deregistered if the next walk lacks it too`);
      }
      for (const subscription of scope.unlisted ?? []) {
        skip(subscription, `${LIST_MISSED} (access still propagating, or gone); deregistered if the next list lacks it too`);
      }
      for (const subscription of scope.disabled ?? []) {
        skip(subscription, `subscription ${HELD_STATE}: not listed; its clusters are kept until it is enabled again, deleted or out of scope`);
      }
      if (matcher.subscriptions.includes('*')) this.#lastTargets.set(matcherIndex, scope.targets);
      for (const target of scope.targets) {
        bySubscription.set(target.subscriptionId, this.#clusterClient(matcher, target.subscriptionId).client);
        for (const resourceGroup of resourceGroupsOf(matcher)) {
          const fetcher = this.#fetcher(matcher, matcherIndex, target, resourceGroup);
          const key = earlyKey(fetcher.source.id, target);
          // Sources not listed early go first: the cycle starts its sources in this order, and theirs
          // is the listing still to start (then, for a subscription that joined, its kubeconfigs).
          if (early && !early.started(key)) late.push(early.take(key, fetcher));
          else fetchers.push(early ? early.take(key, fetcher) : fetcher);
        }
      }
    }
    early?.dropRest();
    if (late.length > 0) fetchers = [...late, ...fetchers];
    // Fetchers neither this plan nor its early listings asked for are no longer kept.
    for (const key of this.#fetchers.keys()) if (!this.#plannedFetchers.has(key)) this.#fetchers.delete(key);
    this.#plannedFetchers = new Set();
    this.#bySubscription = bySubscription;
    this.#prune();
    // A failed plan keeps every listing (its sources come back); otherwise sources no longer planned are forgotten.
    if (failed.length === 0) {
      const planned = new Set(fetchers.map((f) => f.source.id));
      for (const id of this.#listings.keys()) if (!planned.has(id)) this.#listings.delete(id);
    }
    return {fetchers, failed};
  }

  /** Starts listing the subscriptions each `subscriptions: ["*"]` matcher had in its last good plan. */
  #startEarly(early: EarlyListings, matchers: readonly AzureSourceMatcher[]): void {
    for (const [matcherIndex, targets] of this.#lastTargets) {
      const matcher = matchers[matcherIndex];
      if (!matcher) continue;
      for (const target of targets) {
        for (const resourceGroup of resourceGroupsOf(matcher)) {
          const fetcher = this.#fetcher(matcher, matcherIndex, target, resourceGroup);
          early.start(earlyKey(fetcher.source.id, target), fetcher);
        }
      }
    }
  }

  /** The fetcher of one (matcher, subscription[, resource group]) source: the last plan's, when built from the same inputs. */
  #fetcher(matcher: AzureSourceMatcher, matcherIndex: number, target: Target, resourceGroup: string | undefined): ClusterFetcher {
    const key = `${matcherIndex}|${target.subscriptionId}|${resourceGroup ?? ''}|${target.tenantId ?? ''}`;
    const kept = this.#fetchers.get(key);
    if (kept?.matcher === matcher) {
      this.#plannedFetchers.add(key);
      return kept.fetcher;
    }
    const fetcher = this.#newFetcher(matcher, matcherIndex, target, resourceGroup);
    this.#fetchers.set(key, {matcher, fetcher});
    this.#plannedFetchers.add(key);
    return fetcher;
  }

  #newFetcher(matcher: AzureSourceMatcher, matcherIndex: number, target: Target, resourceGroup: string | undefined): ClusterFetcher {
    return createAksFetcher({
      source: aksSource(matcherIndex, target.subscriptionId, resourceGroup),
      client: this.#clusterClient(matcher, target.subscriptionId).api,
      credentialQueue: this.#queue(target.subscriptionId),
      regions: matcher.regions,
      ...(target.tenantId ? {tenantId: target.tenantId} : {}),
      clock: this.#clock,
      localAccounts: this.localAccounts,
      credentialCache: this.#kubeconfigs,
      listings: this.#listings,
      ...(this.#options.credentialMaxAgeMs !== undefined ? {credentialMaxAgeMs: this.#options.credentialMaxAgeMs} : {}),
      logger: this.#logger,
    });
  }

  /** Drops kubeconfigs and local-account tokens of clusters no cycle has seen for a while (they vanished). */
  #prune(): void {
    const now = this.#clock.now();
    const maxAge = this.#options.credentialMaxAgeMs ?? 3_600_000;
    // forEach: no [key, value] pair per entry, every cycle, for every cluster.
    this.#kubeconfigs.forEach((cached, id, map) => {
      if (now - cached.at >= maxAge) map.delete(id);
    });
    this.localAccounts.prune();
  }

  /** The matcher's subscriptions, and those kept once: missed by this walk (`management_groups`) or, without groups, by this list. */
  async #targets(matcher: AzureSourceMatcher, matcherIndex: number, context: PlanContext | undefined): Promise<{targets: Target[]; missed?: readonly string[]; unlisted?: readonly string[]; disabled?: readonly string[]} | {error: unknown}> {
    if (!matcher.subscriptions.includes('*')) {
      return {targets: uniqueCaseless(matcher.subscriptions).map((s) => ({subscriptionId: s.toLowerCase()}))};
    }
    const client = this.#subscriptionClient(matcher);
    const targets: Target[] = [];
    const seen = new Set<string>();
    let disabled: string[] = [];
    const ranks = new Map<string, number>();
    // The cycle's signal: lists cut off by the cycle's deadline stop being read.
    const signal = context?.signal ?? new AbortController().signal;
    // The walk runs beside the listing; it settles to a value so a failed listing leaves no rejection behind.
    const groups = matcher.management_groups;
    const walking: Promise<ManagementGroupWalk | {error: unknown}> | undefined = groups?.length
      ? walkManagementGroups(this.#descendantPages(matcher), groups, {signal}).catch((error: unknown) => ({error}))
      : undefined;
    try {
      // Read as ARM's JSON, parsed once and checked (arm-list.ts): the SDK's pager parsed each page
      // three times (our shape check, its JSON body, its model mapper), every cycle.
      const {cloud, httpClient} = this.#clientOptions(matcher);
      const url = `${cloud.armEndpoint.replace(/\/+$/, '')}/subscriptions?api-version=${SUBSCRIPTIONS_API_VERSION}`;
      for await (const page of armListPages('subscriptions.list', pipelineGet(client.pipeline, httpClient), url, signal, SUBSCRIPTIONS_API_VERSION)) {
        for (const item of page) {
          const sub = readSubscription(item);
          // Malformed is not "not there": a record that does not say which subscription, or in what
          // state, fails the listing rather than drop that subscription's clusters.
          const id = (sub.subscriptionId ?? /^\/subscriptions\/([^/]+)$/i.exec(sub.id ?? '')?.[1])?.toLowerCase();
          if (!id) throw Object.assign(new Error('the subscriptions list returned a record without a subscription id'), {code: 'InvalidResponse'});
          // Subscription ids are GUIDs: a garbled one names no subscription, and the one it garbled
          // would be missing from the list (its clusters deregistered once the grace is spent).
          if (!SUBSCRIPTION_ID.test(id)) throw Object.assign(new Error(`the subscriptions list returned a record whose subscription id ${JSON.stringify(id.slice(0, 40))} is not a GUID`), {code: 'InvalidResponse'});
          const idOfPath = /^\/subscriptions\/([^/]+)$/i.exec(sub.id ?? '')?.[1]?.toLowerCase();
          if (sub.subscriptionId !== undefined && idOfPath !== undefined && idOfPath !== id) {
            throw Object.assign(new Error(`the subscriptions list returned a record for subscription ${id} whose id names ${JSON.stringify(idOfPath.slice(0, 40))}`), {code: 'InvalidResponse'});
          }
          const state = sub.state;
          if (state !== undefined && (typeof state !== 'string' || !KNOWN_STATES.has(state))) {
            throw Object.assign(new Error(`subscription ${id} is in state ${String(JSON.stringify(state)).slice(0, 40)}, which is not an Azure subscription state`), {code: 'InvalidResponse'});
          }
          // The same subscription twice (its record changed while the pages were read): the record
          // that keeps most wins whatever the order — listable, then Disabled, then Deleted — as an
          // account ACTIVE in one Organizations listing is ACTIVE.
          const rank = stateRank(state);
          const before = ranks.get(id);
          if (before !== undefined && before >= rank) continue;
          seen.add(id);
          ranks.set(id, rank);
          if (rank < LISTABLE_RANK) {
            this.#logger.debug({subscription: id, state}, 'Azure subscription skipped: not listable in its state');
            if (state === HELD_STATE) disabled.push(id);
            continue;
          }
          targets.push({subscriptionId: id, ...(sub.tenantId ? {tenantId: sub.tenantId} : {})});
        }
      }
    } catch (error) {
      return {error};
    }
    // A Disabled record a later listable one outranked is not held: the subscription is listed.
    if (disabled.length > 0) disabled = disabled.filter((id) => ranks.get(id) === stateRank(HELD_STATE));
    // Without groups the list alone decides; a registry that cannot be read fails the plan (`aks:*`), deleting nothing.
    if (!walking) return {targets, disabled, unlisted: await this.#listGrace.missedOnce(matcherIndex, seen, context)};
    const walk = await walking;
    if ('error' in walk) return walk;
    // The walk is no snapshot: a subscription moved between groups while it ran (two named groups
    // answering either side of the move, or a page already read) can be missing from every answer.
    // One walk without a subscription keeps its clusters (stale); the second deregisters them.
    // The previous walk is this planner's, or else the one the registry's stale marks tell of (a restart).
    const walked = new Set(walk.subscriptions);
    // A registry that cannot be read fails the plan (the catch-all source `aks:*`): nothing is deleted.
    const missed = await this.#walkGrace.missedOnce(matcherIndex, walked, context);
    return {targets: scopeToManagementGroups(walk, targets, seen), missed, disabled: disabled.filter((id) => walked.has(id))};
  }

  /** The credential and client options of a matcher, for other ARM clients (AKS access set-up) on the same identity and policies. */
  armAccess(matcher: AzureSourceMatcher): {credential: TokenCredential; options: ReturnType<typeof armClientOptions>} {
    return {credential: this.#credential(matcher), options: this.#clientOptions(matcher).options};
  }

  #credential(matcher: AzureSourceMatcher): TokenCredential {
    return this.#identities.for(identityOf(matcher));
  }

  #clientOptions(matcher: AzureSourceMatcher) {
    const cloud = azureCloud(matcher.cloud, matcher.resource_manager_endpoint);
    const httpClient = this.#options.clientOptions?.httpClient ?? (this.#httpClient ??= pooledHttpClient());
    return {cloud, httpClient, options: armClientOptions(cloud.armEndpoint, cloud.armScope, {...this.#options.clientOptions, httpClient}, this.#options.policyOptions)};
  }

  #clusterClient(matcher: AzureSourceMatcher, subscriptionId: string): {client: ContainerServiceClient; api: AksApi} {
    // Looked up before the client options are built: every subscription asks every cycle, and options are only needed for a new client.
    const key = `${azureCloud(matcher.cloud, matcher.resource_manager_endpoint).armEndpoint}|${identityKey(identityOf(matcher))}|${subscriptionId}`;
    let entry = this.#clusterClients.get(key);
    if (!entry) {
      const {cloud, options, httpClient} = this.#clientOptions(matcher);
      const lean = this.#leanGet(matcher);
      // The short path learns from the client's own requests how they look (user agent, TLS, no proxy).
      const client = new ContainerServiceClient(this.#credential(matcher), subscriptionId, lean ? {...options, additionalPolicies: [...options.additionalPolicies, lean.learn]} : options);
      // The list goes through the client's own pipeline (token, retries, policies), parsed once (arm-list.ts),
      // its pages first on the short path when there is one (lean-get.ts).
      const get = pipelineGet(client.pipeline, httpClient);
      const short = lean ? (url: string, signal: AbortSignal) => lean.get(url, signal) : undefined;
      const base = `${cloud.armEndpoint.replace(/\/+$/, '')}/subscriptions/${encodeURIComponent(subscriptionId)}`;
      const api: AksApi = {
        // Each call names its ARM operation (the IAM test maps it to the role's action).
        listPages: (resourceGroup, signal, memory) =>
          resourceGroup === undefined
            ? armListPages('managedClusters.list', get, `${base}/${MANAGED_CLUSTERS}?api-version=${AKS_API_VERSION}`, signal, AKS_API_VERSION, memory, short)
            : armListPages('managedClusters.listByResourceGroup', get, `${base}/resourceGroups/${encodeURIComponent(resourceGroup)}/${MANAGED_CLUSTERS}?api-version=${AKS_API_VERSION}`, signal, AKS_API_VERSION, memory, short),
        listClusterUserCredentials: (...args) => client.managedClusters.listClusterUserCredentials(...args),
      };
      entry = {client, api};
      this.#clusterClients.set(key, entry);
    }
    return entry;
  }

  /** The short path of a matcher's (endpoint, identity); none when the caller brought its own HTTP client, or turned it off. */
  #leanGet(matcher: AzureSourceMatcher): LeanArmGet | undefined {
    if (this.#options.leanListReads === false || this.#options.clientOptions?.httpClient !== undefined) return undefined;
    const {cloud} = this.#clientOptions(matcher);
    const pool = (this.#httpClient ??= pooledHttpClient());
    const key = `${cloud.armEndpoint}|${identityKey(identityOf(matcher))}`;
    let lean = this.#leanGets.get(key);
    if (!lean) {
      lean = new LeanArmGet({
        credential: this.#credential(matcher),
        scope: cloud.armScope,
        agentFor: pool.agentFor,
        dispatcherFor: pool.dispatcherFor,
        policies: this.#options.clientOptions?.additionalPolicies ?? [],
        timeoutMs: this.#options.policyOptions?.requestTimeoutMs ?? 30_000,
      });
      this.#leanGets.set(key, lean);
    }
    return lean;
  }

  #subscriptionClient(matcher: AzureSourceMatcher): SubscriptionClient {
    const {cloud, options} = this.#clientOptions(matcher);
    const key = `${cloud.armEndpoint}|${identityKey(identityOf(matcher))}`;
    let client = this.#subscriptionClients.get(key);
    if (!client) {
      client = new SubscriptionClient(this.#credential(matcher), options);
      this.#subscriptionClients.set(key, client);
    }
    return client;
  }

  /** The descendants of a group, page by page, through the management groups client's pipeline. */
  #descendantPages(matcher: AzureSourceMatcher): DescendantPages {
    const {cloud, httpClient} = this.#clientOptions(matcher);
    const get = pipelineGet(this.#managementGroupsClient(matcher).pipeline, httpClient);
    const base = `${cloud.armEndpoint.replace(/\/+$/, '')}/providers/Microsoft.Management/managementGroups`;
    return (group, signal) =>
      armListPages('managementGroups.listDescendants', get, `${base}/${encodeURIComponent(group)}/descendants?api-version=${MANAGEMENT_GROUPS_API_VERSION}`, signal, MANAGEMENT_GROUPS_API_VERSION);
  }

  #managementGroupsClient(matcher: AzureSourceMatcher): ManagementGroupsAPI {
    const {cloud, options} = this.#clientOptions(matcher);
    const key = `${cloud.armEndpoint}|${identityKey(identityOf(matcher))}`;
    let client = this.#managementGroupClients.get(key);
    if (!client) {
      client = new ManagementGroupsAPI(this.#credential(matcher), options);
      this.#managementGroupClients.set(key, client);
    }
    return client;
  }

  #queue(subscriptionId: string): PQueue {
    let queue = this.#queues.get(subscriptionId);
    if (!queue) {
      queue = new PQueue({concurrency: this.#options.perSubscriptionConcurrency ?? 10});
      this.#queues.set(subscriptionId, queue);
    }
    return queue;
  }
}

/** A SourcePlanner (see src/discovery/cycle.ts) over the `azure:` matchers. */
export interface AzurePlanner {
  plan(context?: PlanContext): Promise<PlannedSources>;
  readonly sources: AzureSources;
}

/** The planner discovery registers for `discovery_service.azure`. */
export function azurePlanner(matchers: readonly AzureSourceMatcher[], options: AzureSourcesOptions = {}): AzurePlanner {
  const sources = new AzureSources(options);
  return {plan: (context) => sources.plan(matchers, context), sources};
}

/**
 * The SourceRef of an AKS source: `aks:<subscription>` or `aks:<subscription>:<resource group>`
 * (`aks:*` when the subscriptions could not be listed: it then covers every subscription).
 */
export function aksSource(matcherIndex: number, subscriptionId: string, resourceGroup?: string): SourceRef {
  const suffix = matcherIndex > 0 ? `#${matcherIndex}` : '';
  return {
    id: `aks:${subscriptionId || '*'}${resourceGroup ? `:${resourceGroup}` : ''}${suffix}`,
    cloud: 'Azure',
    type: 'aks',
    region: '*',
    account: subscriptionId,
    ...(resourceGroup ? {resourceGroup} : {}),
    matcherIndex,
  };
}

/** The fields the plan reads of one subscriptions list record; a field of the wrong JSON type fails the listing. */
function readSubscription(item: Readonly<Record<string, unknown>>): {subscriptionId?: string; id?: string; state?: unknown; tenantId?: string} {
  const text = (key: string): string | undefined => {
    const value = item[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string') throw Object.assign(new Error(`the subscriptions list returned a record whose ${key} is not a string`), {code: 'InvalidResponse'});
    return value;
  };
  const subscriptionId = text('subscriptionId');
  const id = text('id');
  const tenantId = text('tenantId');
  // Judged by the caller against the states Azure documents (null is not one of them).
  const state = item['state'];
  return {...(subscriptionId === undefined ? {} : {subscriptionId}), ...(id === undefined ? {} : {id}), ...(state === undefined ? {} : {state}), ...(tenantId === undefined ? {} : {tenantId})};
}

function identityOf(matcher: AzureSourceMatcher): {cloud?: AzureCloudName; clientId?: string} {
  return {...(matcher.cloud ? {cloud: matcher.cloud} : {}), ...(matcher.client_id ? {clientId: matcher.client_id} : {})};
}

/** `[undefined]` (the whole subscription) or the matcher's resource groups. */
function resourceGroupsOf(matcher: AzureSourceMatcher): (string | undefined)[] {
  return matcher.resource_groups.includes('*') ? [undefined] : uniqueCaseless(matcher.resource_groups);
}

/** An early listing is handed on only to a source built from the same inputs: its id (matcher, subscription, resource group) and tenant. */
function earlyKey(sourceId: string, target: Target): string {
  return `${sourceId}|${target.tenantId ?? ''}`;
}

function uniqueCaseless(values: readonly string[]): string[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    const key = v.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
