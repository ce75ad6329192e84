/**
 * Lists the AKS clusters of one (matcher, subscription[, resource group]) source: the managed
 * clusters list to its last page, then per kept cluster the user kubeconfig
 * (`listClusterUserCredential`, format=exec) for the API server URL and CA.
 */
import type {ContainerServiceClient} from '@azure/arm-containerservice';
import type PQueue from 'p-queue';
import type {Clock} from '../../core/clock.ts';
import type {ClusterAccess, DiscoveredCluster, MalformedCluster, SourceRef, SourceResult} from '../../core/types.ts';
import {parseAksKubeconfig, type AksUserKubeconfig} from '../../credentials/aks-kubeconfig.ts';
import {accountOf, type AksClusterRef, type AksLocalAccount, type AksLocalAccounts} from '../../credentials/aks-local-accounts.ts';
import {AKS_SERVER_ID} from '../../credentials/aks-token.ts';
import {silentLogger, type Logger} from '../../observability/logger.ts';
import type {ClusterFetcher} from '../fetcher.ts';
import {azureErrorCode, azureErrorStatus, azureFailure} from './errors.ts';
import {errorMessage} from '../../core/errors.ts';
import {sameJson} from '../../../heartbeats/kube-server.ts';
import {parseClusterId, readAksRecord, reportedName, type AksRecord} from './aks-record.ts';
import type {MadePage, PageMemory} from './arm-list.ts';

export {parseClusterId} from './aks-record.ts';

/**
 * Provisioning states of a running cluster that discovery keeps. The state is that of the last
 * operation on the cluster, not of the cluster: an upgrade, a scale or a migration in flight, or
 * one cancelled or failed, leaves it existing and serving, and must not deregister it. Only
 * creating, deleting, starting and stopping clusters are not kept.
 */
export const AKS_KEPT_PROVISIONING_STATES: ReadonlySet<string> = new Set(['Succeeded', 'Updating', 'Upgrading', 'Scaling', 'Migrating', 'Canceling', 'Canceled', 'Failed']);

/** Provisioning states AKS documents; anything else is a malformed record. */
export const AKS_KNOWN_PROVISIONING_STATES: ReadonlySet<string> = new Set([
  'Succeeded', 'Failed', 'Canceled', 'Creating', 'Updating', 'Upgrading', 'Deleting', 'Starting', 'Stopping', 'Scaling', 'Migrating', 'Canceling',
]);

/** Power states AKS documents. */
export const AKS_KNOWN_POWER_STATES: ReadonlySet<string> = new Set(['Running', 'Stopped']);

/**
 * The client surface the fetcher needs: the managed clusters list as raw ARM JSON pages (read
 * through the SDK client's pipeline, parsed once: see arm-list.ts), and the SDK's own
 * `listClusterUserCredentials`.
 */
export interface AksApi {
  /**
   * Every page of the subscription's (or resource group's) managed clusters, as `memory.make`
   * made it (a page unchanged since the last good listing is not made again); throws on any
   * error or malformed page.
   */
  listPages<T>(resourceGroup: string | undefined, signal: AbortSignal, memory: PageMemory<T>): AsyncIterable<T>;
  readonly listClusterUserCredentials: ContainerServiceClient['managedClusters']['listClusterUserCredentials'];
}

/** The records of one managed clusters page, as read from it. */
export interface AksPage {
  readonly records: readonly AksRecord[];
  readonly malformed: readonly MalformedCluster[];
}

/**
 * What each source's last successful listing made of its clusters, by resource id: a cluster
 * that comes out the same again is handed on as the same object, so evaluate (which memoises by
 * object) and the comparisons of reconcile and the heartbeat find it unchanged at once. `pages`
 * are its pages' records by body digest (arm-list.ts): a page ARM answers byte for byte as last
 * time is not parsed again, and its unchanged records are not converted again.
 */
export type AksListingMemory = Map<string, {readonly clusters: ReadonlyMap<string, DiscoveredCluster>; readonly pages: ReadonlyMap<string, MadePage<AksPage>>}>;

/** Server and CA of a cluster, remembered across cycles while the cluster record does not change. */
export interface CachedUserCredential {
  /** eTag, fqdn and private fqdn of the record the kubeconfig was fetched for. */
  readonly version: string;
  readonly at: number;
  readonly kubeconfig: AksUserKubeconfig;
}

