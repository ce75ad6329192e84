/** Turns the `aws:` matchers of the config into one EKS fetcher per (matcher, region, account). */
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import {GetResourcesCommand, ResourceGroupsTaggingAPIClient} from '@aws-sdk/client-resource-groups-tagging-api';
import {GetCallerIdentityCommand, STSClient} from '@aws-sdk/client-sts';
import {Slots} from '../../core/slots.ts';
import type {ClusterFetcher, PlanContext, PlannedSources} from '../fetcher.ts';
import type {SourceRef, SourceResult} from '../../core/types.ts';
import {awsCredentialProvider, type AwsCredentialProvider} from '../../credentials/aws-credentials.ts';
import {CLIENT_SOCKETS, DEFAULT_CONNECT_TIMEOUT_MS} from './connect-deadline.ts';
import {AwsDispatcher, UndiciHttpHandler} from './undici-handler.ts';
import {createEksFetcher, listClusterNames, type EksApi} from './eks-fetcher.ts';
import {awsFailure} from './errors.ts';
import {OrganizationPlanner, type OrganizationPlannerOptions, type OrganizationSourceMatcher} from './org-sources.ts';
import {EarlyListings} from '../early-listings.ts';
import {TagReader, type TaggingApi, type TagReadFallback} from './tag-reader.ts';
import {shapeClient, type RateShaper, type ShapeableClient} from './rate-shaper.ts';
import {leanSdkClient} from './lean-sdk.ts';
import {describeClusterOperation, getResourcesOperation, leanReads, listClustersOperation} from './lean-read.ts';
import {NodeSha256} from './sha256.ts';
import {systemClock, type Clock} from '../../core/clock.ts';
import {expandRegions, partitionOfArn, partitionOfRegion, type AwsPartition} from './regions.ts';

/** The part of an `aws:` matcher that decides where to look. */
export interface AwsSourceMatcher {
  readonly types: readonly string[];
  readonly regions: readonly string[];
  readonly assume_role_arn?: string | undefined;
  readonly external_id?: string | undefined;
  /** Set for organization-wide matchers (with `assume_role_name`); planned by org-sources.ts. */
  readonly assume_role_name?: string | undefined;
  readonly organization?: OrganizationSourceMatcher['organization'] | undefined;
}

/** Options of the AWS side of discovery; everything has a production default. */
export interface AwsSourcesOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Bound on DescribeCluster calls in flight per region. */
  readonly perRegionConcurrency?: number;
  /** Builds an EKS client; tests and metrics wrap it. */
  readonly makeEksClient?: (region: string, credentials: AwsCredentialProvider) => EksApi;
  /** Resolves the account of the default credential chain; defaults to STS GetCallerIdentity. */
  readonly callerAccount?: (credentials: AwsCredentialProvider, region: string) => Promise<string>;
  readonly credentialProvider?: (role: {roleArn?: string; externalId?: string; region: string}) => AwsCredentialProvider;
  /** Deadline of one HTTP attempt (connect + answer); a peer that never answers fails as `timeout`. Default 20 s. */
  readonly requestTimeoutMs?: number;
  /** Called with every SDK client built, so observability can add its middleware once. */
  readonly onClient?: (client: EKSClient | STSClient | ResourceGroupsTaggingAPIClient | Parameters<NonNullable<OrganizationPlannerOptions['onClient']>>[0]) => void;
  /** Options of organization matchers (Organizations client, per-account caps); see org-sources.ts. */
  readonly organizations?: Partial<
    Pick<OrganizationPlannerOptions, 'makeOrganizationsClient' | 'makeEksClient' | 'makeAccountClient' | 'makeTaggingClient' | 'perAccountConcurrency' | 'assumeConcurrency' | 'organizationsTimeoutMs' | 'regionRefreshMs' | 'clock'>
  >;
  /**
   * Period of each cluster's full DescribeCluster refresh between tag reads (default 1 h);
   * 0 turns incremental discovery off (every cluster described every cycle).
   */
  readonly refreshMs?: number;
  /**
   * Client-side rate shaping of EKS and tagging calls per (account, region, operation); off
   * unless given (`discovery_service.aws_rate_limits`): with the default ceilings it made the
   * throttled full-describe bench cycle slower, not faster (README, "Rate shaping").
   */
  readonly rateShaper?: RateShaper;
  /** Refresh period of UPDATING clusters in incremental discovery (default 10 min, capped by `refreshMs`). */
  readonly settleMs?: number;
  readonly clock?: Clock;
  /** Builds a tagging client; without it, and with `makeEksClient` given, tag reads are off (tests of the EKS path alone). */
  readonly makeTaggingClient?: (region: string, credentials: AwsCredentialProvider) => TaggingApi;
  /** Bound on one source's tag read per cycle (default 30 s). */
  readonly tagReadTimeoutMs?: number;
  /** A cycle's tag read failed and the source described every cluster instead. */
  readonly onTagFallback?: (source: SourceRef, fallback: TagReadFallback) => void;
}

