/**
 * Sources of an `organization` matcher: every cycle, walk the organization with the service's
 * own credentials, assume `assume_role_name` in each selected ACTIVE account, and list EKS in
 * every (account, region). Failures stay where they happen: a walk that fails keeps every
 * entry the matcher could cover; an account whose role cannot be assumed is one failed source
 * (its clusters kept, stale) while the others reconcile. Neither a walk nor a region list is a
 * listing of clusters: an account one walk lacks is kept once (walk-grace.ts), and a region an
 * account's ListRegions answer no longer has is still listed while it may hold clusters.
 */
import {AsyncLocalStorage} from 'node:async_hooks';
import {AccountClient} from '@aws-sdk/client-account';
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import {OrganizationsClient} from '@aws-sdk/client-organizations';
import {GetResourcesCommand, ResourceGroupsTaggingAPIClient} from '@aws-sdk/client-resource-groups-tagging-api';
import PQueue from 'p-queue';
import type {ClusterFetcher, PlanContext} from '../fetcher.ts';
import type {EarlyListings} from '../early-listings.ts';
import {WalkGrace} from '../walk-grace.ts';
import {LABEL} from '../../core/label-names.ts';
import {flatString} from '../../core/intern.ts';
import {systemClock, type Clock} from '../../core/clock.ts';
import type {SourceRef, SourceResult} from '../../core/types.ts';
import type {KubeServer} from '../../../heartbeats/kube-server.ts';
import type {AwsCredentialProvider} from '../../credentials/aws-credentials.ts';
import {listEnabledRegions, type AccountApi} from './account-regions.ts';
import {createEksFetcher, type EksApi} from './eks-fetcher.ts';
import {Slots} from '../../core/slots.ts';
import {awsFailure} from './errors.ts';
// A function declaration: safe across the import cycle with sources.ts (nothing runs at load).
import {awsRequestHandler} from './sources.ts';
import {DEFAULT_CONNECT_TIMEOUT_MS} from './connect-deadline.ts';
import {AwsDispatcher} from './undici-handler.ts';
import {OrganizationWalkError, walkOrganization, type OrganizationsApi, type OrganizationWalk} from './organization.ts';
import {leanSdkClient} from './lean-sdk.ts';
import {refuseDuplicateKeys} from './unique-keys.ts';
import {describeClusterOperation, getResourcesOperation, leanReads, listClustersOperation} from './lean-read.ts';
import {expandRegions, type AwsPartition} from './regions.ts';
import {NodeSha256} from './sha256.ts';
import {TagMemory, TagReader, type TaggingApi, type TagReadFallback} from './tag-reader.ts';

/** The part of an `aws:` matcher with `organization` that decides where to look. */
export interface OrganizationSourceMatcher {
  readonly regions: readonly string[];
  readonly assume_role_name?: string | undefined;
  readonly external_id?: string | undefined;
  readonly organization: {
    readonly organization_id: string;
    readonly organizational_units: {readonly include: readonly string[]; readonly exclude: readonly string[]};
  };
}