/** What one AKS source needs. */
export interface AksFetcherOptions {
  readonly source: SourceRef;
  readonly client: AksApi;
  /** Bounds listClusterUserCredential calls in flight for this subscription (shared by its sources). */
  readonly credentialQueue: PQueue;
  /** `["*"]` or location names; clusters elsewhere are not this source's business. */
  readonly regions: readonly string[];
  /** Tenant of the subscription, when the subscription list said. */
  readonly tenantId?: string;
  readonly clock: Clock;
  /** Where local-account tokens are kept for the probe (in memory only). */
  readonly localAccounts?: AksLocalAccounts;
  /** Kubeconfigs by cluster id, shared across cycles; omitted, every cycle asks ARM again. */
  readonly credentialCache?: Map<string, CachedUserCredential>;
  /** Longest a cached kubeconfig is reused even if the record did not change. Default 1 h. */
  readonly credentialMaxAgeMs?: number;
  /** Each source's clusters of its last successful listing; omitted, nothing is carried over. */
  readonly listings?: AksListingMemory;
  readonly logger?: Logger;
}

const AKS_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;
const LOCAL_ACCOUNTS_DISABLED = /disable local accounts|local accounts? (?:are|is) disabled/i;

/** Builds the fetcher of one AKS source. */
export function createAksFetcher(options: AksFetcherOptions): ClusterFetcher {
  const {source} = options;
  const logger = options.logger ?? silentLogger;
  const regions = options.regions.includes('*') ? undefined : new Set(options.regions.map(normalizeLocation));
  const operation = source.resourceGroup ? 'ManagedClusters.ListByResourceGroup' : 'ManagedClusters.List';
  return {
    source,
    async fetch(cycleSignal) {
      // A signal of this source's own: each queued task and request adds an abort listener, and
      // adding one to a signal costs O(listeners) — thousands on the cycle's signal made it quadratic.
      // A child controller rather than AbortSignal.any: its one listener on the cycle's signal is
      // removed when the source ends, so the cycle's signal holds at most one per running source.
      const child = new AbortController();
      const forward = (): void => child.abort(cycleSignal.reason);
      if (cycleSignal.aborted) forward();
      else cycleSignal.addEventListener('abort', forward, {once: true});
      try {
        return await fetchSource(child.signal);
      } finally {
        cycleSignal.removeEventListener('abort', forward);
      }
    },
  };

  async function fetchSource(signal: AbortSignal): Promise<SourceResult> {
    const records: AksRecord[] = [];
    const malformed: MalformedCluster[] = [];
    const last = options.listings?.get(source.id);
    const pages = new Map<string, MadePage<AksPage>>();
    const memory: PageMemory<AksPage> = {previous: last?.pages, next: pages, make: (items) => readPage(items, source)};
    let pagesRead = 0;
    try {
      for await (const page of options.client.listPages(source.resourceGroup, signal, memory)) {
        pagesRead++;
        records.push(...page.records);
        malformed.push(...page.malformed);
      }
    } catch (error) {
      // Only ARM's own "not found" (a 404) for the listing's first page says the group is gone: a later
      // page's, after the group was just listed, or the code under another status, contradicts itself.
      if (source.resourceGroup && pagesRead === 0 && azureErrorStatus(error) === 404 && azureErrorCode(error) === 'ResourceGroupNotFound') {
        // A deleted resource group holds no clusters; a succeeded, empty listing lets its entries go.
        return {source, ok: true, clusters: [], malformed: [], skippedReason: `resource group ${source.resourceGroup} not found`};
      }
      return {source, ok: false, clusters: [], malformed: [], error: azureFailure(error, operation)};
    }

    const previous = last?.clusters;
    const listed = new Map<string, DiscoveredCluster>();
    const clusters: DiscoveredCluster[] = [];
    // The same cluster as last time is handed on as last time's object (see AksListingMemory).
    const keep = (cluster: DiscoveredCluster): void => {
      const key = cluster.id ?? cluster.name;
      const before = previous?.get(key);
      let kept = cluster;
      if (before !== undefined && before !== cluster) {
        // Found equal once, the same object is not compared again: the conversion hands out its own
        // object every cycle while the listing keeps the first one, so without this every unchanged
        // cluster was compared field by field every cycle.
        if (equalTo.get(cluster) === before) kept = before;
        else if (sameJson(before, cluster)) {
          equalTo.set(cluster, before);
          kept = before;
        }
      }
      listed.set(key, kept);
      clusters.push(kept);
    };
    const pending: Promise<void>[] = [];
    for (const record of records) {
      const converted = convert(record, options);
      if ('reason' in converted) {
        malformed.push(converted);
        // A record whose name and id disagree (reported by the id's name) could be either cluster: keep the one it names too.
        if (typeof record.name === 'string' && isAksName(record.name) && record.name.toLowerCase() !== converted.name.toLowerCase()) malformed.push({...converted, name: record.name});
        continue;
      }
      if (regions && !regions.has(converted.region)) continue;
      if (!converted.statusOk) {
        logger.debug({source: source.id, cluster: converted.name, status: converted.status}, 'AKS cluster skipped by status');
        keep(converted);
        continue;
      }
      // Most clusters of a steady cycle have a fresh kubeconfig cached: no queue, no abort listener.
      const known = knownEndpoint(converted, record, options);
      if (known) {
        keep(known);
        continue;
      }
      pending.push(
        options.credentialQueue.add(async () => {
          const withCredential = await withEndpoint(converted, record, options, logger, signal);
          if ('reason' in withCredential) malformed.push(withCredential);
          else keep(withCredential);
        }, {signal}),
      );
    }
    try {
      await Promise.all(pending);
    } catch (error) {
      // Only an abort gets here (the cycle is stopping): a partial listing must not be published.
      return {source, ok: false, clusters: [], malformed: [], error: azureFailure(error, 'ManagedClusters.ListClusterUserCredentials')};
    }
    clusters.sort((a, b) => a.name.localeCompare(b.name) || (a.resourceGroup ?? '').localeCompare(b.resourceGroup ?? ''));
    options.listings?.set(source.id, {clusters: listed, pages});
    return {source, ok: true, clusters, malformed};
  }
}

