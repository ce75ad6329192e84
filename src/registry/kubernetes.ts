/**
 * Registry backend on the Kubernetes API (`storage: {type: kubernetes, namespace}`): each entry is
 * a namespaced `KubeServer` custom resource, each registry lease a `coordination.k8s.io/v1` Lease.
 * A keepalive renews one Lease whatever the number of entries; an entry names its owner Lease and
 * readers treat it as expired once that Lease is gone or not renewed in time; the leader deletes
 * such entries. Writes carry resourceVersion preconditions. Every answer is checked before use:
 * a malformed list fails the read, it never reads as "no entries".
 */
import {randomUUID} from 'node:crypto';
import type {Clock} from '../core/clock.ts';
import type {KubernetesStorageConfig} from '../config/schema.ts';
import type {Lease, PutOptions, RegistryBackend, RegistryItem, WatchEvent, Watcher, WatchOptions, WriteOptions} from './backend.ts';
import {FencedError} from '../core/errors.ts';
import {LeaseNotFoundError} from './backend.ts';
import type {KubeClient} from './kube-client.ts';
import {KubeApiError} from './kube-client.ts';
import {objectNameForKey, objectNamesForKey, summarise} from './kube-names.ts';
import {checkInterval, checkTtl, compareKeys} from './local-common.ts';
import {WatchHub} from './watch-hub.ts';
import {pageTokenKey} from '../core/page-token.ts';

/** API group of the custom resources (CRDs in deploy/kubernetes/crds). */
export const KUBE_GROUP = 'kube-discovery.io';
/** Label naming an entry's owner Lease. */
export const LEASE_LABEL = 'kube-discovery.io/lease';
/** Label marking Leases that are registry leases (not election Leases). */
export const REGISTRY_LEASE_LABEL = 'kube-discovery.io/registry-lease';
/** Annotation with a Lease's exact TTL in ms (leaseDurationSeconds is whole seconds). */
export const TTL_ANNOTATION = 'kube-discovery.io/ttl-ms';
const GROUP_LABEL = 'kube-discovery.io/group';
const PAGE_SIZE = 500;
const KEEPALIVE_PRIORITY = 10;

/** Options of the backend. */
export interface KubernetesBackendOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly clock: Clock;
  /** Who renews the Leases this backend grants (holderIdentity); default a random id. */
  readonly identity?: string;
  /** How often watchers check their entries' Leases for expiry; default 1s. */
  readonly purgeIntervalMs?: number;
  /** Identity Secrets are named `<prefix>-identity-<replica>`; default `kube-discovery`. */
  readonly identitySecretPrefix?: string;
  /** Delete entries whose Lease expired (and the expired Leases) on each purge tick. The leader sets it. */
  readonly reap?: boolean;
  /** Background failures (Lease checks, watch events), for the service's registry health. */
  readonly onError?: (error: Error) => void;
}

/** An answer of the API server that is not what the protocol says: the read fails, nothing is dropped. */
export class MalformedAnswerError extends Error {
  override readonly name = 'MalformedAnswerError';
}

interface Entry {
  readonly name: string;
  readonly key: string;
  readonly value: string;
  readonly lease: string | undefined;
  readonly resourceVersion: string;
  /** Other controllers' finalizers: written back unchanged, or an update would drop them. */
  readonly finalizers: readonly string[] | undefined;
  /**
   * Deleted, and held by a finalizer (deletionTimestamp set): it goes once the finalizer is removed,
   * so a write onto it is no registration.
   */
  readonly terminating: boolean;
}

/** What a write needs to know of an object: whose key, which version, others' finalizers, whether it is going. */
type Known = Pick<Entry, 'key' | 'resourceVersion' | 'finalizers' | 'terminating'>;

/** The Known of an entry, without its document. */
function knownOf(entry: Entry): Known {
  return {key: entry.key, resourceVersion: entry.resourceVersion, finalizers: entry.finalizers, terminating: entry.terminating};
}

interface LeaseState {
  readonly name: string;
  readonly ttlMs: number;
  readonly renewMs: number;
  readonly resourceVersion: string;
}

interface LocalLease {
  ttlMs: number;
  renewMs: number;
  resourceVersion: string;
  revoked: boolean;
  /**
   * The clock's elapsed time when this replica last renewed it (unset for a Lease it only read):
   * its own Lease lapses on elapsed time, so a step of its wall clock neither hides nor reaps its entries.
   */
  keptAt?: number;
}

/** The Kubernetes-API registry backend. */
export class KubernetesBackend implements RegistryBackend {
  readonly name = 'kubernetes';
  readonly #client: KubeClient;
  readonly #ns: string;
  readonly #clock: Clock;
  readonly #identity: string;
  readonly #identityPrefix: string;
  readonly #purgeMs: number;
  readonly #onError: ((error: Error) => void) | undefined;
  readonly #leases = new Map<string, LocalLease>();
  /** Per object name, the entry as last read or written, without its document (held once, by the inventory). */
  readonly #rv = new Map<string, Known>();
  readonly #watchers = new Set<KubeWatch>();
  #reap: boolean;
  #purging = false;
  #purgeAgain = false;
  #closed = false;
  #cancelPurge: (() => void) | undefined;
  /** The API server did not answer (unreachable, 5xx, 429) the last time it was asked. */
  #unavailable = false;
  /** When it answered again after that (ms, on the clock); no Lease is judged expired before then + its duration. */
  #recoveredMs = Number.NEGATIVE_INFINITY;
  /** The same moment on the clock's elapsed time. */
  #recoveredElapsed = Number.NEGATIVE_INFINITY;
  /**
   * Per Lease of another holder: its renewal as last read, and when (the clock's elapsed time) this
   * replica first read that renewal. Pruned to the Leases of each full Lease list.
   */
  readonly #seen = new Map<string, {readonly renewMs: number; readonly at: number}>();

