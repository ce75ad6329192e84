/** Lists the EKS clusters of one (matcher, region, account) source: ListClusters to the last page, DescribeCluster per name. */
import {DescribeClusterCommand, ListClustersCommand, type Cluster, type EKSClient} from '@aws-sdk/client-eks';
import type {ClusterFetcher} from '../fetcher.ts';
import type {DiscoveredCluster, MalformedCluster, SourceRef, SourceResult} from '../../core/types.ts';
import {awsErrorCode, awsFailure, classifyAwsError, invalidResponse, REGION_NOT_ENABLED_CODES} from './errors.ts';
import {OPT_IN_REGIONS, partitionOfArn, partitionOfRegion} from './regions.ts';
import {isBase64Pem, isHttpsUrl} from '../../core/validate.ts';
import {intern} from '../../core/intern.ts';
import {compareText} from '../../core/collate.ts';
import type {TagReader} from './tag-reader.ts';
import {pageTokenKey} from '../../core/page-token.ts';

/** EKS statuses whose clusters are kept; a cluster being created, deleted or failed has no API to announce. */
export const EKS_KEPT_STATUSES: ReadonlySet<string> = new Set(['ACTIVE', 'UPDATING']);

/**
 * Every status EKS documents. Only one of these that is not kept removes a cluster; anything
 * else (`active`, `ACTIVE `, an object) is a malformed answer and keeps the entry.
 */
export const EKS_KNOWN_STATUSES: ReadonlySet<string> = new Set(['CREATING', 'ACTIVE', 'DELETING', 'FAILED', 'UPDATING', 'PENDING']);

/** The narrow client surface the fetcher needs; a real EKSClient (or an aws-sdk-client-mock'ed one) satisfies it. */
export type EksApi = Pick<EKSClient, 'send'>;

/** Bounds a region's DescribeCluster calls in flight: `Slots` (the service's), or a p-queue. */
export interface DescribeQueue {
  add(task: () => Promise<void>): Promise<unknown>;
}

/** What one EKS source needs. */
export interface EksFetcherOptions {
  readonly source: SourceRef;
  readonly client: EksApi;
  /** Bounds DescribeCluster calls in flight for this region (shared by every source of the region). */
  readonly describeQueue: DescribeQueue;
  /** Role and external id the clusters are reached with (exec plugin arguments). */
  readonly roleArn?: string;
  readonly externalId?: string;
  /** Treat a "credentials not recognised" answer as a region the account has not enabled (regions: ["*"]). */
  readonly skipNotEnabledRegion?: boolean;
  readonly pageSize?: number;
  /** Incremental discovery: describe only new / changed / due clusters (tag-reader.ts); absent describes all. */
  readonly tagReader?: TagReader;
  /**
   * This source's ListClusters, already started (`listClusterNames`) by the planner while it was
   * still resolving the account: used by the fetcher's one fetch instead of listing again.
   */
  readonly listing?: Promise<string[]>;
}

const EKS_NAME = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;

/** Builds the fetcher of one EKS source. */
export function createEksFetcher(options: EksFetcherOptions): ClusterFetcher {
  const {source, listing, ...rest} = options;
  // The early listing answers one fetch: a fetcher asked again lists again.
  let early = listing;
  return {
    source,
    async fetch(cycleSignal) {
      const once = early;
      early = undefined;
      // The SDK adds two abort listeners per call to the signal it is given, and adding one scans
      // the signal's list: with hundreds of sources sharing the cycle's signal that grew to seconds
      // a cycle. One listener per source there; the calls listen on the source's own signal.
      const local = new AbortController();
      const onAbort = (): void => local.abort(cycleSignal.reason);
      if (cycleSignal.aborted) onAbort();
      else cycleSignal.addEventListener('abort', onAbort, {once: true});
      try {
        return await fetchSource(once ? {...rest, source, listing: once} : {...rest, source}, local.signal);
      } finally {
        cycleSignal.removeEventListener('abort', onAbort);
      }
    },
  };
}