/** Default period of each cluster's full refresh in incremental discovery. */
export const DEFAULT_REFRESH_MS = 3_600_000;

/** Plans AWS sources; clients, credentials and queues are kept across cycles. */
export class AwsSources {
  readonly #options: AwsSourcesOptions;
  readonly #clients = new Map<string, EksApi>();
  readonly #credentials = new Map<string, AwsCredentialProvider>();
  readonly #queues = new Map<string, Slots>();
  /** The default credentials' account, with the access key it was looked up with and the region whose STS answered. */
  #defaultAccount: {readonly accessKeyId: string; readonly account: string; readonly region: string} | undefined;
  /** Accounts of default keys met while listing (see #signingProvider), by access key. */
  readonly #keyAccounts = new Map<string, Promise<string>>();
  #organizations: OrganizationPlanner | undefined;
  readonly #taggingClients = new Map<string, TaggingApi>();
  /** Per source id: what it described, kept across cycles. */
  readonly #tagReaders = new Map<string, TagReader>();

  constructor(options: AwsSourcesOptions = {}) {
    this.#options = options;
  }

  /**
   * Builds the fetchers for every (matcher, region); a matcher whose account cannot be resolved
   * fails its sources. `context` lets organization matchers read the registry (org-sources.ts).
   */
  async plan(matchers: readonly AwsSourceMatcher[], context?: PlanContext): Promise<PlannedSources> {
    const fetchers: ClusterFetcher[] = [];
    const failed: SourceResult[] = [];
    // Listings started while STS answers, within the cycle's bound on sources in flight.
    let earlyBudget = context?.signal ? (context.sourceConcurrency ?? 0) : 0;
    const organizations = new Map<number, OrganizationSourceMatcher>();
    for (const [matcherIndex, matcher] of matchers.entries()) {
      if (matcher.types.includes('eks') && matcher.organization) organizations.set(matcherIndex, {...matcher, organization: matcher.organization});
    }
    // While the organization walks run, the accounts of their last good plans are listed already (early-listings.ts).
    const planner = organizations.size > 0 ? this.#organizationPlanner() : undefined;
    const early =
      planner?.hasEarlyListings && context?.signal && context.sourceConcurrency
        ? new EarlyListings(context.sourceConcurrency, context.signal, (error) => awsFailure(error, 'ListClusters'), context.now)
        : undefined;
    // The walks go out first, the early listings one turn of the event loop later, as for Azure
    // (azure/sources.ts): started together, their requests were written ahead of the walk's first page.
    const startEarly = early && planner ? setImmediate(() => planner.startEarly(early, organizations)) : undefined;
    try {
      for (const [matcherIndex, matcher] of matchers.entries()) {
        if (!matcher.types.includes('eks')) continue;
        const organization = organizations.get(matcherIndex);
        if (organization && planner) {
          try {
            // The cycle's signal: a walk cut off by the cycle's deadline stops calling Organizations.
            const planned = await planner.plan(matcherIndex, organization, context?.signal, context, early);
            fetchers.push(...planned.fetchers);
            failed.push(...planned.failed);
          } finally {
            // Its plan takes no more listings (or failed): the rest of this matcher's stop now, not when
            // every matcher is planned, leaving the bound and the accounts' rate to the others.
            early?.dropRest(matcherIndex);
          }
          continue;
        }
        earlyBudget = await this.#planAccount(matcherIndex, matcher, context, earlyBudget, fetchers, failed);
      }
    } finally {
      clearImmediate(startEarly);
      // Listings of sources no plan took (an account the walk lacks, a failed walk, a changed role) are aborted, never used.
      early?.dropRest();
    }
    return {fetchers, failed};
  }