// A cluster object → the equal object the listing kept instead (objects are not changed once made).
const equalTo = new WeakMap<DiscoveredCluster, DiscoveredCluster>();

/** The records of a page read for the first time (each item a JSON object: the page check made sure). */
function readPage(items: readonly Record<string, unknown>[], source: SourceRef): AksPage {
  const records: AksRecord[] = [];
  const malformed: MalformedCluster[] = [];
  for (const item of items) {
    // A record naming no cluster could be any of them: a malformed record keeps only its own entry, so this one fails the source.
    if (!isAksName(typeof item['name'] === 'string' ? item['name'] : '') && !parseClusterId(item['id'])) {
      throw Object.assign(new Error('managedClusters.list returned a record with neither a cluster name nor a managed cluster id'), {name: 'InvalidResponse', code: 'InvalidResponse'});
    }
    // A cluster of another subscription (or resource group) means the page is not the list asked for:
    // the clusters it lacks may all still exist, so the source fails rather than deregister them.
    const outside = outsideSource(parseClusterId(item['id']), source);
    if (outside !== undefined) throw Object.assign(new Error(`managedClusters.list of ${source.id} returned a cluster of ${outside}`), {name: 'InvalidResponse', code: 'InvalidResponse'});
    const record = readAksRecord(item, source.id, isAksName);
    if ('reason' in record) malformed.push(record);
    else records.push(record);
  }
  return {records, malformed};
}

/** The subscription or resource group a listed cluster's id names when it is not the source's, else undefined. */
function outsideSource(ref: AksClusterRef | undefined, source: SourceRef): string | undefined {
  if (ref === undefined) return undefined;
  if (source.account !== '' && ref.subscriptionId !== source.account.toLowerCase()) return `subscription ${ref.subscriptionId.slice(0, 60)}`;
  if (source.resourceGroup && ref.resourceGroup.toLowerCase() !== source.resourceGroup.toLowerCase()) return `resource group ${ref.resourceGroup.slice(0, 90)}`;
  return undefined;
}

// A record of an unchanged page is the same object as last cycle: what toDiscovered made of it is
// reused while the source's inputs (its id, subscription and tenant) are the same.
const conversions = new WeakMap<AksRecord, {readonly sourceId: string; readonly account: string; readonly tenantId: string | undefined; readonly result: DiscoveredCluster | MalformedCluster}>();