/** What the organization planner needs from the AWS side (AwsSources hands it over). */
export interface OrganizationPlannerOptions {
  /** The service's own credentials (default chain): they walk the organization and assume the member roles. */
  readonly baseCredentials: () => AwsCredentialProvider;
  /** Cached assumed-role credentials for one member role. */
  readonly roleCredentials: (role: {roleArn: string; externalId?: string; region: string}) => AwsCredentialProvider;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Builds the Organizations client; tests and metrics wrap it. */
  readonly makeOrganizationsClient?: (credentials: AwsCredentialProvider) => OrganizationsApi;
  /** Builds the one EKS client of a region shared by every member account (credentials chosen per call). */
  readonly makeEksClient?: (region: string, credentials: AwsCredentialProvider) => EksApi;
  /** Builds the one Account Management client (ListRegions) shared by every member account. */
  readonly makeAccountClient?: (credentials: AwsCredentialProvider) => AccountApi;
  readonly onClient?: (client: EKSClient | OrganizationsClient | AccountClient | ResourceGroupsTaggingAPIClient) => void;
  /**
   * Incremental discovery per (account, region), as for single-account matchers (tag-reader.ts):
   * the full refresh period of a description; absent or 0 describes every cluster every cycle.
   */
  readonly refreshMs?: number;
  /** Refresh period of UPDATING clusters (tag-reader.ts). */
  readonly settleMs?: number;
  /** Bound on one source's tag read per cycle. */
  readonly tagReadTimeoutMs?: number;
  /** Builds the one tagging client of a region shared by every member account (credentials chosen per call). */
  readonly makeTaggingClient?: (region: string, credentials: AwsCredentialProvider) => TaggingApi;
  /** A source's tag read failed and it described every cluster instead. */
  readonly onTagFallback?: (source: SourceRef, fallback: TagReadFallback) => void;
  /** How long an account's enabled regions (`regions: ["*"]`) are reused before being asked again. */
  readonly regionRefreshMs?: number;
  readonly clock?: Clock;
  /** DescribeCluster calls in flight per (account, region). */
  readonly perRegionConcurrency?: number;
  /** EKS calls in flight per account, whatever the region: one slow or throttled account cannot take every slot. */
  readonly perAccountConcurrency?: number;
  /** AssumeRole checks in flight while planning. */
  readonly assumeConcurrency?: number;
  /** Bound on one Organizations call (a hung walk fails rather than stalling the cycle). */
  readonly organizationsTimeoutMs?: number;
  /** Deadline of one HTTP attempt of the member-account EKS and Account clients (`request_timeout`); default 20 s. */
  readonly requestTimeoutMs?: number;
}

/** What the skipped source of an account one walk missed says; its entries' stale reason carries it to the next walk (walk-grace.ts). */
const WALK_MISSED = 'account missing from this organization walk only';

/**
 * How long before its credentials expire an account is no longer listed early: the credential
 * cache renews them from then on, and an early listing must not put an AssumeRole ahead of the walk.
 */
const EARLY_CREDENTIAL_MARGIN_MS = 5 * 60_000;

/** One member account of a plan, with what its sources are built from. */
interface ReadyAccount {
  readonly account: string;
  readonly roleArn: string;
  readonly provider: AwsCredentialProvider;
  readonly regions: readonly string[];
  /** When the credentials planning got expire (epoch ms), if they say. */
  readonly expiresAt: number | undefined;
}

/** A matcher's last good plan: its accounts are listed early by the next (early-listings.ts). */
interface LastPlan {
  readonly roleName: string;
  readonly externalId: string | undefined;
  readonly wildcard: boolean;
  /** In the plan's order: region-major, accounts sorted. */
  readonly regions: readonly string[];
  readonly accounts: readonly ReadyAccount[];
}

/** Sources of one organization matcher for one cycle. */
export interface PlannedOrganization {
  readonly fetchers: ClusterFetcher[];
  readonly failed: SourceResult[];
  /** The walk, when it succeeded (for logs and the bench). */
  readonly walk?: OrganizationWalk;
}

// The region-shared EKS clients sign each call as the member account whose fetcher issued it.
const callIdentity = new AsyncLocalStorage<AwsCredentialProvider>();

/** A credential provider that answers with the identity of the calling account; it refuses calls made outside one. */
const perCallCredentials: AwsCredentialProvider & {memoized: boolean} = Object.assign(
  async () => {
    const provider = callIdentity.getStore();
    if (!provider) throw Object.assign(new Error('EKS call outside an account identity'), {name: 'CredentialsProviderError'});
    return provider();
  },
  // Tells the SDK not to memoize: a memoized provider would sign every account's calls with the first account's keys.
  {memoized: true},
);

/**
 * Keep-alive sockets per endpoint of the member-account clients. A region's client carries every
 * account's calls in that region, and the cycle's source order (region-major) puts most in-flight
 * sources in one region: the SDK's default of 50 per client capped a cycle of 100 source slots
 * at 50 calls in flight.
 */
const SHARED_CLIENT_SOCKETS = 256;