  /** Plans the sources of a single-account matcher; returns what is left of the budget of listings started early. */
  async #planAccount(matcherIndex: number, matcher: AwsSourceMatcher, context: PlanContext | undefined, budget: number, fetchers: ClusterFetcher[], failed: SourceResult[]): Promise<number> {
    let earlyBudget = budget;
    const partition = this.#partition(matcher);
    const regions = expandRegions(matcher.regions, partition);
    const wildcard = matcher.regions.includes('*');
    const homeRegion = regions[0] ?? 'us-east-1';
    const role = {
      ...(matcher.assume_role_arn ? {roleArn: matcher.assume_role_arn} : {}),
      ...(matcher.external_id ? {externalId: matcher.external_id} : {}),
    };
    let account: string;
    const listings = new Map<string, Promise<string[]>>();
    // Stops this matcher's early listings when the lookup fails: their sources fail anyway.
    const stopListings = new AbortController();
    try {
      const waiting = !this.#accountKnown(role);
      const lookup = this.#account(role, homeRegion);
      // Awaited below; this only keeps a client that fails to build from leaving it unhandled.
      lookup.catch(() => undefined);
      // The clients do not depend on the account: a first cycle builds them while STS answers.
      for (const region of regions) this.#client(region, role);
      // Nor does ListClusters: the first sources' listings start now instead of one round trip
      // later (a first cycle's only idle wait). Their fetchers take them; if STS fails, every
      // source of the matcher fails as before and what was listed is dropped.
      if (waiting && context?.signal) {
        for (const region of regions) {
          if (earlyBudget <= 0) break;
          earlyBudget--;
          listings.set(region, earlyListing(this.#client(region, role), context.signal, stopListings.signal));
        }
      }
      account = await lookup;
    } catch (error) {
      stopListings.abort(error);
      for (const region of regions) {
        const source = eksSource(matcherIndex, region, '');
        failed.push({source, ok: false, clusters: [], malformed: [], error: awsFailure(error, 'GetCallerIdentity')});
      }
      return earlyBudget;
    }
    for (const region of regions) {
      const source = eksSource(matcherIndex, region, account);
      const tagReader = this.#tagReader(source, role);
      fetchers.push(
        createEksFetcher({
          source,
          client: this.#client(region, role),
          describeQueue: this.#queue(region),
          skipNotEnabledRegion: wildcard,
          ...role,
          ...(tagReader ? {tagReader} : {}),
          ...(listings.has(region) ? {listing: listings.get(region) as Promise<string[]>} : {}),
        }),
      );
    }
    return earlyBudget;
  }

  #organizationPlanner(): OrganizationPlanner {
    this.#organizations ??= new OrganizationPlanner({
      ...(this.#options.requestTimeoutMs === undefined ? {} : {requestTimeoutMs: this.#options.requestTimeoutMs}),
      ...(this.#options.clock ? {clock: this.#options.clock} : {}),
      ...this.#options.organizations,
      env: this.#options.env ?? process.env,
      // The default chain is resolved in us-east-1; AssumeRole itself goes to each call's region.
      baseCredentials: () => this.#provider({}, 'us-east-1'),
      roleCredentials: (role) => this.#provider(role, role.region),
      // Incremental discovery per (account, region), with the same settings as single-account matchers.
      refreshMs: this.#options.refreshMs ?? DEFAULT_REFRESH_MS,
      ...(this.#options.settleMs === undefined ? {} : {settleMs: this.#options.settleMs}),
      ...(this.#options.tagReadTimeoutMs === undefined ? {} : {tagReadTimeoutMs: this.#options.tagReadTimeoutMs}),
      ...(this.#options.onTagFallback ? {onTagFallback: this.#options.onTagFallback} : {}),
      ...(this.#options.perRegionConcurrency ? {perRegionConcurrency: this.#options.perRegionConcurrency} : {}),
      ...(this.#options.onClient ? {onClient: this.#options.onClient} : {}),
    });
    return this.#organizations;
  }

  #partition(matcher: AwsSourceMatcher): AwsPartition {
    if (matcher.assume_role_arn) return partitionOfArn(matcher.assume_role_arn) ?? 'aws';
    const env = this.#options.env ?? process.env;
    const region = env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'];
    const explicit = matcher.regions.find((r) => r !== '*');
    return partitionOfRegion(explicit ?? region ?? 'us-east-1');
  }

  #provider(role: {roleArn?: string; externalId?: string}, region: string): AwsCredentialProvider {
    const key = `${role.roleArn ?? ''}|${role.externalId ?? ''}`;
    let provider = this.#credentials.get(key);
    if (!provider) {
      const make = this.#options.credentialProvider ?? ((r) => awsCredentialProvider({...r, ...(this.#options.env ? {env: this.#options.env} : {})}));
      provider = make({...role, region});
      this.#credentials.set(key, provider);
    }
    return provider;
  }

  /** Whether #account answers without calling STS (an ARN's account, or the caller's, already known). */
  #accountKnown(role: {roleArn?: string}): boolean {
    const fromArn = role.roleArn?.split(':')[4];
    return (fromArn !== undefined && /^\d{12}$/.test(fromArn)) || this.#defaultAccount !== undefined;
  }

  async #account(role: {roleArn?: string; externalId?: string}, region: string): Promise<string> {
    const fromArn = role.roleArn?.split(':')[4];
    if (fromArn && /^\d{12}$/.test(fromArn)) return fromArn;
    const credentials = this.#provider(role, region);
    // The default chain's keys can change while the process runs (a refreshed session of another
    // role): an account is looked up once per access key, so a listing signed with another account's
    // keys is never recorded as the first account's (which would deregister its clusters).
    const {accessKeyId} = await credentials();
    const cached = this.#defaultAccount;
    if (cached?.accessKeyId === accessKeyId) return cached.account;
    const lookup = this.#options.callerAccount ?? ((c, r) => this.#callerAccount(c, r));
    const account = await lookup(credentials, region);
    this.#defaultAccount = {accessKeyId, account, region};
    return account;
  }

  async #callerAccount(credentials: AwsCredentialProvider, region: string): Promise<string> {
    const sts = new STSClient({region, credentials, sha256: NodeSha256, requestHandler: awsRequestHandler(this.#options.requestTimeoutMs)});
    this.#options.onClient?.(sts);
    try {
      const out = await sts.send(new GetCallerIdentityCommand({}));
      // Every cluster of the matcher is registered under this account, and entries under any other
      // are no longer covered: an answer that is not STS's own (another 2xx, a garbled account, an
      // account its ARN does not name) must fail the plan, never move the clusters to another account.
      const status = out.$metadata.httpStatusCode;
      if (status !== undefined && status !== 200) throw Object.assign(new Error(`GetCallerIdentity answered with status ${status}, not the 200 STS answers with`), {name: 'InvalidResponse'});
      if (!out.Account) throw Object.assign(new Error('GetCallerIdentity returned no account'), {name: 'InvalidResponse'});
      if (!/^\d{12}$/.test(out.Account)) throw Object.assign(new Error(`GetCallerIdentity returned an account that is not a 12-digit AWS account id (${JSON.stringify(out.Account.slice(0, 20))})`), {name: 'InvalidResponse'});
      const arnAccount = out.Arn?.split(':')[4];
      if (arnAccount !== undefined && arnAccount !== out.Account) throw Object.assign(new Error(`GetCallerIdentity returned account ${out.Account} with an ARN of account ${arnAccount.slice(0, 20)}`), {name: 'InvalidResponse'});
      return out.Account;
    } finally {
      sts.destroy();
    }
  }

  #client(region: string, role: {roleArn?: string; externalId?: string}): EksApi {
    const key = `${region}|${role.roleArn ?? ''}|${role.externalId ?? ''}`;
    let client = this.#clients.get(key);
    if (!client) {
      const credentials = this.#signingProvider(role, region);
      const env = this.#options.env ?? process.env;
      if (this.#options.makeEksClient) {
        client = this.#options.makeEksClient(region, credentials);
      } else {
        const eks = leanSdkClient(
          new EKSClient({
            region,
            credentials,
            sha256: NodeSha256,
            // Throttling is retried with backoff by the SDK; AWS_MAX_ATTEMPTS / AWS_RETRY_MODE still win.
            // With rate shaping the shaper adapts the rate: the SDK's adaptive mode would add a second,
            // slower limiter on top of it.
            maxAttempts: Number(env['AWS_MAX_ATTEMPTS']) || 8,
            retryMode: env['AWS_RETRY_MODE'] ?? (this.#options.rateShaper ? 'standard' : 'adaptive'),
            requestHandler: awsRequestHandler(this.#options.requestTimeoutMs),
          }),
        );
        this.#shape(eks, region, role);
        this.#options.onClient?.(eks);
        // ListClusters and the DescribeCluster of every cluster a full cycle: the short path
        // (lean-read.ts), which keeps only absolute finalizeRequest middlewares, so not under a
        // rate shaper (anchored to the retry middleware).
        client = this.#options.rateShaper ? eks : leanReads(eks, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand, {after: ListClustersCommand})]);
      }
      this.#clients.set(key, client);
    }
    return client;
  }

  #tagReader(source: SourceRef, role: {roleArn?: string; externalId?: string}): TagReader | undefined {
    const refreshMs = this.#options.refreshMs ?? DEFAULT_REFRESH_MS;
    if (refreshMs <= 0 || (this.#options.makeEksClient && !this.#options.makeTaggingClient)) return undefined;
    let reader = this.#tagReaders.get(source.id);
    if (!reader) {
      const onTagFallback = this.#options.onTagFallback;
      // Built on the first tag read (a second cycle): a first cycle describes everything and reads no tags.
      const client: TaggingApi = {send: ((command: never, options: never) => this.#taggingClient(source.region, role).send(command, options)) as TaggingApi['send']};
      reader = new TagReader({
        client,
        clock: this.#options.clock ?? systemClock,
        refreshMs,
        ...(this.#options.settleMs === undefined ? {} : {settleMs: this.#options.settleMs}),
        ...(this.#options.tagReadTimeoutMs === undefined ? {} : {timeoutMs: this.#options.tagReadTimeoutMs}),
        ...(onTagFallback ? {onFallback: (fallback: TagReadFallback) => onTagFallback(source, fallback)} : {}),
      });
      this.#tagReaders.set(source.id, reader);
    }
    return reader;
  }

  #taggingClient(region: string, role: {roleArn?: string; externalId?: string}): TaggingApi {
    const key = `${region}|${role.roleArn ?? ''}|${role.externalId ?? ''}`;
    let client = this.#taggingClients.get(key);
    if (!client) {
      const credentials = this.#signingProvider(role, region);
      if (this.#options.makeTaggingClient) {
        client = this.#options.makeTaggingClient(region, credentials);
      } else {
        const tagging = leanSdkClient(
          new ResourceGroupsTaggingAPIClient({
            region,
            credentials,
            sha256: NodeSha256,
            // A failed tag read only costs describes: retry little, fall back soon.
            maxAttempts: 3,
            requestHandler: awsRequestHandler(this.#options.requestTimeoutMs),
          }),
        );
        this.#shape(tagging, region, role);
        this.#options.onClient?.(tagging);
        client = this.#options.rateShaper ? tagging : leanReads(tagging, [getResourcesOperation(GetResourcesCommand)]);
      }
      this.#taggingClients.set(key, client);
    }
    return client;
  }

  /**
   * The provider a listing client signs with. For the default chain (no role), keys other than
   * those its account was looked up with fail the call: the sources were planned under that
   * account, and a listing signed as another account (the chain refreshed to another account's
   * session mid-cycle) would be read as the planned account's listing without its clusters.
   * The next plan looks the account up again for the new keys.
   */
  #signingProvider(role: {roleArn?: string; externalId?: string}, region: string): AwsCredentialProvider {
    const provider = this.#provider(role, region);
    if (role.roleArn) return provider;
    return async () => {
      const credentials = await provider();
      const planned = this.#defaultAccount;
      if (planned === undefined || credentials.accessKeyId === planned.accessKeyId) return credentials;
      // A new key: a refreshed session of the same role (temporary keys change at every refresh),
      // or another account's. Its account is looked up once (the SDK asks again only at refresh).
      // In the region whose STS answered the plan's lookup, not this call's: every region's calls
      // share the one lookup, and an opt-in region the account has not enabled refuses the key there.
      const account = await this.#accountOfKey(credentials, planned.region);
      if (account !== planned.account) {
        throw Object.assign(new Error(`the default AWS credentials changed to another account's after account ${planned.account} was looked up; its sources fail this cycle and the next one looks the account up again`), {
          name: 'CredentialsChanged',
        });
      }
      if (this.#defaultAccount === planned) this.#defaultAccount = {accessKeyId: credentials.accessKeyId, account, region: planned.region};
      return credentials;
    };
  }

  /** The account of a new default key, one lookup per key however many calls ask at once (a few keys kept). */
  #accountOfKey(credentials: Awaited<ReturnType<AwsCredentialProvider>>, region: string): Promise<string> {
    let account = this.#keyAccounts.get(credentials.accessKeyId);
    if (account === undefined) {
      const lookup = this.#options.callerAccount ?? ((c, r) => this.#callerAccount(c, r));
      account = lookup(async () => credentials, region);
      if (this.#keyAccounts.size >= 16) this.#keyAccounts.clear();
      this.#keyAccounts.set(credentials.accessKeyId, account);
      // A failed lookup is not kept: the next call asks again.
      account.catch(() => this.#keyAccounts.delete(credentials.accessKeyId));
    }
    return account;
  }

  #shape(client: ShapeableClient, region: string, role: {roleArn?: string}): void {
    const shaper = this.#options.rateShaper;
    if (!shaper) return;
    // AWS throttles per account and region: a role's account from its ARN, the caller's own otherwise.
    shapeClient(client, shaper, role.roleArn?.split(':')[4] || 'caller', region);
  }

  #queue(region: string): Slots {
    let queue = this.#queues.get(region);
    if (!queue) {
      // A FIFO cap, not p-queue: a full cycle passes every DescribeCluster through it (p-queue's
      // events, promise and closures per task were ~2 % of W0's first cycle).
      queue = new Slots(this.#options.perRegionConcurrency ?? 10);
      this.#queues.set(region, queue);
    }
    return queue;
  }
}

/**
 * A source's ListClusters started before its fetcher exists, stopped by the cycle's signal or by
 * `stop` (the account lookup failed). Its calls listen on a signal of their own (the SDK adds
 * listeners per call; one listener per listing on each of those signals). Never
 * unhandled: the fetcher that takes it sees its failure; nobody does when STS failed.
 */
function earlyListing(client: EksApi, cycleSignal: AbortSignal, stop: AbortSignal): Promise<string[]> {
  const local = new AbortController();
  const signals = [cycleSignal, stop];
  const onAbort = (event: Event): void => local.abort((event.target as AbortSignal).reason);
  const aborted = signals.find((s) => s.aborted);
  if (aborted) local.abort(aborted.reason);
  else for (const s of signals) s.addEventListener('abort', onAbort, {once: true});
  const listing = listClusterNames(client, local.signal);
  const done = (): void => {
    for (const s of signals) s.removeEventListener('abort', onAbort);
  };
  listing.then(done, done);
  return listing;
}

/**
 * The request handler of the AWS discovery clients: undici (undici-handler.ts) with a connect
 * deadline that runs only while a socket connects and an answer deadline that runs only while
 * a call is on a connection, so a region's describe burst waits for sockets without either.
 * Clients given a `dispatcher` share its sockets (org-sources.ts); otherwise the handler has
 * its own, at most CLIENT_SOCKETS per endpoint.
 */
export function awsRequestHandler(requestTimeoutMs = 20_000, dispatcher?: AwsDispatcher, connectTimeoutMs = Math.min(DEFAULT_CONNECT_TIMEOUT_MS, requestTimeoutMs)): UndiciHttpHandler {
  if (dispatcher) return new UndiciHttpHandler(dispatcher);
  return new UndiciHttpHandler(new AwsDispatcher({connectTimeoutMs, answerTimeoutMs: requestTimeoutMs, connections: CLIENT_SOCKETS}), {owned: true});
}

/** The SourceRef of an EKS source; the id reads `eks:<region>:<account>` (account `unknown` when it could not be resolved). */
export function eksSource(matcherIndex: number, region: string, account: string): SourceRef {
  return {
    id: `eks:${region}:${account || 'unknown'}${matcherIndex > 0 ? `#${matcherIndex}` : ''}`,
    cloud: 'AWS',
    type: 'eks',
    region,
    account,
    matcherIndex,
  };
}