async function fetchSource(options: EksFetcherOptions, signal: AbortSignal): Promise<SourceResult> {
  const {source, tagReader} = options;
  // With descriptions remembered (a steady cycle), the tag read goes out beside the listing: it
  // does not depend on it, and a source's two round trips overlap instead of following each other.
  // Only the listing decides what exists; the read is judged afterwards as before (tag-reader.ts).
  const ahead = tagReader?.readAhead(source.region, signal);
  let names: string[];
  try {
    names = await (options.listing ?? listClusterNames(options.client, signal, options.pageSize));
  } catch (error) {
    ahead?.abort(error);
    tagReader?.listingFailed();
    if (options.skipNotEnabledRegion && OPT_IN_REGIONS.has(source.region) && REGION_NOT_ENABLED_CODES.has(awsErrorCode(error))) {
      return {source, ok: true, clusters: [], malformed: [], skippedReason: 'region not enabled for this account', notAListing: true};
    }
    return {source, ok: false, clusters: [], malformed: [], error: awsFailure(error, 'ListClusters')};
  }
  const clusters: DiscoveredCluster[] = [];
  const malformed: MalformedCluster[] = [];
  let failure: SourceResult['error'];
  let toDescribe: readonly string[] = names;
  if (tagReader) {
    try {
      const plan = await tagReader.plan(source.region, names, signal, ahead);
      toDescribe = plan.describe;
      clusters.push(...plan.reuse);
    } catch (error) {
      return {source, ok: false, clusters: [], malformed: [], error: awsFailure(error, 'GetResources')};
    }
  }
  await Promise.all(
    toDescribe.map((name) =>
      // No per-task abort listener: thousands of them on one signal make every add/remove linear.
      options.describeQueue.add(async () => {
        if (failure || signal.aborted) return;
        try {
          const out = await options.client.send(new DescribeClusterCommand({name}), {abortSignal: signal});
          const converted = toDiscovered(out.cluster, name, options);
          if ('reason' in converted) malformed.push(converted);
          else clusters.push(converted);
          tagReader?.described(name, 'reason' in converted ? undefined : converted);
        } catch (error) {
          tagReader?.forget(name);
          // Listed, then not found: deleted in between, or an answer not to be trusted. Only a listing
          // may remove a cluster, so its entry is kept this cycle; the next ListClusters decides.
          if (awsErrorCode(error) === 'ResourceNotFoundException') {
            malformed.push({name, sourceId: source.id, reason: 'DescribeCluster: ResourceNotFoundException for a cluster ListClusters listed; kept until a listing lacks it'});
            return;
          }
          // One record the SDK could not read costs that cluster this cycle (entry kept), not the source.
          if (!signal.aborted && classifyAwsError(error) === 'invalid_response') {
            malformed.push({name, sourceId: source.id, reason: `DescribeCluster answer unreadable: ${awsFailure(error, 'DescribeCluster').message}`});
            return;
          }
          failure ??= awsFailure(error, 'DescribeCluster');
        }
      }),
    ),
  );
  if (signal.aborted) return {source, ok: false, clusters: [], malformed: [], error: awsFailure(signal.reason ?? new Error('aborted'), 'DescribeCluster')};
  if (failure) return {source, ok: false, clusters: [], malformed: [], error: failure};
  clusters.sort((a, b) => compareText(a.name, b.name));
  return {source, ok: true, clusters, malformed};
}

/**
 * Names one ListClusters listing may give (1,000 full pages), far above EKS's clusters-per-region
 * quota: a listing that goes on past it is no EKS answer, and following it to the cycle deadline
 * would keep every name it gave on the heap.
 */
export const MAX_LISTED_CLUSTERS = 100_000;
/** Pages one listing may take (nearly empty pages with fresh nextTokens, each token kept to spot a repeat). */
export const MAX_LIST_PAGES = 10_000;

/** Every cluster name ListClusters gives, to the last page; a malformed page throws (invalid_response). */
export async function listClusterNames(client: EksApi, signal: AbortSignal, pageSize = 100): Promise<string[]> {
  const names: string[] = [];
  // Long tokens are kept as digests: an endpoint's megabyte tokens must not pile up here.
  const seenTokens = new Set<string>();
  let nextToken: string | undefined;
  let pages = 0;
  do {
    if (++pages > MAX_LIST_PAGES) throw invalidResponse(`ListClusters gave more than ${MAX_LIST_PAGES} pages`);
    const page = await client.send(
      new ListClustersCommand({maxResults: pageSize, nextToken}),
      {abortSignal: signal},
    );
    // Malformed is not empty: a page without a list of names (`{}`, `[]`, an empty body, a 204,
    // `{"clusters":null}`) must fail the source, never read as "no clusters here".
    const listed: unknown = (page as {clusters?: unknown}).clusters;
    if (!Array.isArray(listed)) throw invalidResponse(`ListClusters answer has no clusters list (found ${describeValue(listed)})`);
    // A name EKS cannot give a cluster (bytes that were not UTF-8, a space, a path) means the page
    // is not what EKS sent: it must not be read as a listing that lacks the clusters it garbled.
    const wrong = listed.findIndex((n) => typeof n !== 'string' || !EKS_NAME.test(n));
    if (wrong >= 0) throw invalidResponse(`ListClusters answer lists ${describeValue(listed[wrong])}, which is not a cluster name`);
    // EKS gives at most maxResults names a page: a longer page is not an answer to this request.
    if (listed.length > pageSize) throw invalidResponse(`ListClusters answer lists ${listed.length} names, more than the ${pageSize} asked for`);
    if (names.length + listed.length > MAX_LISTED_CLUSTERS) throw invalidResponse(`ListClusters listed more than ${MAX_LISTED_CLUSTERS} clusters`);
    // A loop, not a spread: a long page would overflow the call stack as arguments.
    for (const name of listed as string[]) names.push(name);
    const token: unknown = (page as {nextToken?: unknown}).nextToken;
    if (token !== undefined && token !== null && typeof token !== 'string') throw invalidResponse(`ListClusters nextToken is ${describeValue(token)}`);
    nextToken = typeof token === 'string' && token !== '' ? token : undefined;
    // A service that hands back the same token forever must not loop us forever.
    if (nextToken !== undefined) {
      const seen = pageTokenKey(nextToken);
      if (seenTokens.has(seen)) throw invalidResponse('ListClusters returned a repeated nextToken');
      seenTokens.add(seen);
    }
  } while (nextToken);
  return [...new Set(names)];
}