/** Plans organization matchers; Organizations clients, EKS clients and queues live across cycles. */
export class OrganizationPlanner {
  readonly #options: OrganizationPlannerOptions;
  #organizations: OrganizationsApi | undefined;
  readonly #eksClients = new Map<string, EksApi>();
  readonly #taggingClients = new Map<string, TaggingApi>();
  /**
   * Per (account, region) source id: what it described, kept across cycles. Only the memory is
   * kept (none for a source that remembers nothing); its reader is built when the source runs.
   */
  readonly #tagMemory = new Map<string, SourceMemory>();
  /** Accounts of each matcher's last good walk, else the registry's: one a walk lacks is kept once; state of accounts no walk has any more is dropped. */
  readonly #walkGrace = new WalkGrace({cloud: 'AWS', type: 'eks', memberLabel: LABEL.accountId, marker: WALK_MISSED});
  /** Per matcher, the accounts its last good walk missed once (kept, stale): what is known of them is kept too. */
  readonly #missedOnce = new Map<number, ReadonlySet<string>>();
  /** One pool of keep-alive sockets for every member-account client (pooled per endpoint host). */
  #sharedDispatcher: AwsDispatcher | undefined;
  readonly #accountQueues = new Map<string, Slots>();
  #accountApi: AccountApi | undefined;
  readonly #enabledRegions = new Map<string, {regions: readonly string[]; at: number}>();
  /**
   * Per account, regions its ListRegions answer no longer has that may still hold its clusters
   * (an answer is no listing of clusters): listed anyway until EKS there lists none (#regionsOf).
   */
  readonly #heldRegions = new Map<string, Set<string>>();
  /**
   * Regions of each account's registered entries, read from the registry on the first plan of a
   * `regions: ["*"]` matcher (a restart has no last answer to compare with); an account's entry
   * goes once its first region list is in, so the registry is read once per process, not per cycle.
   */
  #registeredRegions: Map<string, ReadonlySet<string>> | undefined;
  /** Per matcher, its last good plan (early-listings.ts). */
  readonly #lastPlans = new Map<number, LastPlan>();

  constructor(options: OrganizationPlannerOptions) {
    this.#options = options;
  }

  /** Whether some matcher has a last good plan whose sources the next plan can list early. */
  get hasEarlyListings(): boolean {
    return this.#lastPlans.size > 0;
  }

