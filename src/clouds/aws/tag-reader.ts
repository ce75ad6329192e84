/**
 * Incremental EKS discovery: instead of one DescribeCluster per
 * cluster per cycle, read the tags of a whole region in pages of 100 with the Resource
 * Groups Tagging API and describe only the clusters that need it:
 *
 * - new (not described before by this source), or whose last description was unusable;
 * - whose tags changed, or that had tags and the tag read does not mention (eventual
 *   consistency, emulators without the API — described, never dropped; a cluster described
 *   with no tags is absent from the read by design and is reused);
 * - not kept last time (status changes do not show in tags: CREATING, PENDING ... are
 *   described every cycle until they settle, so a cluster that becomes ACTIVE is registered
 *   on the next cycle);
 * - UPDATING (kept: registered either way) and due for its own shorter refresh (`settleMs`),
 *   so the end of an update shows within minutes without describing every updating cluster
 *   every cycle;
 * - due for the periodic full refresh (`refreshMs`), spread across cycles by a per-cluster
 *   offset so no cycle describes everything at once.
 *
 * The tag read can only save calls, never decide membership: ListClusters stays the
 * authority on what exists. When it fails — denied, throttled, 5xx, malformed, hung — the
 * cycle describes every cluster, as without it.
 */
import {GetResourcesCommand, type ResourceGroupsTaggingAPIClient} from '@aws-sdk/client-resource-groups-tagging-api';
import type {Clock} from '../../core/clock.ts';
import type {DiscoveredCluster, FailureReason} from '../../core/types.ts';
import {awsFailure} from './errors.ts';
import {pageTokenKey} from '../../core/page-token.ts';

/** The narrow tagging client surface the reader needs. */
export type TaggingApi = Pick<ResourceGroupsTaggingAPIClient, 'send'>;

/** Why a cycle described every cluster instead of reading tags. */
export interface TagReadFallback {
  readonly reason: FailureReason;
  readonly code: string;
  readonly message: string;
  /** True the first time this source is denied: warn once, count always. */
  readonly firstDenial: boolean;
}

/** Options of one source's describe planner. */
export interface TagReaderOptions {
  readonly client: TaggingApi;
  readonly clock: Clock;
  /** Full refresh period of each cluster's description; 0 describes every cluster every cycle. */
  readonly refreshMs: number;
  /**
   * Refresh period of a kept cluster that is not ACTIVE (UPDATING); capped by `refreshMs`.
   * Default 10 minutes: an EKS update takes tens of minutes, and the registration does not
   * depend on which of the two kept statuses it has.
   */
  readonly settleMs?: number;
  /** Bound on the whole tag read of a cycle (all pages); past it the cycle describes everything. */
  readonly timeoutMs?: number;
  readonly onFallback?: (fallback: TagReadFallback) => void;
}

/** What a cycle should do with the listed names. */
export interface DescribePlan {
  /** Names to describe. */
  readonly describe: readonly string[];
  /** Clusters whose last description still holds. */
  readonly reuse: readonly DiscoveredCluster[];
}

/** A tag read started beside the listing (`TagReader.readAhead`). */
export interface TagReadAhead {
  /** The read's tags, or its error. */
  readonly result: Promise<Map<string, Record<string, string>>>;
  /** Stops the read (the listing failed: nothing will use it). */
  abort(reason: unknown): void;
}

/** One remembered description and when it is due for a refresh. */
export interface Remembered {
  readonly cluster: DiscoveredCluster;
  readonly refreshAt: number;
}

const PAGE_SIZE = 100;
/**
 * Pages one tag read may take (100,000 clusters, far above EKS's per-region quota): past it the
 * read is no answer, and what it gave would sit on the heap until the read's deadline.
 */
const MAX_TAG_PAGES = 1_000;

/** Default refresh period of UPDATING clusters (see `TagReaderOptions.settleMs`). */
export const DEFAULT_SETTLE_MS = 600_000;

/** Sources of up to this many clusters keep their descriptions in a list, larger ones in a map. */
const LIST_LIMIT = 16;

/**
 * A source's descriptions by cluster name. Most sources hold one or two clusters: a list of that
 * exact length, searched in order, instead of a map, whose smallest table was ~180 bytes a source
 * (3 MB of an organization's 16,677 sources). Past `LIST_LIMIT` clusters, a map.
 */