/** Validates one DescribeCluster record; a record the service cannot use is reported, not thrown. */
function toDiscovered(cluster: Cluster | undefined, listedName: string, options: EksFetcherOptions): DiscoveredCluster | MalformedCluster {
  const {source} = options;
  const bad = (reason: string): MalformedCluster => ({name: listedName, sourceId: source.id, reason});
  if (!cluster || typeof cluster !== 'object') return bad('DescribeCluster returned no cluster');
  const name: unknown = cluster.name;
  if (typeof name !== 'string' || !EKS_NAME.test(name)) return bad(`invalid cluster name ${describeValue(name)}`);
  // An answer about another cluster must neither rename nor replace the one asked for.
  if (name !== listedName) return bad(`DescribeCluster for ${listedName} answered with cluster ${JSON.stringify(name)}`);
  // A status that is missing or not one EKS documents cannot be judged; treating it as "not kept" would deregister it.
  const status: unknown = cluster.status;
  if (status === undefined || status === null) return bad('status is missing');
  if (typeof status !== 'string' || !EKS_KNOWN_STATUSES.has(status)) return bad(`status ${describeValue(status)} is not an EKS cluster status`);
  const statusOk = EKS_KEPT_STATUSES.has(status);
  // The ARN EKS gives this very cluster (nearly every answer) passes both checks below: one
  // comparison instead of splitting the ARN three times per cluster.
  const ownArn = source.account !== '' && cluster.arn === `arn:${partitionOfRegion(source.region)}:eks:${source.region}:${source.account}:cluster/${listedName}`;
  // An ARN of another region, partition or cluster: the answer (status, tags) is that cluster's, not this one's.
  const otherArn = ownArn ? undefined : otherClusterArn(cluster.arn as unknown, listedName, source.region);
  if (otherArn !== undefined) return bad(`DescribeCluster for ${listedName} answered with ${otherArn}`);
  // ListClusters lists the caller's own account only: an ARN naming another must not move the cluster there (and deregister it here).
  const arnAccount = ownArn ? undefined : accountFromArn(cluster.arn);
  if (arnAccount !== undefined && source.account !== '' && arnAccount !== source.account) {
    return bad(`DescribeCluster for ${listedName} answered with an ARN of account ${arnAccount}; the source lists account ${source.account}`);
  }
  // EKS tags map to strings: another type is a malformed record, never a missing tag (dropping it
  // could un-match the cluster, or lose its name tag and rename it).
  const tags = readTags(cluster.tags as unknown);
  if (typeof tags === 'string') return bad(tags);
  // The source's own copy of the account id: one string per account, not per cluster.
  const account = source.account || (arnAccount ?? '');
  const base = {
    cloud: 'AWS' as const,
    type: 'eks' as const,
    name,
    region: source.region,
    account,
    tags,
    status: intern(status),
    statusOk,
    sourceId: source.id,
    ...(cluster.arn ? {id: cluster.arn} : {}),
    ...(cluster.version ? {kubernetesVersion: intern(cluster.version)} : {}),
    ...(cluster.accessConfig?.authenticationMode ? {authMode: intern(cluster.accessConfig.authenticationMode)} : {}),
    ...oidcIssuerOf(cluster),
    access: {
      kind: 'eks' as const,
      clusterName: name,
      region: source.region,
      ...(options.roleArn ? {roleArn: options.roleArn} : {}),
      ...(options.externalId ? {externalId: options.externalId} : {}),
    },
  };
  // Clusters that are not kept are reported as they are: their endpoint may not exist yet.
  if (!statusOk) return base;
  // The cluster exists even when reaching it is impossible: register it, unhealthy, with what the cloud said.
  const endpoint: unknown = cluster.endpoint;
  if (typeof endpoint !== 'string' || !isHttpsUrl(endpoint)) {
    return {...base, unreachable: {reason: 'no_endpoint', message: `EKS reported ${endpoint ? `endpoint ${describeValue(endpoint)}, which is not an https URL` : 'no API endpoint'} for this cluster`}};
  }
  const caData: unknown = cluster.certificateAuthority?.data;
  if (typeof caData !== 'string' || !isBase64Pem(caData)) {
    const found = caData ? `certificateAuthority.data that is not base64 PEM (${describeValue(caData)})` : 'no certificateAuthority.data';
    return {...base, endpoint, unreachable: {reason: 'invalid_ca', message: `EKS reported ${found}; the API server's certificate cannot be verified`}};
  }
  const {id, kubernetesVersion, authMode, oidcIssuer} = base as Partial<DiscoveredCluster>;
  // Every field at once, in the same order, when the cluster has them all (the usual case): added to
  // a copy of `base`, the last ones took a separate property array per cluster.
  if (id !== undefined && kubernetesVersion !== undefined && authMode !== undefined) {
    const {cloud, type, region, tags: ownTags, status: ownStatus, sourceId, access} = base;
    return oidcIssuer === undefined
      ? {cloud, type, name, region, account, tags: ownTags, status: ownStatus, statusOk, sourceId, id, kubernetesVersion, authMode, access, endpoint, caData}
      : {cloud, type, name, region, account, tags: ownTags, status: ownStatus, statusOk, sourceId, id, kubernetesVersion, authMode, oidcIssuer, access, endpoint, caData};
  }
  return {...base, endpoint, caData};
}

