/**
 * `DiscoveryConfig` custom resources: matchers added at runtime. The leader lists them in its
 * namespace (again on every watch event and every resync), validates each with the config
 * parser (the messages `config check` prints, located by key path under `spec`), reports the
 * verdict in `status.conditions`, and applies the valid ones of its discovery group without a
 * restart. An invalid edit keeps the last valid spec (stale beats partial: a typo must not
 * deregister clusters). A deleted one (finalizer) is dropped from the matchers and, after a
 * cycle without it has completed, released: that cycle deregisters the clusters only it found.
 */
import {stringify} from 'yaml';
import type {Clock} from '../core/clock.ts';
import {pageTokenKey} from '../core/page-token.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import {ConfigError, parseConfig} from '../config/load.ts';
import type {Config} from '../config/schema.ts';
import type {Logger} from '../observability/logger.ts';
import type {KubeClient, KubeWatchHandle} from '../registry/kube-client.ts';
import {KubeApiError} from '../registry/kube-client.ts';
import type {DiscoveryConfigSource} from './config-source.ts';

/** Finalizer that holds a deleted DiscoveryConfig until its clusters are deregistered. */
export const DISCOVERY_CONFIG_FINALIZER = 'kube-discovery.io/deregister';
const SPEC_KEYS = new Set(['discovery_group', 'aws', 'azure']);
/** Pages one DiscoveryConfig list may take: a namespace holds a handful of them. */
const MAX_DC_PAGES = 1_000;

/** The verdict on one DiscoveryConfig spec. */
export type DiscoveryConfigVerdict =
  | {readonly valid: true; readonly discovery: Config['discovery_service']}
  | {readonly valid: false; readonly message: string};

/** Validates a spec with the config file's schema; problems are named by their path under `spec`. */
export function validateDiscoveryConfig(name: string, spec: unknown): DiscoveryConfigVerdict {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return {valid: false, message: 'spec: expected a map with discovery_group, aws and azure, found nothing'};
  const unknown = Object.keys(spec).filter((k) => !SPEC_KEYS.has(k));
  if (unknown.length > 0) return {valid: false, message: unknown.map((k) => `spec.${k}: expected one of discovery_group, aws, azure, found an unknown key`).join('; ')};
  const text = stringify({version: 'v1', discovery_service: spec});
  try {
    return {valid: true, discovery: parseConfig(text, name).discovery_service};
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // Line and column would point into our own rendering of the spec: the key path locates it.
    return {valid: false, message: err.problems.map((p) => `${p.path.replace(/^discovery_service/, 'spec')}: ${p.message}`).join('; ')};
  }
}

/** Merges the matchers of valid DiscoveryConfigs of the group into the base config, in name order. */
export function mergeDiscoveryConfigs(base: Config, configs: ReadonlyArray<Config['discovery_service']>): Config {
  const ds = base.discovery_service;
  return {
    ...base,
    discovery_service: {
      ...ds,
      aws: [...ds.aws, ...configs.flatMap((c) => c.aws)],
      azure: [...ds.azure, ...configs.flatMap((c) => c.azure)],
    },
  };
}

/** Options of the controller. */
export interface DiscoveryConfigControllerOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly base: Config;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Rebuilds discovery with these matchers. */
  readonly apply: (config: Config) => void;
  /** Runs a cycle now and resolves with its report. */
  readonly runCycle: () => Promise<CycleReport>;
  /** Period of the full resync; default 30 s. */
  readonly resyncMs?: number;
  /** Told each list's outcome: a failing list fails this source of the cycles instead of stopping them. */
  readonly source?: DiscoveryConfigSource;
}

interface DcObject {
  metadata: {name: string; uid?: string; resourceVersion: string; generation?: number; deletionTimestamp?: string; finalizers?: string[]};
  spec?: unknown;
  status?: {conditions?: Array<Record<string, unknown>>; appliedSpec?: unknown};
}

/** Runs while this replica leads; `stop` ends the watch and the resync. */
export class DiscoveryConfigController {
  readonly #o: DiscoveryConfigControllerOptions;
  readonly #lastValid = new Map<string, Config['discovery_service']>();
  #applied = '';
  #watch: KubeWatchHandle | undefined;
  #cancel: (() => void) | undefined;
  #stopped = false;
  #queue: Promise<void> = Promise.resolve();
  #pending = false;
  #running = false;

  constructor(options: DiscoveryConfigControllerOptions) {
    this.#o = options;
  }