  constructor(options: KubernetesBackendOptions) {
    const client = options.client;
    // Every call notes whether the API server answered: Leases could not be renewed while it did not.
    this.#client = {
      server: client.server,
      namespace: client.namespace,
      watch: (...args) => client.watch(...args),
      request: async (req) => {
        try {
          const answer = await client.request(req);
          if (this.#unavailable) {
            this.#unavailable = false;
            this.#recoveredMs = this.#clock.now();
            this.#recoveredElapsed = this.#elapsed();
          }
          return answer;
        } catch (err) {
          // A write refused unsent by its fence says nothing about the API server.
          if (!(err instanceof FencedError) && (!(err instanceof KubeApiError) || err.status === 0 || err.status === 429 || err.status >= 500)) this.#unavailable = true;
          throw err;
        }
      },
    };
    this.#ns = options.namespace;
    this.#clock = options.clock;
    this.#identity = options.identity ?? `kube-discovery-${randomUUID().slice(0, 8)}`;
    this.#identityPrefix = options.identitySecretPrefix ?? 'kube-discovery';
    this.#purgeMs = checkInterval(options.purgeIntervalMs);
    this.#reap = options.reap ?? false;
    this.#onError = options.onError;
    this.#schedulePurge();
  }

  /** Turns the deletion of expired entries on (leader) or off (follower). */
  setReaper(enabled: boolean): void {
    this.#reap = enabled;
  }

  get #entriesPath(): string {
    return `/apis/${KUBE_GROUP}/v1/namespaces/${encodeURIComponent(this.#ns)}/kubeservers`;
  }

  get #leasesPath(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#ns)}/leases`;
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.#open();
    checkTtl(ttlMs);
    const now = this.#clock.now();
    const keptAt = this.#elapsed();
    const name = `kd-registry-${randomUUID().slice(0, 13)}`;
    const created = await this.#client.request({
      method: 'POST',
      path: this.#leasesPath,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {name, labels: {[REGISTRY_LEASE_LABEL]: 'true'}, annotations: {[TTL_ANNOTATION]: String(ttlMs)}},
        spec: {holderIdentity: this.#identity, leaseDurationSeconds: Math.max(1, Math.ceil(ttlMs / 1000)), acquireTime: microTime(now), renewTime: microTime(now), leaseTransitions: 0},
      },
      priority: KEEPALIVE_PRIORITY,
    });
    const state = parseLease(created);
    this.#leases.set(name, {ttlMs, renewMs: state.renewMs, resourceVersion: state.resourceVersion, revoked: false, keptAt});
    return {id: name, ttlMs};
  }

  async keepAlive(lease: Lease): Promise<void> {
    this.#open();
    const local = this.#leases.get(lease.id);
    if (local?.revoked) throw leaseGone(lease.id);
    let current = local;
    let state: LeaseState | undefined;
    if (!current || this.#ownLapsed(current, lease.ttlMs)) {
      state = await this.#readLease(lease.id, KEEPALIVE_PRIORITY);
      if (!state || this.#lapsed(state.renewMs, state.ttlMs)) throw leaseGone(lease.id);
      current = {ttlMs: state.ttlMs, renewMs: state.renewMs, resourceVersion: state.resourceVersion, revoked: false};
      this.#leases.set(lease.id, current);
    }
    const now = this.#clock.now();
    const keptAt = this.#elapsed();
    for (let attempt = 0; ; attempt++) {
      try {
        const updated = await this.#client.request({
          method: 'PATCH',
          path: `${this.#leasesPath}/${lease.id}`,
          contentType: 'application/merge-patch+json',
          body: {metadata: {resourceVersion: current.resourceVersion}, spec: {renewTime: microTime(now), holderIdentity: this.#identity}},
          priority: KEEPALIVE_PRIORITY,
        });
        const next = parseLease(updated);
        current.renewMs = next.renewMs;
        current.resourceVersion = next.resourceVersion;
        current.keptAt = keptAt;
        return;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) {
          current.revoked = true;
          throw leaseGone(lease.id);
        }
        if (!(err instanceof KubeApiError && err.status === 409) || attempt >= 2) throw err;
        // Someone else (a restarted replica adopting it) renewed it: re-read and renew on top.
        state = await this.#readLease(lease.id, KEEPALIVE_PRIORITY);
        if (!state || this.#lapsed(state.renewMs, state.ttlMs)) throw leaseGone(lease.id);
        current.resourceVersion = state.resourceVersion;
      }
    }
  }

  async revokeLease(lease: Lease, options?: WriteOptions): Promise<void> {
    this.#open();
    const local = this.#leases.get(lease.id) ?? {ttlMs: lease.ttlMs, renewMs: 0, resourceVersion: '', revoked: true};
    local.revoked = true;
    this.#leases.set(lease.id, local);
    // The Lease goes first: from then on every reader treats its entries as expired.
    await this.#deleteIgnoringMissing(`${this.#leasesPath}/${lease.id}`, options?.fence);
    const owned = await this.#listEntries(`${LEASE_LABEL}=${lease.id}`);
    for (const entry of owned) await this.#deleteIgnoringMissing(`${this.#entriesPath}/${entry.name}`, options?.fence);
  }

  async resumeLease(id: string): Promise<Lease | undefined> {
    this.#open();
    const state = await this.#readLease(id, KEEPALIVE_PRIORITY);
    if (!state || this.#lapsed(state.renewMs, state.ttlMs)) return undefined;
    this.#leases.set(id, {ttlMs: state.ttlMs, renewMs: state.renewMs, resourceVersion: state.resourceVersion, revoked: false});
    return {id, ttlMs: state.ttlMs};
  }

  async put(key: string, value: string, options?: PutOptions): Promise<RegistryItem> {
    this.#open();
    const lease = options?.lease;
    let leaseState: LocalLease | undefined;
    if (lease) {
      leaseState = this.#leases.get(lease.id);
      if (!leaseState) {
        const read = await this.#readLease(lease.id, 0);
        if (read) leaseState = {ttlMs: read.ttlMs, renewMs: read.renewMs, resourceVersion: read.resourceVersion, revoked: false};
      }
      if (!leaseState || leaseState.revoked || this.#ownLapsed(leaseState, lease.ttlMs)) throw leaseGone(lease.id);
    }
    const names = objectNamesForKey(key);
    let slot = this.#slotFor(key, names);
    const summary = summarise(value);
    const group = /^kube_servers\/([^/]+)\//.exec(key)?.[1];
    const labels: Record<string, string> = {...summary.labels};
    if (lease) labels[LEASE_LABEL] = lease.id;
    if (group !== undefined && /^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$/i.test(group)) labels[GROUP_LABEL] = group;
    const spec: Record<string, unknown> = {
      key,
      value,
      ...(lease ? {lease: lease.id} : {}),
      ...(summary.name === undefined ? {} : {name: summary.name}),
      ...(summary.cloud === undefined ? {} : {cloud: summary.cloud}),
      ...(summary.region === undefined ? {} : {region: summary.region}),
      ...(summary.health === undefined ? {} : {health: summary.health}),
      ...(summary.cloud === undefined ? {} : {stale: summary.stale ?? false}),
    };
    const object = (name: string, known?: Known) => ({
      apiVersion: `${KUBE_GROUP}/v1`,
      kind: 'KubeServer',
      metadata: {name, labels, ...(known === undefined ? {} : {resourceVersion: known.resourceVersion}), ...(known?.finalizers === undefined ? {} : {finalizers: known.finalizers})},
      spec,
    });
    let known = this.#knownHolding(names[slot] as string, key);
    for (let attempt = 0; ; attempt++) {
      const name = names[slot] as string;
      try {
        const answer = known === undefined
          ? await this.#client.request({method: 'POST', path: this.#entriesPath, body: object(name), guard: options?.fence})
          : await this.#client.request({method: 'PUT', path: `${this.#entriesPath}/${name}`, body: object(name, known), guard: options?.fence});
        const entry = parseEntry(answer);
        this.#rv.set(name, knownOf(entry));
        return this.#item(entry, leaseState === undefined || !lease ? undefined : {name: lease.id, ttlMs: lease.ttlMs, renewMs: leaseState.renewMs, resourceVersion: ''});
      } catch (err) {
        if (!(err instanceof KubeApiError) || attempt >= 4) throw err;
        if (err.status === 409) {
          // AlreadyExists (create) or Conflict (stale resourceVersion): read the current version and write on top.
          const current = await this.#getEntryObject(name);
          if (current !== undefined && (current.key !== key || current.terminating)) {
            // Another key's object (a group sharing the namespace) is never written over: its cluster
            // would leave that group's inventory. Nor is one being deleted: the write would go with it.
            // This key takes its hashed name, which no other key has.
            if (slot + 1 >= names.length) {
              throw current.key === key
                ? new KubeApiError(409, 'Terminating', `KubeServer ${name} is being deleted (waiting on finalizers ${JSON.stringify(current.finalizers ?? [])}); ${key} is written again once it is gone`)
                : new KubeApiError(409, 'Conflict', `KubeServer ${name} holds the registry key ${current.key}, not ${key}; expected no other key under this name`);
            }
            slot++;
            known = this.#knownHolding(names[slot] as string, key);
            continue;
          }
          known = current;
          continue;
        }
        if (err.status === 404 && known !== undefined) {
          known = undefined;
          continue;
        }
        throw err;
      }
    }
  }

  async get(key: string): Promise<RegistryItem | undefined> {
    this.#open();
    let entry: Entry | undefined;
    // The second name only when the first is missing, another key's or being deleted (see put).
    for (const name of objectNamesForKey(key)) {
      const read = await this.#getEntryObject(name);
      if (read?.key !== key) continue;
      if (entry === undefined || entry.terminating) entry = read;
      if (!read.terminating) break;
    }
    if (!entry) return undefined;
    if (entry.lease === undefined) return this.#item(entry, undefined);
    const lease = await this.#readLease(entry.lease, 0);
    if (!lease || this.#expired(lease)) return undefined;
    return this.#item(entry, lease);
  }

  async list(prefix: string): Promise<RegistryItem[]> {
    this.#open();
    // The entries are read before the Leases they name are judged: an entry found on a Lease gone or
    // lapsed by then may have been moved onto another meanwhile (a new leader's take-over, the old
    // Lease reaped). It is left out only when a second reading, begun after that judgement, still
    // finds it on a dead Lease; a moved one shows its new Lease there.
    const first = await this.#listOnce(prefix);
    return first.dropped === 0 ? first.items : (await this.#listOnce(prefix)).items;
  }

  /** One reading of the entries under `prefix` on live Leases (or none), and how many were left out for a dead Lease. */
  async #listOnce(prefix: string): Promise<{items: RegistryItem[]; dropped: number}> {
    const {entries, leases} = await this.#entriesThenLeases();
    const items: RegistryItem[] = [];
    let dropped = 0;
    for (const entry of preferLive(entries)) {
      if (!entry.key.startsWith(prefix)) continue;
      if (entry.lease === undefined) {
        items.push(this.#item(entry, undefined));
        continue;
      }
      const lease = leases.get(entry.lease);
      if (lease && !this.#expired(lease)) items.push(this.#item(entry, lease));
      else dropped++;
    }
    return {items: items.sort((a, b) => compareKeys(a.key, b.key)), dropped};
  }

  async delete(key: string, options?: WriteOptions): Promise<boolean> {
    this.#open();
    const names = objectNamesForKey(key);
    const [first, second] = names;
    if (second === undefined) {
      // A hashed name is this key's alone.
      const deleted = await this.#deleteIgnoringMissing(`${this.#entriesPath}/${first}`, options?.fence);
      this.#rv.delete(first);
      return deleted;
    }
    // `<group>.<name>` may hold another group's key: only the object holding this key is deleted.
    const deletedFirst = await this.#deleteHolding(first, key, options?.fence);
    // The hashed name is asked only when this key may be there (put moved it there), not on every delete.
    const deletedSecond = deletedFirst && this.#rv.get(second)?.key !== key ? false : await this.#deleteHolding(second, key, options?.fence);
    return deletedFirst || deletedSecond;
  }

  /** Deletes object `name` if it holds `key` (resourceVersion precondition, re-read on a change); true when it did. */
  async #deleteHolding(name: string, key: string, guard: (() => void) | undefined): Promise<boolean> {
    let known = this.#knownHolding(name, key)?.resourceVersion;
    for (let attempt = 0; ; attempt++) {
      if (known === undefined) {
        const current = await this.#getEntryObject(name);
        if (current?.key !== key) return false;
        known = current.resourceVersion;
      }
      try {
        await this.#client.request({method: 'DELETE', path: `${this.#entriesPath}/${name}`, body: {preconditions: {resourceVersion: known}}, guard});
        this.#rv.delete(name);
        return true;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) {
          this.#rv.delete(name);
          return false;
        }
        if (!(err instanceof KubeApiError && err.status === 409) || attempt >= 4) throw err;
        // Changed since it was read (a write of this key, or the name now another key's): read it again.
        known = undefined;
      }
    }
  }

  /**
   * Which of a key's names to write: one holding this key (and not being deleted), else the first
   * not known to hold another key or to be being deleted; all taken, the last (its write says why).
   */
  #slotFor(key: string, names: readonly string[]): number {
    let free = -1;
    for (const [i, name] of names.entries()) {
      const held = this.#rv.get(name);
      if (held?.key === key && !held.terminating) return i;
      if (held === undefined && free < 0) free = i;
    }
    return free < 0 ? names.length - 1 : free;
  }

  /** Object `name` as last seen, when it held `key`. */
  #knownHolding(name: string, key: string): Known | undefined {
    const known = this.#rv.get(name);
    return known?.key === key ? known : undefined;
  }

  async watch(prefix: string, onEvent: (event: WatchEvent) => void, options?: WatchOptions): Promise<Watcher> {
    this.#open();
    const watch = new KubeWatch(this, prefix, onEvent);
    this.#watchers.add(watch);
    await watch.start(options?.fromRevision);
    return {
      close: async () => {
        this.#watchers.delete(watch);
        watch.close();
      },
    };
  }

  async ping(): Promise<void> {
    this.#open();
    await this.#client.request({method: 'GET', path: this.#entriesPath, query: {limit: '1'}, priority: KEEPALIVE_PRIORITY});
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#cancelPurge?.();
    for (const w of this.#watchers) w.close();
    this.#watchers.clear();
  }

  /**
   * The host id in Secret `<identityPrefix>-identity-<replica>`: read if present, else created
   * (create-if-absent: a replica that lost the race reads the winner's id). A Secret that cannot be
   * read as an identity fails the start; it is never overwritten.
   */
  async hostIdentity(replica: string, create: () => string): Promise<string> {
    this.#open();
    const name = identitySecretName(this.#identityPrefix, replica);
    const path = `/api/v1/namespaces/${encodeURIComponent(this.#ns)}/secrets`;
    const read = async (): Promise<string | undefined> => {
      try {
        return parseIdentity(await this.#client.request({method: 'GET', path: `${path}/${name}`}), name);
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw err;
      }
    };
    const existing = await read();
    if (existing !== undefined) return existing;
    const id = create();
    try {
      await this.#client.request({
        method: 'POST',
        path,
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          type: 'Opaque',
          metadata: {name, labels: {'app.kubernetes.io/name': 'kube-discovery', 'kube-discovery.io/identity': 'true'}},
          data: {host_id: Buffer.from(id, 'utf8').toString('base64')},
        },
      });
      return id;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 409)) throw err;
      const winner = await read();
      if (winner === undefined) throw err;
      return winner;
    }
  }

  /** Deletes entries whose owner Lease expired or is gone, then the expired registry Leases; returns the number of entries deleted. */
  async reapExpired(): Promise<number> {
    const {entries, leases} = await this.#entriesThenLeases();
    let deleted = 0;
    for (const entry of entries) {
      if (entry.lease === undefined) continue;
      const lease = leases.get(entry.lease);
      if (lease && !this.#expired(lease)) continue;
      // The precondition keeps an entry that its owner re-wrote meanwhile.
      try {
        await this.#client.request({method: 'DELETE', path: `${this.#entriesPath}/${entry.name}`, body: {preconditions: {resourceVersion: entry.resourceVersion}}});
        deleted++;
      } catch (err) {
        if (!(err instanceof KubeApiError && (err.status === 404 || err.status === 409))) throw err;
      }
    }
    for (const lease of leases.values()) {
      if (this.#expired(lease)) await this.#deleteIgnoringMissing(`${this.#leasesPath}/${lease.name}`);
    }
    return deleted;
  }

  // --- helpers used by the watch ---

  /** @internal */
  listEntriesForWatch(): Promise<{entries: Entry[]; resourceVersion: string}> {
    return this.#listEntriesWithVersion();
  }

  /** The API client (shared with the Lease election). */
  get client(): KubeClient {
    return this.#client;
  }

  /** Namespace of the entries, Leases and identity Secrets. */
  get namespace(): string {
    return this.#ns;
  }

  /** @internal */
  get entriesPath(): string {
    return this.#entriesPath;
  }

  /** @internal */
  toItem(entry: Entry, lease: LeaseState | undefined): RegistryItem {
    return this.#item(entry, lease);
  }

  /** @internal The state of a Lease for a watch event: this replica's own from memory, others from `cache` or one read. */
  async leaseFor(name: string, cache: Map<string, LeaseState>): Promise<LeaseState | undefined> {
    const local = this.#leases.get(name);
    if (local && !local.revoked) return {name, ttlMs: local.ttlMs, renewMs: local.renewMs, resourceVersion: local.resourceVersion};
    const cached = cache.get(name);
    if (cached) return cached;
    const read = await this.#readLease(name, 0);
    if (read) cache.set(name, read);
    return read;
  }

  /** @internal */
  isExpired(lease: LeaseState | undefined): boolean {
    return lease === undefined || this.#expired(lease);
  }

  /**
   * A Lease is expired when neither its holder's last renewal nor the end of an API-server outage
   * (when nobody could renew) is within its duration: like etcd, which extends its leases after an
   * outage, a backend that was down must not expire every entry before its holder could renew.
   */
  #expired(lease: LeaseState): boolean {
    const own = this.#leases.get(lease.name);
    if (own && !own.revoked && own.keptAt !== undefined) return this.#ownLapsed(own, own.ttlMs);
    const seen = this.#firstSeen(lease);
    if (!this.#lapsed(lease.renewMs, lease.ttlMs)) return false;
    // renewTime is the holder's wall clock, not ours: a replica whose clock runs minutes ahead would
    // take a renewing holder's Lease for lapsed, hide its entries and, as leader, reap them. Lapsed
    // by its renewTime, a Lease is still live until one duration after this replica first saw that
    // renewal (as Kubernetes' leader election judges another holder), on elapsed time.
    return Math.max(seen, this.#recoveredElapsed) + lease.ttlMs <= this.#elapsed();
  }

  /** When (elapsed time) this replica first read `lease` with its current renewal. */
  #firstSeen(lease: LeaseState): number {
    const seen = this.#seen.get(lease.name);
    if (seen !== undefined && seen.renewMs === lease.renewMs) return seen.at;
    const at = this.#elapsed();
    this.#seen.set(lease.name, {renewMs: lease.renewMs, at});
    return at;
  }

  /** A Lease this replica renewed lapses on elapsed time since that renewal (one it only read, on its renewTime). */
  #ownLapsed(local: LocalLease, ttlMs: number): boolean {
    if (local.keptAt === undefined) return this.#lapsed(local.renewMs, ttlMs);
    return Math.max(local.keptAt, this.#recoveredElapsed) + ttlMs <= this.#elapsed();
  }

  #elapsed(): number {
    return this.#clock.elapsed?.() ?? this.#clock.now();
  }

  /** The same rule for a renewal time and duration (the holder's own keepalive, put and resume use it too). */
  #lapsed(renewMs: number, ttlMs: number): boolean {
    return Math.max(renewMs, this.#recoveredMs) + ttlMs <= this.#clock.now();
  }

  #item(entry: Entry, lease: LeaseState | undefined): RegistryItem {
    return {
      key: entry.key,
      value: entry.value,
      revision: entry.resourceVersion,
      ...(entry.lease === undefined ? {} : {lease: entry.lease, expires: lease === undefined ? 0 : lease.renewMs + lease.ttlMs}),
    };
  }

  async #getEntryObject(name: string): Promise<Entry | undefined> {
    try {
      const entry = parseEntry(await this.#client.request({method: 'GET', path: `${this.#entriesPath}/${name}`}));
      this.#rv.set(name, knownOf(entry));
      return entry;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) {
        this.#rv.delete(name);
        return undefined;
      }
      throw err;
    }
  }

  async #readLease(name: string, priority: number): Promise<LeaseState | undefined> {
    try {
      const lease = parseLease(await this.#client.request({method: 'GET', path: `${this.#leasesPath}/${name}`, priority}));
      this.#firstSeen(lease);
      return lease;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  /**
   * Entries, then Leases, never both at once: an entry names only a Lease created before it was
   * written, so a Lease the later list lacks is really gone. Listed the other way round (or
   * concurrently), a take-over's new Lease could be missing and its entries read as expired.
   */
  async #entriesThenLeases(): Promise<{entries: Entry[]; leases: Map<string, LeaseState>}> {
    const entries = await this.#listEntries();
    return {entries, leases: await this.#listLeases()};
  }

  async #listEntries(labelSelector?: string): Promise<Entry[]> {
    return (await this.#listEntriesWithVersion(labelSelector)).entries;
  }

  /** Lists every page; any malformed page fails the whole list (a partial list would read as deletions). */
  async #listEntriesWithVersion(labelSelector?: string): Promise<{entries: Entry[]; resourceVersion: string}> {
    const entries: Entry[] = [];
    let cont: string | undefined;
    let resourceVersion = '';
    const tokens = new ContinueTokens('KubeServerList');
    do {
      const page = parseList(await this.#client.request({
        method: 'GET',
        path: this.#entriesPath,
        query: {limit: String(PAGE_SIZE), continue: cont, labelSelector},
        list: true,
      }), 'KubeServerList');
      if (resourceVersion === '') resourceVersion = page.resourceVersion;
      for (const item of page.items) {
        const entry = parseEntry(item);
        this.#rv.set(entry.name, knownOf(entry));
        entries.push(entry);
      }
      cont = tokens.next(page.continue);
    } while (cont !== undefined);
    return {entries, resourceVersion};
  }

  /** @internal One list call: the state of every registry Lease. */
  async listLeases(): Promise<Map<string, LeaseState>> {
    return this.#listLeases();
  }

  async #listLeases(): Promise<Map<string, LeaseState>> {
    const leases = new Map<string, LeaseState>();
    let cont: string | undefined;
    const tokens = new ContinueTokens('LeaseList');
    do {
      const page = parseList(await this.#client.request({
        method: 'GET',
        path: this.#leasesPath,
        query: {limit: String(PAGE_SIZE), continue: cont, labelSelector: `${REGISTRY_LEASE_LABEL}=true`},
        list: true,
      }), 'LeaseList');
      for (const item of page.items) {
        const lease = parseLease(item);
        leases.set(lease.name, lease);
        this.#firstSeen(lease);
      }
      cont = tokens.next(page.continue);
    } while (cont !== undefined);
    for (const name of this.#seen.keys()) if (!leases.has(name)) this.#seen.delete(name);
    return leases;
  }

  async #deleteIgnoringMissing(path: string, guard?: () => void): Promise<boolean> {
    try {
      await this.#client.request({method: 'DELETE', path, guard});
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return false;
      throw err;
    }
  }

  #schedulePurge(): void {
    this.#cancelPurge = this.#clock.setTimeout(() => {
      if (this.#closed) return;
      this.#schedulePurge();
      // Ticks never overlap; a tick that comes during one runs right after it, with the time of then.
      if (this.#purging) {
        this.#purgeAgain = true;
        return;
      }
      this.#purging = true;
      void (async () => {
        do {
          this.#purgeAgain = false;
          await this.#purge();
        } while (this.#purgeAgain && !this.#closed);
        this.#purging = false;
      })();
    }, this.#purgeMs);
  }

  /** Hands a failure nobody awaits to `onError` (the registry health), never to stderr. */
  reportBackground(err: unknown): void {
    this.#onError?.(err instanceof Error ? err : new Error(String(err)));
  }

  /** One tick: one Lease list shared by every watcher; the leader also deletes what expired. */
  async #purge(): Promise<void> {
    if (this.#closed) return;
    try {
      if (this.#watchers.size > 0) {
        // What each watcher knows before the Lease list is asked for: an entry moved onto a newer Lease meanwhile is judged next tick.
        const known = [...this.#watchers].map((w) => [w, w.leaseSnapshot()] as const);
        const leases = await this.#listLeases();
        for (const [w, snapshot] of known) w.checkExpiry(leases, snapshot);
      }
      if (this.#reap) await this.reapExpired();
    } catch (err) {
      // A failed tick changes nothing: expiry is decided only from a successful, well-formed Lease list.
      this.reportBackground(err);
    }
  }

  #open(): void {
    if (this.#closed) throw new Error('kubernetes registry backend is closed; expected an open backend');
  }
}

/**
 * One registry watch: a Kubernetes watch on the namespace's KubeServers from a resourceVersion,
 * resumed after the stream ends, relisted (and diffed) after `410 Gone`; entries whose Lease
 * expired produce one delete event.
 */
class KubeWatch {
  readonly #backend: KubernetesBackend;
  readonly #prefix: string;
  readonly #hub = new WatchHub();
  /** Entries under the prefix as last seen, by object name. */
  readonly #known = new Map<string, Entry>();
  /** Names already reported deleted because their Lease expired. */
  readonly #expired = new Set<string>();
  /** Lease states from the last purge tick and lookups, for the expiry of put events. */
  #leases = new Map<string, LeaseState>();
  /** Events are applied one after another, in stream order, even when one needs a Lease read. */
  #chain: Promise<void> = Promise.resolve();
  /** Per object name, events received and not yet applied (waiting in the chain). */
  readonly #pending = new Map<string, number>();
  #resourceVersion = '';
  #handle: {abort(): void} | undefined;
  #closed = false;
  #retryDelayMs = 100;
  /**
   * An event could not be applied (the Lease it names unreadable, the object malformed): the view
   * may hold an entry on a Lease it left, whose lapse would read as a deletion. The stream is ended
   * and resumed from a new listing.
   */
  #relistNeeded = false;

  constructor(backend: KubernetesBackend, prefix: string, onEvent: (event: WatchEvent) => void) {
    this.#backend = backend;
    this.#prefix = prefix;
    this.#hub.subscribe(prefix, onEvent);
  }

  async start(fromRevision: string | undefined): Promise<void> {
    if (fromRevision === undefined) await this.#relist(false);
    else this.#resourceVersion = fromRevision;
    await this.#open();
  }

  close(): void {
    this.#closed = true;
    this.#handle?.abort();
    this.#hub.clear();
  }

  /** The Lease each known entry names now (taken before a Lease list is asked for). */
  leaseSnapshot(): Map<string, string | undefined> {
    return new Map([...this.#known].map(([name, entry]) => [name, entry.lease]));
  }

  /** Emits a delete for every known entry whose Lease is gone or expired in this (successful) Lease list. */
  checkExpiry(leases: Map<string, LeaseState>, snapshot: ReadonlyMap<string, string | undefined>): void {
    this.#leases = new Map(leases);
    const events: WatchEvent[] = [];
    for (const [name, entry] of this.#known) {
      if (entry.lease === undefined || this.#expired.has(name)) continue;
      // An event of this entry is still being applied (its new Lease being read): it may have moved
      // onto another Lease already, as a take-over moves every entry. It is judged at the next check.
      if (this.#pending.has(name)) continue;
      // Bound to a Lease after the list was asked for: the list may predate that Lease.
      if (snapshot.get(name) !== entry.lease) continue;
      if (!this.#backend.isExpired(leases.get(entry.lease))) continue;
      // The key lives on under its other name (rewritten while this object waits on a finalizer).
      const other = this.#otherHolder(entry);
      if (other && (other.lease === undefined || !this.#backend.isExpired(leases.get(other.lease)))) continue;
      this.#expired.add(name);
      events.push({type: 'delete', key: entry.key, revision: entry.resourceVersion});
    }
    this.#hub.emit(events);
  }

  async #relist(emit: boolean): Promise<void> {
    // Entries first, then Leases (see #entriesThenLeases).
    const {entries, resourceVersion} = await this.#backend.listEntriesForWatch();
    const leases = await this.#backend.listLeases();
    this.#leases = leases;
    const seen = new Set<string>();
    const events: WatchEvent[] = [];
    // Per key the object readers are shown: the live one when a key is under two (see preferLive).
    const shown = new Map(preferLive(entries.filter((e) => e.key.startsWith(this.#prefix))).map((e) => [e.key, e]));
    for (const entry of entries) {
      if (!entry.key.startsWith(this.#prefix)) continue;
      seen.add(entry.name);
      const before = this.#known.get(entry.name);
      this.#known.set(entry.name, entry);
      if (emit && before?.resourceVersion !== entry.resourceVersion && shown.get(entry.key) === entry) {
        this.#expired.delete(entry.name);
        events.push({type: 'put', item: this.#backend.toItem(entry, entry.lease === undefined ? undefined : leases.get(entry.lease))});
      }
    }
    for (const [name, entry] of this.#known) {
      if (seen.has(name)) continue;
      this.#known.delete(name);
      const expired = this.#expired.delete(name);
      if (emit && !expired && !shown.has(entry.key)) events.push({type: 'delete', key: entry.key, revision: resourceVersion});
    }
    this.#resourceVersion = resourceVersion;
    this.#hub.emit(events);
  }

  async #open(): Promise<void> {
    if (this.#closed) return;
    let gone = false;
    const handle = await this.#backend.client.watch(
      this.#backend.entriesPath,
      {resourceVersion: this.#resourceVersion, allowWatchBookmarks: 'true'},
      (event) => {
        if (this.#closed) return;
        if (event.type === 'ERROR') {
          const status = event.object as {code?: unknown};
          if (status.code === 410) gone = true;
          return;
        }
        const name = (event.object as {metadata?: {name?: unknown}} | null)?.metadata?.name;
        const pending = typeof name === 'string' ? name : undefined;
        if (pending !== undefined) this.#pending.set(pending, (this.#pending.get(pending) ?? 0) + 1);
        this.#chain = this.#chain
          .then(() => this.#apply(event.type, event.object))
          .catch((err: unknown) => {
            // An event that cannot be applied is dropped, never read as a deletion; a new listing repairs the view.
            this.#backend.reportBackground(err);
            this.#relistSoon();
          })
          .finally(() => {
            if (pending === undefined) return;
            const left = (this.#pending.get(pending) ?? 1) - 1;
            if (left > 0) this.#pending.set(pending, left);
            else this.#pending.delete(pending);
          });
      },
      (err) => {
        if (this.#closed) return;
        const expired = gone || (err instanceof Error && /\b410\b|Gone|Expired/.test(err.message));
        this.#resume(expired || this.#relistNeeded);
      },
    ).catch((err: unknown) => {
      this.#resume(this.#relistNeeded, err);
      return undefined;
    });
    if (this.#closed) handle?.abort();
    else {
      this.#handle = handle;
      // An event of this stream failed before its handle was known.
      if (this.#relistNeeded) handle?.abort();
    }
  }

  /** The entry holding the same key under the key's other name, if known (see put). */
  #otherHolder(entry: Entry): Entry | undefined {
    for (const name of objectNamesForKey(entry.key)) {
      if (name === entry.name) continue;
      const other = this.#known.get(name);
      if (other?.key === entry.key) return other;
    }
    return undefined;
  }

  /** Ends the stream so that it resumes from a new listing (see #relistNeeded). */
  #relistSoon(): void {
    if (this.#closed || this.#relistNeeded) return;
    this.#relistNeeded = true;
    this.#handle?.abort();
  }

  #resume(relist: boolean, _err?: unknown): void {
    if (this.#closed) return;
    const delayMs = this.#retryDelayMs;
    this.#retryDelayMs = Math.min(this.#retryDelayMs * 2, 5000);
    setTimeout(() => {
      if (this.#closed) return;
      void (async () => {
        try {
          if (relist) {
            // Cleared first: an event that fails while this listing runs asks for another.
            this.#relistNeeded = false;
            await this.#relist(true);
          }
          this.#retryDelayMs = 100;
        } catch {
          // The API server is unavailable: keep the view as it is and try again.
          this.#relistNeeded ||= relist;
          this.#resume(relist);
          return;
        }
        await this.#open();
      })();
    }, delayMs).unref();
  }

  async #apply(type: string, object: unknown): Promise<void> {
    if (type === 'BOOKMARK') {
      const rv = (object as {metadata?: {resourceVersion?: unknown}}).metadata?.resourceVersion;
      if (typeof rv === 'string' && rv !== '') this.#resourceVersion = rv;
      return;
    }
    const entry = parseEntry(object);
    this.#resourceVersion = entry.resourceVersion;
    if (!entry.key.startsWith(this.#prefix)) return;
    if (type === 'ADDED' || type === 'MODIFIED') {
      const lease = entry.lease === undefined ? undefined : await this.#backend.leaseFor(entry.lease, this.#leases);
      if (this.#closed) return;
      this.#known.set(entry.name, entry);
      this.#expired.delete(entry.name);
      // An object being deleted while its key lives on under its other name is not what readers are shown.
      if (entry.terminating && this.#otherHolder(entry)?.terminating === false) return;
      this.#hub.emit([{type: 'put', item: this.#backend.toItem(entry, lease)}]);
    } else if (type === 'DELETED') {
      this.#known.delete(entry.name);
      if (this.#expired.delete(entry.name)) return;
      // Its key lives on under its other name: the key was not deleted.
      if (this.#otherHolder(entry)) return;
      this.#hub.emit([{type: 'delete', key: entry.key, revision: entry.resourceVersion}]);
    }
  }
}

/** Builds the backend from its config section (loads @kubernetes/client-node). */
export async function kubernetesBackendFromConfig(config: KubernetesStorageConfig, deps: {readonly clock: Clock; readonly onError?: (error: Error) => void}): Promise<KubernetesBackend> {
  const {createKubeClient} = await import('./kube-client.ts');
  const client = await createKubeClient({
    ...(config.kubeconfig === undefined ? {} : {kubeconfig: config.kubeconfig}),
    ...(config.context === undefined ? {} : {context: config.context}),
    ...(config.qps === undefined ? {} : {qps: config.qps}),
    ...(config.burst === undefined ? {} : {burst: config.burst}),
  });
  const namespace = config.namespace ?? client.namespace;
  if (namespace === undefined || namespace === '') {
    throw new Error('storage.namespace: expected a namespace (none in the config, the kubeconfig context or the pod)');
  }
  return new KubernetesBackend({client, namespace, clock: deps.clock, ...(deps.onError ? {onError: deps.onError} : {}), ...(process.env['POD_NAME'] ? {identity: process.env['POD_NAME']} : {})});
}

/** Name of a replica's identity Secret: `<prefix>-identity-<replica>`, mapped like any object name when invalid. */
export function identitySecretName(prefix: string, replica: string): string {
  const name = `${prefix}-identity-${replica}`;
  return /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name) ? name : objectNameForKey(name);
}

function parseIdentity(answer: unknown, name: string): string {
  const data = record(record(answer, `Secret ${name}`)['data'] ?? {}, `Secret ${name} data`);
  const encoded = data['host_id'];
  const id = typeof encoded === 'string' ? Buffer.from(encoded, 'base64').toString('utf8').trim() : '';
  if (id === '') throw new MalformedAnswerError(`Secret ${name} has no data.host_id; expected the replica's host id (fix or delete the Secret)`);
  return id;
}

function leaseGone(id: string): LeaseNotFoundError {
  return new LeaseNotFoundError(`lease ${id} is expired or unknown to the kubernetes registry`);
}

/** A Lease's MicroTime: RFC 3339 with microseconds. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

function record(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new MalformedAnswerError(`expected ${what} to be an object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  return value as Record<string, unknown>;
}

function stringField(obj: Record<string, unknown>, field: string, what: string): string {
  const value = obj[field];
  if (typeof value !== 'string' || value === '') throw new MalformedAnswerError(`expected ${what}.${field} to be a non-empty string, got ${JSON.stringify(value) ?? 'nothing'}`);
  return value;
}

/** Pages one list may take (5,000,000 objects of 500 a page): past it the list is no answer. */
const MAX_LIST_PAGES = 10_000;

/**
 * The continue tokens of one list. A proxy that caches by path and drops the query answers every
 * page alike, token and all: followed, the list never ended and held every copy of the page until
 * the process ran out of memory. A token given twice, or a list past MAX_LIST_PAGES, is malformed.
 */
class ContinueTokens {
  readonly #kind: string;
  readonly #seen = new Set<string>();

  constructor(kind: string) {
    this.#kind = kind;
  }

  /** The token to ask the next page with (undefined: the last page was read); throws on a repeat. */
  next(token: string | undefined): string | undefined {
    if (token === undefined) return undefined;
    // Long tokens are kept as digests: a hostile answer's megabyte tokens must not pile up here.
    const key = pageTokenKey(token);
    if (this.#seen.has(key)) throw new MalformedAnswerError(`${this.#kind}: the API server gave a continue token it had already given (a proxy answering every page alike?)`);
    if (this.#seen.size >= MAX_LIST_PAGES) throw new MalformedAnswerError(`${this.#kind}: more than ${MAX_LIST_PAGES} pages`);
    this.#seen.add(key);
    return token;
  }
}

function parseList(answer: unknown, kind: string): {items: unknown[]; resourceVersion: string; continue?: string} {
  const list = record(answer, kind);
  const metadata = record(list['metadata'], `${kind}.metadata`);
  const items = list['items'];
  if (!Array.isArray(items)) throw new MalformedAnswerError(`expected ${kind}.items to be an array, got ${JSON.stringify(items) ?? 'nothing'}`);
  const resourceVersion = stringField(metadata, 'resourceVersion', `${kind}.metadata`);
  const cont = metadata['continue'];
  return {items, resourceVersion, ...(typeof cont === 'string' && cont !== '' ? {continue: cont} : {})};
}

function parseEntry(answer: unknown): Entry {
  const obj = record(answer, 'KubeServer');
  const metadata = record(obj['metadata'], 'KubeServer.metadata');
  const name = stringField(metadata, 'name', 'KubeServer.metadata');
  const spec = record(obj['spec'], `KubeServer ${name} spec`);
  const value = spec['value'];
  if (typeof value !== 'string') throw new MalformedAnswerError(`expected KubeServer ${name} spec.value to be a string, got ${JSON.stringify(value) ?? 'nothing'}`);
  const lease = spec['lease'];
  const finalizers = metadata['finalizers'];
  const deletion = metadata['deletionTimestamp'];
  return {
    name,
    key: stringField(spec, 'key', `KubeServer ${name} spec`),
    value,
    lease: typeof lease === 'string' && lease !== '' ? lease : undefined,
    resourceVersion: stringField(metadata, 'resourceVersion', `KubeServer ${name} metadata`),
    finalizers: Array.isArray(finalizers) && finalizers.length > 0 && finalizers.every((f) => typeof f === 'string') ? finalizers as string[] : undefined,
    terminating: typeof deletion === 'string' && deletion !== '',
  };
}

/**
 * One entry per key: a key is under two objects while the one being deleted waits on a finalizer
 * and its rewrite lives under the key's other name (see put). The live one is the entry.
 */
function preferLive(entries: readonly Entry[]): Entry[] {
  if (!entries.some((e) => e.terminating)) return entries as Entry[];
  const byKey = new Map<string, Entry>();
  for (const entry of entries) {
    const held = byKey.get(entry.key);
    if (held === undefined || (held.terminating && !entry.terminating)) byKey.set(entry.key, entry);
  }
  return [...byKey.values()];
}

function parseLease(answer: unknown): LeaseState {
  const obj = record(answer, 'Lease');
  const metadata = record(obj['metadata'], 'Lease.metadata');
  const name = stringField(metadata, 'name', 'Lease.metadata');
  const spec = record(obj['spec'], `Lease ${name} spec`);
  const annotations = (metadata['annotations'] ?? {}) as Record<string, unknown>;
  const seconds = spec['leaseDurationSeconds'];
  if (typeof seconds !== 'number' || !(seconds > 0)) throw new MalformedAnswerError(`expected Lease ${name} spec.leaseDurationSeconds to be a positive number, got ${JSON.stringify(seconds) ?? 'nothing'}`);
  const exact = Number(annotations[TTL_ANNOTATION]);
  const renew = Date.parse(String(spec['renewTime'] ?? spec['acquireTime'] ?? ''));
  if (!Number.isFinite(renew)) throw new MalformedAnswerError(`expected Lease ${name} spec.renewTime to be a time, got ${JSON.stringify(spec['renewTime']) ?? 'nothing'}`);
  return {
    name,
    ttlMs: Number.isFinite(exact) && exact > 0 ? exact : seconds * 1000,
    renewMs: renew,
    resourceVersion: stringField(metadata, 'resourceVersion', `Lease ${name} metadata`),
  };
}