function convert(record: AksRecord, options: AksFetcherOptions): DiscoveredCluster | MalformedCluster {
  const memo = conversions.get(record);
  if (memo && memo.sourceId === options.source.id && memo.account === options.source.account && memo.tenantId === options.tenantId) return memo.result;
  const result = toDiscovered(record, options);
  conversions.set(record, {sourceId: options.source.id, account: options.source.account, tenantId: options.tenantId, result});
  return result;
}

/** Validates one listed record; a record discovery cannot use is reported, not thrown. */
function toDiscovered(record: AksRecord, options: AksFetcherOptions): DiscoveredCluster | MalformedCluster {
  const {source} = options;
  const listedName = typeof record.name === 'string' ? record.name : '';
  // Reconcile keeps the entry of a malformed record by its cloud name: when `name` is unusable, the id still says which cluster it is.
  const bad = (reason: string): MalformedCluster => ({name: reportedName(record.name, record.id, isAksName), sourceId: source.id, reason});
  if (!AKS_NAME.test(listedName)) return bad(`invalid cluster name ${JSON.stringify(listedName).slice(0, 80)}`);
  const ref = parseClusterId(record.id);
  if (!ref) return bad(`resource id ${JSON.stringify(record.id ?? null).slice(0, 200)} is not a managed cluster id`);
  if (ref.subscriptionId !== source.account && source.account !== '') {
    return bad(`resource id names subscription ${ref.subscriptionId}, the source lists ${source.account}`);
  }
  // A record naming one cluster with another's id cannot be trusted about either (Azure names are case-insensitive):
  // reported by the id's name here, and by its own name too where it is pushed (see `fetch`).
  if (ref.name.toLowerCase() !== listedName.toLowerCase()) {
    return {name: ref.name, sourceId: source.id, reason: `record named ${JSON.stringify(listedName)} has the resource id of cluster ${JSON.stringify(ref.name.slice(0, 80))}`};
  }
  if (typeof record.location !== 'string' || normalizeLocation(record.location) === '') return bad('location is missing');

  // A record without its states cannot be judged; treating it as "not kept" would deregister it.
  if (!record.provisioningState || !record.powerState) return bad('provisioning or power state is missing');
  const provisioning = record.provisioningState;
  const power = record.powerState;
  // Only a well-formed state AKS documents may remove a cluster; `succeeded`, `Running ` or an object is malformed.
  if (typeof provisioning !== 'string' || !AKS_KNOWN_PROVISIONING_STATES.has(provisioning)) {
    return bad(`provisioning state ${JSON.stringify(provisioning)?.slice(0, 60) ?? 'undefined'} is not an AKS provisioning state`);
  }
  if (typeof power !== 'string' || !AKS_KNOWN_POWER_STATES.has(power)) return bad(`power state ${JSON.stringify(power)?.slice(0, 60) ?? 'undefined'} is not an AKS power state`);
  const aad = record.aadProfile;
  const tenantId = aad?.tenantID ?? options.tenantId ?? record.identityTenantId;
  const kubernetesVersion = record.currentKubernetesVersion ?? record.kubernetesVersion;
  return {
    cloud: 'Azure',
    type: 'aks',
    name: listedName,
    region: normalizeLocation(record.location),
    account: ref.subscriptionId,
    resourceGroup: ref.resourceGroup,
    ...(tenantId ? {tenantId} : {}),
    id: record.id as string,
    tags: record.tags,
    status: `${provisioning}/${power}`,
    statusOk: AKS_KEPT_PROVISIONING_STATES.has(provisioning) && power === 'Running',
    ...(kubernetesVersion ? {kubernetesVersion} : {}),
    authMode: aad ? (aad.enableAzureRbac ? 'EntraID+AzureRBAC' : 'EntraID') : record.disableLocalAccounts ? 'None' : 'LocalAccounts',
    ...(record.oidcIssuerURL ? {oidcIssuer: record.oidcIssuerURL} : {}),
    access: accessOf(record, undefined),
    sourceId: source.id,
  };
}