  get #path(): string {
    return `/apis/kube-discovery.io/v1/namespaces/${encodeURIComponent(this.#o.namespace)}/discoveryconfigs`;
  }

  /**
   * The first reconcile: applies the valid DiscoveryConfigs before the first cycle runs, so that
   * cycle does not deregister their clusters. A 404 (the CRD is not installed) means there are
   * none. When the list fails (403: the Role lacks `list discoveryconfigs`; 5xx; malformed) the
   * cycles still start: with a `source` the failure is that source's, which covers every entry
   * until a list succeeds (the watch and the resync keep trying), so nothing is deleted meanwhile.
   * Without one it retries (backing off to 30 s) until a list succeeds. Rejects when `signal`
   * aborts or the controller is stopped first.
   */
  async prime(signal?: AbortSignal): Promise<void> {
    this.#o.source?.termStarted(this.#o.namespace);
    for (let attempt = 0; ; attempt++) {
      if (this.#stopped) throw new Error('DiscoveryConfig controller stopped before its first list');
      signal?.throwIfAborted();
      try {
        await this.#reconcile();
        return;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) {
          this.#o.source?.listed();
          this.#o.logger.info('no DiscoveryConfig resource type on the API server; running the config file matchers only');
          return;
        }
        if (this.#o.source) {
          this.#o.source.failed(err);
          this.#o.logger.warn({err}, 'could not list DiscoveryConfigs; cycles run with the config file matchers and delete nothing until a list succeeds');
          return;
        }
        const retryMs = Math.min(30_000, 1_000 * 2 ** Math.min(attempt, 5));
        this.#o.logger.warn({err, retry_in_ms: retryMs}, 'could not list DiscoveryConfigs before the first cycle; no cycle runs until they are known');
        await this.#o.clock.sleep(retryMs, signal);
      }
    }
  }

  /** Watches and resyncs (after the scheduler started: deletions wait for a cycle). */
  start(): void {
    this.#running = true;
    this.#openWatch();
    this.#scheduleResync();
    void this.reconcile();
  }

  stop(): void {
    this.#stopped = true;
    this.#cancel?.();
    this.#watch?.abort();
  }

  /** Queues one reconcile; bursts of events collapse into one. */
  reconcile(): Promise<void> {
    if (this.#pending) return this.#queue;
    this.#pending = true;
    this.#queue = this.#queue.then(async () => {
      this.#pending = false;
      if (this.#stopped) return;
      try {
        await this.#reconcile();
      } catch (err) {
        // Nothing is applied from a failed or malformed listing: the matchers stay as they were.
        this.#o.source?.failed(err);
        this.#o.logger.warn({err}, 'DiscoveryConfig reconcile failed; keeping the current matchers');
      }
    });
    return this.#queue;
  }

  #openWatch(): void {
    if (this.#stopped) return;
    void this.#o.client.watch(this.#path, {allowWatchBookmarks: 'true'}, (event) => {
      if (event.type !== 'BOOKMARK') void this.reconcile();
    }, () => {
      if (this.#stopped) return;
      this.#o.clock.setTimeout(() => this.#openWatch(), 1000);
    }).then((handle) => {
      if (this.#stopped) handle.abort();
      else this.#watch = handle;
    }, () => this.#o.clock.setTimeout(() => this.#openWatch(), 1000));
  }

  #scheduleResync(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.setTimeout(() => {
      void this.reconcile().finally(() => this.#scheduleResync());
    }, this.#o.resyncMs ?? 30_000);
  }

  async #reconcile(): Promise<void> {
    const items = await this.#listAll();
    const group = this.#o.base.discovery_service.discovery_group;
    const active: Array<[string, Config['discovery_service']]> = [];
    const deleting: DcObject[] = [];
    for (const raw of items as DcObject[]) {
      const name = raw.metadata.name;
      const specGroup = (raw.spec as {discovery_group?: unknown} | undefined)?.discovery_group;
      // Another deployment's group: not ours to judge or apply.
      if (typeof specGroup === 'string' && specGroup !== group && this.#lastValid.get(name) === undefined) continue;
      if (raw.metadata.deletionTimestamp !== undefined) {
        if (raw.metadata.finalizers?.includes(DISCOVERY_CONFIG_FINALIZER)) deleting.push(raw);
        continue;
      }
      const verdict = validateDiscoveryConfig(`DiscoveryConfig ${this.#o.namespace}/${name}`, raw.spec);
      if (verdict.valid && verdict.discovery.discovery_group !== group) continue;
      if (verdict.valid) this.#lastValid.set(name, verdict.discovery);
      else if (!this.#lastValid.has(name) && raw.status?.appliedSpec !== undefined) {
        // A leader that never saw the valid spec (take-over, restart) finds it where the last one recorded it.
        const recorded = validateDiscoveryConfig(`DiscoveryConfig ${this.#o.namespace}/${name} (status.appliedSpec)`, raw.status.appliedSpec);
        if (recorded.valid && recorded.discovery.discovery_group === group) this.#lastValid.set(name, recorded.discovery);
      }
      const kept = this.#lastValid.get(name);
      if (kept) active.push([name, kept]);
      await this.#report(raw, verdict.valid
        ? {status: 'True', reason: 'Applied', message: `${verdict.discovery.aws.length} aws and ${verdict.discovery.azure.length} azure matchers applied to discovery group ${group}`}
        : {status: 'False', reason: 'Invalid', message: kept ? `${verdict.message} (the last valid spec stays applied)` : verdict.message}, verdict.valid ? raw.spec : undefined);
      if (verdict.valid && !raw.metadata.finalizers?.includes(DISCOVERY_CONFIG_FINALIZER)) {
        await this.#patchFinalizers(raw, [...(raw.metadata.finalizers ?? []), DISCOVERY_CONFIG_FINALIZER]);
      }
    }
    for (const gone of deleting) this.#lastValid.delete(gone.metadata.name);
    active.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const merged = mergeDiscoveryConfigs(this.#o.base, active.map(([, d]) => d));
    const fingerprint = JSON.stringify([merged.discovery_service.aws, merged.discovery_service.azure]);
    // Known from here on: the cycle that applying triggers plans with it.
    this.#o.source?.listed();
    if (fingerprint !== this.#applied) {
      this.#applied = fingerprint;
      this.#o.apply(merged);
      this.#o.logger.info({discovery_configs: active.map(([n]) => n)}, 'applied DiscoveryConfig matchers');
      if (deleting.length === 0 && this.#running) void this.#o.runCycle().catch(() => undefined);
    }
    if (deleting.length > 0 && this.#running) {
      // A cycle without the deleted matchers deregisters what only they found; then let them go.
      await this.#o.runCycle();
      for (const obj of deleting) await this.#patchFinalizers(obj, (obj.metadata.finalizers ?? []).filter((f) => f !== DISCOVERY_CONFIG_FINALIZER));
      this.#o.logger.info({discovery_configs: deleting.map((o) => o.metadata.name)}, 'deleted DiscoveryConfigs released after their clusters were deregistered');
    }
  }

  /**
   * Every DiscoveryConfig of the namespace. A list answer with `metadata.continue` is one page of a
   * longer list (a proxy or API server paging it): read as the whole list, it would drop the matchers
   * of the DiscoveryConfigs on later pages and deregister what only they find. Pages are followed;
   * a token given twice, or a list past MAX_DC_PAGES, is malformed.
   */
  async #listAll(): Promise<unknown[]> {
    const items: unknown[] = [];
    const seen = new Set<string>();
    let cont: string | undefined;
    do {
      const list = await this.#o.client.request({method: 'GET', path: this.#path, list: true, ...(cont === undefined ? {} : {query: {continue: cont}})});
      const page = (list as {items?: unknown}).items;
      if (!Array.isArray(page)) throw new Error('malformed DiscoveryConfigList from the API server: expected items to be an array');
      for (const item of page as unknown[]) items.push(item);
      const next = (list as {metadata?: {continue?: unknown}}).metadata?.continue;
      if (next !== undefined && next !== null && typeof next !== 'string') throw new Error('malformed DiscoveryConfigList from the API server: metadata.continue is not a string');
      cont = typeof next === 'string' && next !== '' ? next : undefined;
      if (cont !== undefined) {
        const key = pageTokenKey(cont);
        if (seen.has(key)) throw new Error('malformed DiscoveryConfigList from the API server: a continue token it had already given');
        if (seen.size >= MAX_DC_PAGES) throw new Error(`malformed DiscoveryConfigList from the API server: more than ${MAX_DC_PAGES} pages`);
        seen.add(key);
      }
    } while (cont !== undefined);
    return items;
  }

  /** Writes the Ready condition and, for a valid spec, `status.appliedSpec` (what the next leader falls back to). */
  async #report(obj: DcObject, condition: {status: string; reason: string; message: string}, appliedSpec?: unknown): Promise<void> {
    const current = obj.status?.conditions?.find((c) => c['type'] === 'Ready');
    const generation = obj.metadata.generation ?? 0;
    const recorded = appliedSpec === undefined || JSON.stringify(obj.status?.appliedSpec) === JSON.stringify(appliedSpec);
    if (recorded && current?.['status'] === condition.status && current['message'] === condition.message && current['observedGeneration'] === generation) return;
    const changed = current?.['status'] !== condition.status;
    const ready = {
      type: 'Ready',
      ...condition,
      observedGeneration: generation,
      lastTransitionTime: changed || current?.['lastTransitionTime'] === undefined ? new Date(this.#o.clock.now()).toISOString().replace(/\.\d+Z$/, 'Z') : current['lastTransitionTime'],
    };
    try {
      await this.#o.client.request({
        method: 'PUT',
        path: `${this.#path}/${obj.metadata.name}/status`,
        body: {...obj, status: {...obj.status, ...(appliedSpec === undefined ? {} : {appliedSpec}), conditions: [...(obj.status?.conditions ?? []).filter((c) => c['type'] !== 'Ready'), ready]}},
      });
    } catch (err) {
      // A conflict means the object changed: its watch event brings another reconcile.
      if (!(err instanceof KubeApiError && (err.status === 409 || err.status === 404))) throw err;
    }
  }

  async #patchFinalizers(obj: DcObject, finalizers: string[]): Promise<void> {
    try {
      await this.#o.client.request({
        method: 'PATCH',
        path: `${this.#path}/${obj.metadata.name}`,
        contentType: 'application/merge-patch+json',
        body: {metadata: {resourceVersion: obj.metadata.resourceVersion, finalizers}},
      });
    } catch (err) {
      if (!(err instanceof KubeApiError && (err.status === 409 || err.status === 404))) throw err;
    }
  }
}