export class KnownClusters {
  /** Name, description, name, description ...: one array, no pair objects. */
  #list: readonly (string | Remembered)[] = [];
  #map: Map<string, Remembered> | undefined;

  get size(): number {
    return this.#map ? this.#map.size : this.#list.length / 2;
  }

  get(name: string): Remembered | undefined {
    if (this.#map) return this.#map.get(name);
    const at = this.#indexOf(name);
    return at < 0 ? undefined : (this.#list[at + 1] as Remembered);
  }

  set(name: string, remembered: Remembered): void {
    if (this.#map) {
      this.#map.set(name, remembered);
      return;
    }
    const at = this.#indexOf(name);
    // Copied at its exact length (`map`, `concat`, `slice`): a push or a spread leaves room for 16 more.
    if (at >= 0) this.#list = this.#list.map((value, i) => (i === at + 1 ? remembered : value));
    else if (this.#list.length < 2 * LIST_LIMIT) this.#list = this.#list.concat([name, remembered]);
    else {
      this.#map = new Map();
      for (let i = 0; i < this.#list.length; i += 2) this.#map.set(this.#list[i] as string, this.#list[i + 1] as Remembered);
      this.#map.set(name, remembered);
      this.#list = [];
    }
  }

  delete(name: string): void {
    if (this.#map) {
      this.#map.delete(name);
      return;
    }
    const at = this.#indexOf(name);
    if (at >= 0) this.#list = this.#list.slice(0, at).concat(this.#list.slice(at + 2));
  }

  /** The names, as a copy: a caller may delete while it goes through them. */
  names(): string[] {
    if (this.#map) return [...this.#map.keys()];
    const names: string[] = [];
    for (let i = 0; i < this.#list.length; i += 2) names.push(this.#list[i] as string);
    return names;
  }

  #indexOf(name: string): number {
    for (let i = 0; i < this.#list.length; i += 2) if (this.#list[i] === name) return i;
    return -1;
  }
}

/**
 * What one source remembers across cycles: its descriptions by cluster name (the memory is that
 * table itself, not an object holding one: one object less for each of thousands of sources) and
 * whether its tag read was denied. Kept apart from the reader so a planner of thousands of sources
 * can keep only this between cycles and build the reader (client, callbacks) for the cycle that uses it.
 */
export class TagMemory extends KnownClusters {
  /** The last tag read was denied (warn once per denial, not every cycle). */
  denied = false;
  /** The source's last listing failed: its next tag read waits for a listing again (`readAhead`). */
  listingFailed = false;

  /** Descriptions by cluster name. */
  get known(): KnownClusters {
    return this;
  }

  /** Nothing remembered: dropping this memory loses nothing. */
  get empty(): boolean {
    return this.size === 0 && !this.denied;
  }
}

/** Decides which of one source's clusters to describe, from its memory and the region's tags. */
export class TagReader {
  readonly #options: TagReaderOptions;
  readonly #memory: TagMemory;
  readonly #known: KnownClusters;

  constructor(options: TagReaderOptions, memory: TagMemory = new TagMemory()) {
    this.#options = options;
    this.#memory = memory;
    this.#known = memory.known;
  }

  /**
   * Starts this cycle's tag read now, beside the source's listing, when the reader will read tags
   * at all (it remembers descriptions): the read does not depend on the listing, so the source's
   * two round trips overlap instead of following each other. `plan` then takes its answer; what
   * it answers is judged exactly as a read started by `plan` (a failure describes everything).
   */
  readAhead(region: string, signal: AbortSignal): TagReadAhead | undefined {
    // A source whose listing failed last time reads after its listing again: while the listing
    // keeps failing, a read beside it would be one thrown-away call a cycle against that account.
    if (this.#options.refreshMs <= 0 || this.#known.size === 0 || this.#memory.listingFailed) return undefined;
    const read = this.#startRead(region, signal);
    // Settled by `plan` (or dropped with the failed listing): never an unhandled rejection meanwhile.
    read.result.catch(() => undefined);
    return read;
  }

  /**
   * Splits the listed names into those to describe and those whose description is reused;
   * `ahead` is this source's tag read started beside the listing, else the read starts here.
   */
  async plan(region: string, names: readonly string[], signal: AbortSignal, ahead?: TagReadAhead): Promise<DescribePlan> {
    this.#memory.listingFailed = false;
    // Forget what the listing no longer has: a deleted cluster that comes back is new.
    const listed = new Set(names);
    for (const name of this.#known.names()) if (!listed.has(name)) this.#known.delete(name);
    if (this.#options.refreshMs <= 0 || this.#known.size === 0) {
      ahead?.abort(new Error('tag read not needed: nothing listed is remembered'));
      return {describe: names, reuse: []};
    }

    let tags: Map<string, Record<string, string>>;
    try {
      tags = await (ahead ? ahead.result : this.#startRead(region, signal).result);
      this.#memory.denied = false;
    } catch (error) {
      if (signal.aborted) throw error;
      const failure = awsFailure(error, 'GetResources');
      const firstDenial = failure.reason === 'access_denied' && !this.#memory.denied;
      if (failure.reason === 'access_denied') this.#memory.denied = true;
      this.#options.onFallback?.({reason: failure.reason, code: failure.code, message: failure.message, firstDenial});
      return {describe: names, reuse: []};
    }
    const now = this.#options.clock.now();
    const describe: string[] = [];
    const reuse: DiscoveredCluster[] = [];
    for (const name of names) {
      const known = this.#known.get(name);
      const current = tags.get(name);
      // A cluster described with no tags is consistently absent from the tag read (AWS returns only
      // tagged resources): reused. One with tags that the read does not mention is described.
      const unchanged = current ? sameTags(known?.cluster.tags ?? {}, current) : known !== undefined && Object.keys(known.cluster.tags).length === 0;
      if (known && known.refreshAt > now && unchanged) reuse.push(known.cluster);
      else describe.push(name);
    }
    return {describe, reuse};
  }

  /**
   * Records a description: usable kept ones are reused until their tags change or they are due
   * (ACTIVE: the full refresh period; UPDATING: the shorter settle period).
   */
  described(name: string, cluster: DiscoveredCluster | undefined): void {
    if (!cluster || !cluster.statusOk || this.#options.refreshMs <= 0) {
      this.#known.delete(name);
      return;
    }
    const now = this.#options.clock.now();
    const previous = this.#known.get(name);
    // A refresh that found nothing new keeps the object remembered before: the registered document
    // was built from it and shares its strings (CA, endpoint, tags), so they stay held once.
    if (previous && sameDescription(previous.cluster, cluster)) cluster = previous.cluster;
    if (cluster.status !== 'ACTIVE') {
      // Spread over the second half of the settle period so updates started together are not re-described together.
      const settleMs = Math.min(this.#options.settleMs ?? DEFAULT_SETTLE_MS, this.#options.refreshMs);
      this.#known.set(name, {cluster, refreshAt: now + Math.floor(settleMs * (0.5 + 0.5 * spread(name)))});
      return;
    }
    // The first refresh lands in the period's own slot of this name (never in its first 5 %, so the
    // cycles right after a first full describe stay cheap), later ones a period apart: refreshes stay spread.
    const refreshAt = previous ? now + this.#options.refreshMs : now + Math.floor(this.#options.refreshMs * (0.05 + 0.95 * spread(name)));
    this.#known.set(name, {cluster, refreshAt});
  }

  /** The source's listing failed: its next cycle reads tags only once a listing succeeds. */
  listingFailed(): void {
    this.#memory.listingFailed = true;
  }

  /** Forgets a cluster (its describe failed: describe it next cycle). */
  forget(name: string): void {
    this.#known.delete(name);
  }

  /** Starts reading every page of `eks:cluster` tags in the region; the result rejects on anything but a well-formed answer. */
  #startRead(region: string, signal: AbortSignal): TagReadAhead {
    // One controller and one timer, ended with the read: `AbortSignal.any` of the source's signal
    // and `AbortSignal.timeout` cost two signals, weak references and a timer left to GC per source.
    const bounded = new AbortController();
    const abortSignal = bounded.signal;
    const onAbort = (): void => bounded.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, {once: true});
    // The reason `AbortSignal.timeout` gives, so the failure reads (and is classified) the same.
    const timer = setTimeout(() => bounded.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), this.#options.timeoutMs ?? 30_000);
    const result = (async () => {
      try {
        return await this.#readPages(region, abortSignal);
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }
    })();
    return {result, abort: (reason) => bounded.abort(reason)};
  }

  /** The pages of one tag read, under the read's signal. */
  async #readPages(region: string, abortSignal: AbortSignal): Promise<Map<string, Record<string, string>>> {
    const out = new Map<string, Record<string, string>>();
    const seen = new Set<string>();
    let token: string | undefined;
    let pages = 0;
    do {
      if (++pages > MAX_TAG_PAGES) throw invalid(`GetResources gave more than ${MAX_TAG_PAGES} pages`);
      const page = await this.#options.client.send(
        new GetResourcesCommand({ResourceTypeFilters: ['eks:cluster'], ResourcesPerPage: PAGE_SIZE, ...(token ? {PaginationToken: token} : {})}),
        {abortSignal},
      );
      const list: unknown = page.ResourceTagMappingList;
      if (!Array.isArray(list)) throw invalid('GetResources returned no ResourceTagMappingList');
      // At most ResourcesPerPage mappings a page: a longer page is not an answer to this request.
      if (list.length > PAGE_SIZE) throw invalid(`GetResources returned ${list.length} mappings, more than the ${PAGE_SIZE} asked for`);
      for (const mapping of list as unknown[]) {
        const {arn, tags} = readMapping(mapping);
        const name = clusterNameOfArn(arn, region);
        if (name !== undefined) out.set(name, tags);
      }
      token = page.PaginationToken || undefined;
      if (token !== undefined) {
        // Long tokens are kept as digests: an endpoint's megabyte tokens must not pile up here.
        const key = pageTokenKey(token);
        if (seen.has(key)) throw invalid('GetResources returned a repeated PaginationToken');
        seen.add(key);
      }
    } while (token);
    return out;
  }
}

function invalid(message: string): Error {
  return Object.assign(new Error(message), {name: 'InvalidResponse', code: 'InvalidResponse'});
}

function readMapping(mapping: unknown): {arn: string; tags: Record<string, string>} {
  const m = mapping as {ResourceARN?: unknown; Tags?: unknown} | null;
  if (typeof m?.ResourceARN !== 'string') throw invalid('GetResources returned a mapping without ResourceARN');
  const tags: Record<string, string> = {};
  if (m.Tags !== undefined) {
    if (!Array.isArray(m.Tags)) throw invalid('GetResources returned Tags that are not a list');
    for (const tag of m.Tags as unknown[]) {
      const t = tag as {Key?: unknown; Value?: unknown} | null;
      if (typeof t?.Key !== 'string' || typeof t.Value !== 'string') throw invalid('GetResources returned a tag without Key or Value');
      tags[t.Key] = t.Value;
    }
  }
  return {arn: m.ResourceARN, tags};
}

/** `arn:aws:eks:<region>:<account>:cluster/<name>` → name (undefined for other regions or resources). */
function clusterNameOfArn(arn: string, region: string): string | undefined {
  // By the positions of its first five colons (no split: this runs for every tagged cluster of every source).
  const partition = arn.indexOf(':');
  const service = partition < 0 ? -1 : arn.indexOf(':', partition + 1);
  const regionAt = service < 0 ? -1 : arn.indexOf(':', service + 1);
  if (regionAt < 0 || regionAt - service - 1 !== 3 || !arn.startsWith('eks', service + 1)) return undefined;
  const account = arn.indexOf(':', regionAt + 1);
  if (account < 0 || account - regionAt - 1 !== region.length || !arn.startsWith(region, regionAt + 1)) return undefined;
  const resource = arn.indexOf(':', account + 1);
  return resource >= 0 && arn.startsWith('cluster/', resource + 1) ? arn.slice(resource + 1 + 'cluster/'.length) : undefined;
}

function sameDescription(a: DiscoveredCluster, b: DiscoveredCluster): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function sameTags(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => b[k] === a[k]);
}

/** A stable fraction in (0, 1] per name (FNV-1a), so each cluster's first refresh has its own slot. */
function spread(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return ((h >>> 0) % 10_000 + 1) / 10_000;
}