/** Adds server and CA from the user kubeconfig. A failure costs this cluster its endpoint, never the source. */
async function withEndpoint(
  cluster: DiscoveredCluster,
  record: AksRecord,
  options: AksFetcherOptions,
  logger: Logger,
  signal: AbortSignal,
): Promise<DiscoveredCluster | MalformedCluster> {
  const ref = refOf(cluster);
  const fqdnEndpoint = (): {endpoint?: string} => fqdnEndpointOf(record);
  let kubeconfig: AksUserKubeconfig;
  try {
    kubeconfig = await userKubeconfig(cluster, record, ref, options, signal);
  } catch (error) {
    const failure = azureFailure(error, 'ManagedClusters.ListClusterUserCredentials');
    if (LOCAL_ACCOUNTS_DISABLED.test(failure.message) && !record.aadProfile) {
      options.localAccounts?.record(ref, {kind: 'disabled'});
      return {...cluster, ...fqdnEndpoint()};
    }
    if (signal.aborted) throw error;
    logger.warn(
      {source: options.source.id, cluster: cluster.name, resourceGroup: ref.resourceGroup, operation: failure.operation, code: failure.code, reason: failure.reason, requestId: failure.requestId, error: failure.message},
      'AKS user credential unavailable; using the last one seen, or keeping the registered entry as it is',
    );
    // Never publish the cluster without its endpoint because of a transient error: that would
    // rewrite the registered entry without it. Use the last credential seen, else report the
    // record as unusable this cycle, which keeps the existing entry (stale).
    const stale = options.credentialCache?.get(cluster.id ?? '');
    if (!stale && failure.reason === 'invalid_response') {
      // ARM answered, with a kubeconfig nobody can use: the cluster exists, so register it unhealthy with what ARM returned.
      const endpoint = fqdnEndpoint();
      return {
        ...cluster,
        ...endpoint,
        unreachable: {
          reason: endpoint.endpoint ? 'invalid_ca' : 'no_endpoint',
          message: `listClusterUserCredential returned a kubeconfig that cannot be used: ${failure.message}`,
        },
      };
    }
    if (!stale) return {name: cluster.name, sourceId: options.source.id, reason: `user credential unavailable: ${failure.code}`};
    options.localAccounts?.record(ref, accountOf(stale.kubeconfig));
    return {...cluster, endpoint: stale.kubeconfig.server, ...(stale.kubeconfig.caData ? {caData: stale.kubeconfig.caData} : {}), access: accessOf(record, stale.kubeconfig)};
  }
  return withKubeconfig(cluster, record, kubeconfig, ref, options);
}

/**
 * The cluster with its endpoint when no call is needed: local accounts disabled without Entra
 * ID (ARM refuses the credential), or a kubeconfig cached for this version of the record and
 * not due for a refresh. Undefined when listClusterUserCredential has to be asked.
 */
function knownEndpoint(cluster: DiscoveredCluster, record: AksRecord, options: AksFetcherOptions): DiscoveredCluster | undefined {
  if (!record.aadProfile && record.disableLocalAccounts) {
    // ARM refuses the user credential of such a cluster; the probe reports why nobody can sign in.
    options.localAccounts?.record(refOf(cluster), {kind: 'disabled'});
    return withEndpointOnce(cluster, LOCAL_ACCOUNTS_OFF, () => ({...cluster, ...fqdnEndpointOf(record)}));
  }
  const cached = freshKubeconfig(cluster.id ?? '', record, options);
  if (!cached) return undefined;
  const memo = endpoints.get(cluster);
  if (memo?.via === cached && memo.account !== undefined) {
    // Recorded again (the store forgets clusters no cycle saw), with the objects of the first time.
    options.localAccounts?.record(memo.ref, memo.account);
    return memo.result;
  }
  const ref = refOf(cluster);
  const account = accountOf(cached);
  options.localAccounts?.record(ref, account);
  const result = clusterWithKubeconfig(cluster, record, cached);
  endpoints.set(cluster, {via: cached, result, ref, account});
  return result;
}

const LOCAL_ACCOUNTS_OFF = {};
// The same converted cluster with the same cached kubeconfig comes out the same: made once, then
// handed on as that object (keep() then finds it identical to the last listing's at once).
const endpoints = new WeakMap<DiscoveredCluster, {readonly via: object; readonly result: DiscoveredCluster; readonly ref: AksClusterRef; readonly account?: AksLocalAccount}>();

function withEndpointOnce(cluster: DiscoveredCluster, via: object, make: () => DiscoveredCluster): DiscoveredCluster {
  const memo = endpoints.get(cluster);
  if (memo?.via === via) return memo.result;
  const result = make();
  endpoints.set(cluster, {via, result, ref: refOf(cluster)});
  return result;
}