/** A short, printable account of an unexpected value (never more than 60 characters of it). */
function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Why an EKS cluster ARN names another cluster than `name` in `region`; undefined when it names this one or is absent. */
function otherClusterArn(arn: unknown, name: string, region: string): string | undefined {
  if (arn === undefined || arn === null || arn === '') return undefined;
  if (typeof arn !== 'string') return `an ARN that is ${describeValue(arn)}`;
  const parts = arn.split(':');
  if (parts.length !== 6 || parts[0] !== 'arn' || parts[2] !== 'eks') return `the ARN ${describeValue(arn)}, which is not an EKS cluster's`;
  // Partitions this service does not know (aws-iso …) are not judged: their regions are not told apart here.
  const partition = partitionOfArn(arn);
  if (partition !== undefined && partition !== partitionOfRegion(region)) return `an ARN of partition ${partition}; the source lists region ${region}`;
  if (parts[3] !== region) return `an ARN of region ${describeValue(parts[3])}; the source lists region ${region}`;
  if (parts[5] !== `cluster/${name}`) return `an ARN of ${describeValue(parts[5])}`;
  return undefined;
}

/** Account id from an EKS ARN (`arn:aws:eks:us-east-1:123456789012:cluster/x`). */
export function accountFromArn(arn: string | undefined): string | undefined {
  const account = arn?.split(':')[4];
  return account && /^\d{12}$/.test(account) ? account : undefined;
}

/** A record's tags, or what is wrong with them. */
function readTags(tags: unknown): Record<string, string> | string {
  const out: Record<string, string> = {};
  if (tags === undefined || tags === null) return out;
  if (typeof tags !== 'object' || Array.isArray(tags)) return `tags are ${describeValue(tags)}, not a map of strings`;
  for (const [k, v] of Object.entries(tags)) {
    if (typeof v !== 'string') return `tags.${k.slice(0, 60)} is ${describeValue(v)}, not a string`;
    // U+FFFD is what bytes that were not UTF-8 decode to: the tag is not the one EKS holds.
    if (k.includes('\uFFFD') || v.includes('\uFFFD')) return `tags.${k.slice(0, 60)} holds bytes that are not UTF-8`;
    // Values repeat across clusters (env, team): one shared copy each.
    out[k] = intern(v);
  }
  return out;
}

/**
 * The issuer of the cluster's service-account tokens, when EKS gave an https URL. Only the token
 * review reads it, to send a token to the cluster that issued it: anything else is left out, and
 * never makes the record malformed.
 */
function oidcIssuerOf(cluster: Cluster): {oidcIssuer?: string} {
  const issuer: unknown = cluster.identity?.oidc?.issuer;
  return typeof issuer === 'string' && isHttpsUrl(issuer) ? {oidcIssuer: issuer} : {};
}