  /**
   * Starts listing the (account, region) sources of each matcher's last good plan whose
   * credentials are still cached (a steady cycle: no STS call), in that plan's order, while the
   * walk runs. `matchers` are this cycle's organization matchers by index; a matcher whose role
   * or external id changed lists nothing early (its plan would not take those listings anyway).
   * Each matcher is fed apart (its index is its group): its plan stops its own feeding only.
   */
  startEarly(early: EarlyListings, matchers: ReadonlyMap<number, OrganizationSourceMatcher>): void {
    const now = (this.#options.clock ?? systemClock).now();
    for (const [matcherIndex, last] of this.#lastPlans) {
      const matcher = matchers.get(matcherIndex);
      if (!matcher || (matcher.assume_role_name ?? '') !== last.roleName || matcher.external_id !== last.externalId || matcher.regions.includes('*') !== last.wildcard) continue;
      early.feed(this.#earlyListings(matcherIndex, last, now), matcherIndex);
    }
  }

  *#earlyListings(matcherIndex: number, last: LastPlan, now: number): Generator<readonly [string, ClusterFetcher]> {
    const fresh = last.accounts.filter((a) => a.expiresAt === undefined || now < a.expiresAt - EARLY_CREDENTIAL_MARGIN_MS);
    for (const region of last.regions) {
      for (const ready of fresh) {
        if (!ready.regions.includes(region)) continue;
        const listing = this.#listing(matcherIndex, region, ready, last.externalId, last.wildcard);
        yield [earlyKey(listing.source, ready.roleArn, last.externalId, last.wildcard), listing];
      }
    }
  }

  /**
   * Walks the organization and builds one fetcher per (account, region); see the file comment for
   * failures. `context` reads the registry when this planner has no previous walk or region list.
   * With `early`, the listings started before the walk (startEarly) of sources this plan still has
   * with the same inputs are handed on; the others are left to the caller's `dropRest(matcherIndex)`,
   * called once this plan is done (failed or not).
   */
  async plan(matcherIndex: number, matcher: OrganizationSourceMatcher, signal?: AbortSignal, context?: PlanContext, early?: EarlyListings): Promise<PlannedOrganization> {
    const org = matcher.organization;
    let walk: OrganizationWalk;
    try {
      walk = await walkOrganization(
        this.#organizationsClient(),
        {organizationId: org.organization_id, include: org.organizational_units.include, exclude: org.organizational_units.exclude},
        signal ? {signal} : {},
      );
    } catch (error) {
      const failure = error instanceof OrganizationWalkError ? error.failure : awsFailure(error, 'DescribeOrganization');
      // Region '*' and no account: this failed source covers every entry the matcher could have made.
      return {fetchers: [], failed: [{source: organizationSource(matcherIndex, org.organization_id), ok: false, clusters: [], malformed: [], error: failure}]};
    }

    const roleName = matcher.assume_role_name ?? '';
    const regions = expandRegions(matcher.regions, walk.partition);
    const wildcard = matcher.regions.includes('*');
    const homeRegion = homeRegionOf(walk.partition, regions);
    const failed: SourceResult[] = [];
    // A registry that cannot be read throws here: the catch-all source `eks:*` fails, deleting nothing.
    if (wildcard && context && !this.#registeredRegions) this.#registeredRegions = regionsByAccount(await context.registered());
    const ready: ReadyAccount[] = [];
    const assumeQueue = new PQueue({concurrency: this.#options.assumeConcurrency ?? 20});
    await Promise.all(
      walk.accounts.map((account) =>
        assumeQueue.add(async () => {
          const roleArn = `arn:${walk.partition}:iam::${account.id}:role/${roleName}`;
          const provider = this.#options.roleCredentials({roleArn, ...(matcher.external_id ? {externalId: matcher.external_id} : {}), region: homeRegion});
          try {
            // Cached until near expiry: steady-state cycles make no STS call here.
            const credentials = await provider();
            ready.push({
              account: account.id,
              roleArn,
              provider,
              regions: wildcard ? await this.#regionsOf(account.id, provider, regions, signal) : regions,
              expiresAt: credentials.expiration?.getTime(),
            });
          } catch (error) {
            // One failed source per account (not per region): one log line naming account, role and error.
            failed.push({source: accountSource(matcherIndex, account.id), ok: false, clusters: [], malformed: [], error: awsFailure(error, 'AssumeRole')});
          }
        }),
      ),
    );
    ready.sort((a, b) => a.account.localeCompare(b.account));
    // The walk is no snapshot: an account moved between OUs while it ran can be missing from both
    // listings. One walk without an account keeps its clusters (stale); the second deregisters them,
    // whether this process or another one (before a restart, another leader, `once`) made the first.
    const walked = new Set([...walk.accounts.map((a) => a.id), ...walk.suspended]);
    // A suspended account is still a member and its clusters still exist; it cannot be listed, so
    // nothing is known to be gone: its entries stay (stale) until it is ACTIVE again, closed or gone.
    for (const account of walk.suspended) {
      failed.push({
        source: accountSource(matcherIndex, account),
        ok: true,
        clusters: [],
        malformed: [],
        skippedReason: 'account SUSPENDED in the organization: not listed; its clusters are kept until it is ACTIVE again, closed or gone',
        notAListing: true,
      });
    }
    // A registry that cannot be read throws here: the catch-all source `eks:*` fails, deleting nothing.
    const missedOnce = await this.#walkGrace.missedOnce(matcherIndex, walked, context);
    for (const account of missedOnce) {
      failed.push({
        source: accountSource(matcherIndex, account),
        ok: true,
        clusters: [],
        malformed: [],
        skippedReason: `${WALK_MISSED} (moved while it ran, or gone); deregistered if the next walk lacks it too`,
        notAListing: true,
      });
    }
    // Per matcher, replaced at each of its walks: another matcher's plan must not forget them either.
    this.#missedOnce.set(matcherIndex, new Set(missedOnce));
    this.#forgetAccountsNotWalked();

    // Region-major order: the cycle's FIFO source queue then spreads its slots over every account.
    const fetchers: ClusterFetcher[] = [];
    // Sources not listed early (an account or region that joined, a role that changed) go first:
    // the cycle starts its sources in this order, and theirs is the listing still to start.
    const late: ClusterFetcher[] = [];
    const allRegions = [...new Set(ready.flatMap((r) => r.regions))].sort();
    // The plan is final: none more of this matcher's sources starts early (what `started` says holds
    // below); the other organization matchers, still walking, go on being listed early.
    early?.stopFeeding(matcherIndex);
    for (const region of allRegions) {
      for (const account of ready) {
        if (!account.regions.includes(region)) continue;
        const listing = this.#listing(matcherIndex, region, account, matcher.external_id, wildcard);
        const key = earlyKey(listing.source, account.roleArn, matcher.external_id, wildcard);
        const lateHere = early !== undefined && !early.started(key);
        const taken = early ? early.take(key, listing) : listing;
        // Only a listing the plan handed on tells whether a held region still has clusters (none
        // dropped does); a region is held only by planning, so one not held now needs no wrapper.
        const held = this.#heldRegions.get(account.account)?.has(region) === true;
        (lateHere ? late : fetchers).push(
          held
            ? {
                source: listing.source,
                fetch: async (signal) => {
                  const result = await taken.fetch(signal);
                  this.#releaseHeld(account.account, region, result);
                  return result;
                },
              }
            : taken,
        );
      }
    }
    this.#lastPlans.set(matcherIndex, {roleName, externalId: matcher.external_id, wildcard, regions: allRegions, accounts: ready});
    return {fetchers: late.length > 0 ? [...late, ...fetchers] : fetchers, failed, walk};
  }

  /**
   * The listing of one (account, region) source. Its client, describe cap and tag reader live only
   * while it runs (one source uses them): 17,000 idle queues kept across cycles were ~12 MB of
   * heap, readers ~7 MB, and the options and client wrappers of every source planned at once ~3 MB.
   */
  #listing(matcherIndex: number, region: string, ready: ReadyAccount, externalId: string | undefined, wildcard: boolean): ClusterFetcher {
    // With incremental discovery a source's id is its memory's, the same string every cycle: the
    // clusters it describes (reused across cycles), its status and plan items share it, not one built per cycle.
    const planned = regionSource(matcherIndex, region, ready.account);
    const memory = this.#memoryOf(planned);
    const source = memory ? {...planned, id: memory.id} : planned;
    const {account, roleArn, provider} = ready;
    return {
      source,
      fetch: async (signal) => {
        const tagReader = memory && this.#tagReader(source, provider, memory);
        try {
          return await createEksFetcher({
            source,
            client: this.#accountClient(region, account, provider),
            skipNotEnabledRegion: wildcard,
            roleArn,
            ...(externalId ? {externalId} : {}),
            describeQueue: new Slots(this.#options.perRegionConcurrency ?? 10),
            ...(tagReader ? {tagReader} : {}),
          }).fetch(signal);
        } finally {
          if (this.#tagMemory.get(source.id)?.empty) this.#tagMemory.delete(source.id);
        }
      },
    };
  }

  /**
   * The regions to list in an account: those it has enabled, cached for `regionRefreshMs` (when
   * they cannot be read the last known list, else every region of the partition, whose "not
   * enabled" answers are skipped), plus the regions it holds (#heldRegions). A region an answer no
   * longer has (the one before had it, or the registry has entries there) is held: ListRegions
   * is no listing of clusters, and a disabled region's clusters still exist.
   */
  async #regionsOf(account: string, provider: AwsCredentialProvider, partitionRegions: readonly string[], signal?: AbortSignal): Promise<readonly string[]> {
    const clock = this.#options.clock ?? systemClock;
    const cached = this.#enabledRegions.get(account);
    if (cached && clock.now() - cached.at < (this.#options.regionRefreshMs ?? 3_600_000)) return this.#withHeld(account, cached.regions);
    try {
      const api = this.#accountApiClient();
      const listed = await this.#accountQueue(account).add(() => callIdentity.run(provider, () => listEnabledRegions(api, signal)));
      // Only regions of the matcher's partition: the walk decided which one that is.
      const regions = listed.filter((r) => partitionRegions.includes(r));
      const before = cached?.regions ?? [...(this.#registeredRegions?.get(account) ?? [])];
      this.#registeredRegions?.delete(account);
      const held = this.#heldRegions.get(account) ?? new Set<string>();
      for (const region of before) if (partitionRegions.includes(region)) held.add(region);
      for (const region of regions) held.delete(region);
      if (held.size > 0) this.#heldRegions.set(account, held);
      else this.#heldRegions.delete(account);
      this.#enabledRegions.set(account, {regions, at: clock.now()});
      return this.#withHeld(account, regions);
    } catch {
      return this.#withHeld(account, cached?.regions ?? partitionRegions);
    }
  }

  #withHeld(account: string, regions: readonly string[]): readonly string[] {
    const held = this.#heldRegions.get(account);
    if (!held) return regions;
    return [...new Set([...regions, ...held])].sort();
  }

  /** A held region whose EKS listing succeeded with no cluster (nor unreadable record) has nothing left to keep. */
  #releaseHeld(account: string, region: string, result: SourceResult): void {
    const held = this.#heldRegions.get(account);
    if (!held?.has(region) || !result.ok || result.notAListing === true || result.clusters.length > 0 || result.malformed.length > 0) return;
    held.delete(region);
    if (held.size === 0) this.#heldRegions.delete(account);
  }

  #accountApiClient(): AccountApi {
    if (!this.#accountApi) {
      if (this.#options.makeAccountClient) {
        this.#accountApi = this.#options.makeAccountClient(perCallCredentials);
      } else {
        const client = leanSdkClient(
          new AccountClient({
            region: 'us-east-1',
            credentials: perCallCredentials,
            sha256: NodeSha256,
            maxAttempts: Number(this.#options.env['AWS_MAX_ATTEMPTS']) || 8,
            retryMode: this.#options.env['AWS_RETRY_MODE'] ?? 'adaptive',
            requestHandler: awsRequestHandler(this.#options.requestTimeoutMs, this.#dispatcher()),
          }),
        );
        this.#options.onClient?.(client);
        this.#accountApi = client;
      }
    }
    return this.#accountApi;
  }

  #organizationsClient(): OrganizationsApi {
    if (!this.#organizations) {
      const credentials = this.#options.baseCredentials();
      if (this.#options.makeOrganizationsClient) {
        this.#organizations = this.#options.makeOrganizationsClient(credentials);
      } else {
        const timeout = this.#options.organizationsTimeoutMs ?? this.#options.requestTimeoutMs ?? 20_000;
        const client = refuseDuplicateKeys(new OrganizationsClient({
          // Organizations is a global service answered in us-east-1 (the partition's endpoint resolver maps it).
          region: 'us-east-1',
          credentials,
          sha256: NodeSha256,
          maxAttempts: Number(this.#options.env['AWS_MAX_ATTEMPTS']) || 8,
          retryMode: this.#options.env['AWS_RETRY_MODE'] ?? 'adaptive',
          // Without throwOnRequestTimeout the handler only warns and a hung call never ends.
          requestHandler: {connectionTimeout: 5_000, requestTimeout: timeout, throwOnRequestTimeout: true},
        }));
        this.#options.onClient?.(client);
        this.#organizations = client;
      }
    }
    return this.#organizations;
  }

  /** The region's shared client, seen through one account's identity and its per-account call cap. */
  #accountClient(region: string, account: string, provider: AwsCredentialProvider): EksApi {
    const shared = this.#regionClient(region);
    const queue = this.#accountQueue(account);
    return {
      send: ((command: unknown, options?: unknown) =>
        queue.add(() => callIdentity.run(provider, () => (shared.send as (c: unknown, o?: unknown) => Promise<unknown>)(command, options)))) as EksApi['send'],
    };
  }

  #regionClient(region: string): EksApi {
    let client = this.#eksClients.get(region);
    if (!client) {
      if (this.#options.makeEksClient) {
        client = this.#options.makeEksClient(region, perCallCredentials);
      } else {
        const eks = leanSdkClient(
          new EKSClient({
            region,
            credentials: perCallCredentials,
            sha256: NodeSha256,
            maxAttempts: Number(this.#options.env['AWS_MAX_ATTEMPTS']) || 8,
            retryMode: this.#options.env['AWS_RETRY_MODE'] ?? 'adaptive',
            requestHandler: awsRequestHandler(this.#options.requestTimeoutMs, this.#dispatcher()),
          }),
        );
        this.#options.onClient?.(eks);
        // One ListClusters per (account, region) each cycle, a DescribeCluster per cluster to describe: the short path (lean-read.ts).
        client = leanReads(eks, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand, {after: ListClustersCommand})]);
      }
      this.#eksClients.set(region, client);
    }
    return client;
  }

  /** What an (account, region) source remembers across cycles (made now if new), or none when incremental discovery is off. */
  #memoryOf(planned: SourceRef): SourceMemory | undefined {
    const refreshMs = this.#options.refreshMs ?? 0;
    if (refreshMs <= 0 || (this.#options.makeEksClient && !this.#options.makeTaggingClient)) return undefined;
    let kept = this.#tagMemory.get(planned.id);
    if (!kept) {
      kept = new SourceMemory(flatString(planned.id), planned.account);
      this.#tagMemory.set(kept.id, kept);
    }
    return kept;
  }

  /** Incremental discovery of one (account, region) source for one cycle. */
  #tagReader(source: SourceRef, provider: AwsCredentialProvider, kept: SourceMemory): TagReader {
    const refreshMs = this.#options.refreshMs ?? 0;
    const shared = this.#regionTaggingClient(source.region);
    const queue = this.#accountQueue(source.account);
    const onTagFallback = this.#options.onTagFallback;
    return new TagReader(
      {
        // The account's identity and its per-account cap, like its EKS calls.
        client: {
          send: ((command: unknown, options?: unknown) =>
            queue.add(() => callIdentity.run(provider, () => (shared.send as (c: unknown, o?: unknown) => Promise<unknown>)(command, options)))) as TaggingApi['send'],
        },
        clock: this.#options.clock ?? systemClock,
        refreshMs,
        ...(this.#options.settleMs === undefined ? {} : {settleMs: this.#options.settleMs}),
        ...(this.#options.tagReadTimeoutMs === undefined ? {} : {timeoutMs: this.#options.tagReadTimeoutMs}),
        ...(onTagFallback ? {onFallback: (fallback: TagReadFallback) => onTagFallback(source, fallback)} : {}),
      },
      kept,
    );
  }

  #regionTaggingClient(region: string): TaggingApi {
    let client = this.#taggingClients.get(region);
    if (!client) {
      if (this.#options.makeTaggingClient) {
        client = this.#options.makeTaggingClient(region, perCallCredentials);
      } else {
        const tagging = leanSdkClient(
          new ResourceGroupsTaggingAPIClient({
            region,
            credentials: perCallCredentials,
            sha256: NodeSha256,
            // A failed tag read only costs describes: retry little, fall back soon.
            maxAttempts: 3,
            requestHandler: awsRequestHandler(this.#options.requestTimeoutMs, this.#dispatcher()),
          }),
        );
        this.#options.onClient?.(tagging);
        // One GetResources per (account, region) each steady cycle: the short path (lean-read.ts).
        client = leanReads(tagging, [getResourcesOperation(GetResourcesCommand)]);
      }
      this.#taggingClients.set(region, client);
    }
    return client;
  }

  /**
   * Drops queues, region lists and descriptions of accounts that no matcher's last good walk has,
   * except those some matcher's last walk missed once: their entries are kept, and when they come back the regions
   * they hold must still be listed (a first answer taken alone could drop a region with clusters).
   */
  #forgetAccountsNotWalked(): void {
    const kept = (account: string): boolean => {
      if (this.#walkGrace.walked(account)) return true;
      for (const missed of this.#missedOnce.values()) if (missed.has(account)) return true;
      return false;
    };
    for (const account of this.#accountQueues.keys()) if (!kept(account)) this.#accountQueues.delete(account);
    for (const account of this.#enabledRegions.keys()) if (!kept(account)) this.#enabledRegions.delete(account);
    for (const account of this.#heldRegions.keys()) if (!kept(account)) this.#heldRegions.delete(account);
    for (const [id, {account}] of this.#tagMemory) if (!kept(account)) this.#tagMemory.delete(id);
  }

  #dispatcher(): AwsDispatcher {
    // Deadlines run while a socket connects and while a call is on its socket: calls queued for a socket have none.
    const answerTimeoutMs = this.#options.requestTimeoutMs ?? 20_000;
    this.#sharedDispatcher ??= new AwsDispatcher({connectTimeoutMs: Math.min(DEFAULT_CONNECT_TIMEOUT_MS, answerTimeoutMs), answerTimeoutMs, connections: SHARED_CLIENT_SOCKETS});
    return this.#sharedDispatcher;
  }

  #accountQueue(account: string): Slots {
    let queue = this.#accountQueues.get(account);
    if (!queue) {
      queue = new Slots(this.#options.perAccountConcurrency ?? 10);
      this.#accountQueues.set(account, queue);
    }
    return queue;
  }
}

/** Regions of the registered EKS entries, per account (small: a set of region names per account, no entry copies). */
function regionsByAccount(entries: readonly KubeServer[]): Map<string, Set<string>> {
  const byAccount = new Map<string, Set<string>>();
  for (const entry of entries) {
    const labels = entry.spec.cluster.metadata.labels;
    const account = labels[LABEL.accountId];
    const region = labels[LABEL.region];
    if (labels[LABEL.cloud] !== 'AWS' || labels[LABEL.discoveryType] !== 'eks' || !account || !region) continue;
    let regions = byAccount.get(account);
    if (!regions) byAccount.set(account, (regions = new Set()));
    regions.add(region);
  }
  return byAccount;
}

/** What an early listing was built from: its source, role, external id and whether regions not enabled are skipped. */
function earlyKey(source: SourceRef, roleArn: string, externalId: string | undefined, wildcard: boolean): string {
  return `${source.id}|${roleArn}|${externalId ?? ''}|${wildcard ? '*' : ''}`;
}

/** The region whose STS endpoint the member roles are assumed through. */
function homeRegionOf(partition: AwsPartition, regions: readonly string[]): string {
  const fallback = partition === 'aws-cn' ? 'cn-north-1' : partition === 'aws-us-gov' ? 'us-gov-west-1' : 'us-east-1';
  return regions.includes(fallback) ? fallback : (regions[0] ?? fallback);
}

function suffix(matcherIndex: number): string {
  return matcherIndex > 0 ? `#${matcherIndex}` : '';
}

/** A failed organization walk: covers every region and account of the matcher. */
export function organizationSource(matcherIndex: number, organizationId: string): SourceRef {
  return {id: `eks:*:${organizationId}${suffix(matcherIndex)}`, cloud: 'AWS', type: 'eks', region: '*', account: '', matcherIndex};
}

/** One member account as a whole (its role could not be assumed): covers every region of it. */
export function accountSource(matcherIndex: number, account: string): SourceRef {
  return {id: `eks:*:${account}${suffix(matcherIndex)}`, cloud: 'AWS', type: 'eks', region: '*', account, matcherIndex};
}

/** One (account, region) of an organization matcher; the id reads like any EKS source. */
export function regionSource(matcherIndex: number, region: string, account: string): SourceRef {
  return {id: `eks:${region}:${account}${suffix(matcherIndex)}`, cloud: 'AWS', type: 'eks', region, account, matcherIndex};
}

/** A source's tag memory with the source's id (one string for every cycle) and account. */
class SourceMemory extends TagMemory {
  readonly id: string;
  readonly account: string;

  constructor(id: string, account: string) {
    super();
    this.id = id;
    this.account = account;
  }
}