function withKubeconfig(cluster: DiscoveredCluster, record: AksRecord, kubeconfig: AksUserKubeconfig, ref: AksClusterRef, options: AksFetcherOptions): DiscoveredCluster {
  const account = accountOf(kubeconfig);
  options.localAccounts?.record(ref, account);
  const result = clusterWithKubeconfig(cluster, record, kubeconfig);
  // The kubeconfig just cached: the next cycle's knownEndpoint hands on this very object (the
  // first steady cycle compared every cluster of the cold one field by field to find it equal).
  if (options.credentialCache?.get(cluster.id ?? '')?.kubeconfig === kubeconfig) endpoints.set(cluster, {via: kubeconfig, result, ref, account});
  return result;
}

function clusterWithKubeconfig(cluster: DiscoveredCluster, record: AksRecord, kubeconfig: AksUserKubeconfig): DiscoveredCluster {
  return {
    ...cluster,
    endpoint: kubeconfig.server,
    ...(kubeconfig.caData ? {caData: kubeconfig.caData} : {}),
    access: accessOf(record, kubeconfig),
  };
}

function refOf(cluster: DiscoveredCluster): AksClusterRef {
  return {subscriptionId: cluster.account, resourceGroup: cluster.resourceGroup ?? '', name: cluster.name};
}

function fqdnEndpointOf(record: AksRecord): {endpoint?: string} {
  const fqdn = record.fqdn ?? record.privateFqdn;
  return fqdn ? {endpoint: `https://${fqdn}:443`} : {};
}

/** What a cached kubeconfig was fetched for: the record's eTag and FQDNs (records are not changed once read). */
function versionOf(record: AksRecord): string {
  let version = versions.get(record);
  if (version === undefined) {
    version = `${record.eTag ?? ''}|${record.fqdn ?? ''}|${record.privateFqdn ?? ''}`;
    versions.set(record, version);
  }
  return version;
}

const versions = new WeakMap<AksRecord, string>();

function freshKubeconfig(id: string, record: AksRecord, options: AksFetcherOptions): AksUserKubeconfig | undefined {
  const cached = options.credentialCache?.get(id);
  if (cached && cached.version === versionOf(record) && options.clock.now() - cached.at < (options.credentialMaxAgeMs ?? 3_600_000)) return cached.kubeconfig;
  return undefined;
}

async function userKubeconfig(cluster: DiscoveredCluster, record: AksRecord, ref: AksClusterRef, options: AksFetcherOptions, signal: AbortSignal): Promise<AksUserKubeconfig> {
  const id = cluster.id ?? '';
  const version = versionOf(record);
  const now = options.clock.now();
  const cached = freshKubeconfig(id, record, options);
  if (cached) return cached;
  const result = await options.client.listClusterUserCredentials(ref.resourceGroup, ref.name, {format: 'exec', abortSignal: signal});
  const value = result.kubeconfigs?.find((k) => k.value !== undefined)?.value;
  if (!value) throw Object.assign(new Error('listClusterUserCredential returned no kubeconfig'), {code: 'InvalidResponse'});
  let kubeconfig: AksUserKubeconfig;
  try {
    kubeconfig = parseAksKubeconfig(value);
  } catch (error) {
    throw Object.assign(new Error(errorMessage(error)), {code: 'InvalidResponse'});
  }
  options.credentialCache?.set(id, {version, at: now, kubeconfig});
  return kubeconfig;
}

/** How the probe signs in: Entra ID for clusters integrated with it, else the local account. */
function accessOf(record: AksRecord, kubeconfig: AksUserKubeconfig | undefined): ClusterAccess {
  const aad = record.aadProfile;
  if (!aad && kubeconfig?.user.kind !== 'entra') return {kind: 'aks-local'};
  const fromKubeconfig = kubeconfig?.user.kind === 'entra' ? kubeconfig.user.serverId : undefined;
  // Legacy (non-managed) Entra ID integration has its own server application.
  const legacy = aad && aad.managed !== true ? aad.serverAppID : undefined;
  return {kind: 'aks-entra', serverId: fromKubeconfig ?? legacy ?? AKS_SERVER_ID};
}

/** `East US` → `eastus`: ARM's location names are the display names lower-cased without spaces. */
export function normalizeLocation(location: string): string {
  return location.toLowerCase().replace(/\s+/g, '');
}

function isAksName(name: string): boolean {
  return AKS_NAME.test(name);
}
