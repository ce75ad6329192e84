/**
 * The announce / keepalive / delete lifecycle of one replica's kube_server entries in one
 * discovery group. Every entry hangs on one lease, so a keepalive is one backend call however
 * many clusters there are; announces that change nothing cost no I/O.
 */
import type {Clock} from '../src/core/clock.ts';
import type {Lease, RegistryBackend, RegistryItem} from '../src/registry/backend.ts';
import {LeaseNotFoundError} from '../src/registry/backend.ts';
import {errorMessage, FencedError} from '../src/core/errors.ts';
import {intern} from '../src/core/intern.ts';
import type {KubeServer, KubeServerDraft} from './kube-server.ts';
import {kubeServerFromItem, sameJson, kubeServerKey, kubeServerPrefix, withoutRegistryFields} from './kube-server.ts';

/** The registry operations of a heartbeat: put (`announce`), lease upkeep (`keepalive`), delete / revoke (`delete`). */
export const HEARTBEAT_FAILURE_KINDS = ['announce', 'keepalive', 'delete'] as const;

/** Which registry operation failed (metric label values are exactly these). */
export type HeartbeatFailureKind = (typeof HEARTBEAT_FAILURE_KINDS)[number];

type LogFn = (fields: Record<string, unknown>, message: string) => void;

/** The pino-compatible subset the heartbeat logs with. */
export interface HeartbeatLogger {
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;
}

/** How failed registry calls are retried: `attempts` tries in all, waiting baseMs, 2×baseMs, 4×baseMs ... between them. */
export interface RetryPolicy {
  readonly attempts: number;
  readonly baseMs: number;
}

/** Options of a Heartbeat. */
export interface HeartbeatOptions {
  readonly backend: RegistryBackend;
  readonly clock: Clock;
  /** Discovery group whose `kube_servers/<group>/` entries this heartbeat writes. */
  readonly group: string;
  readonly ttlMs: number;
  /** Default ttlMs / 3, so two keepalives may fail before anything expires. */
  readonly keepaliveIntervalMs?: number;
  /** Identity written into every entry's spec (host_id, hostname, version). */
  readonly hostId: string;
  readonly hostname: string;
  readonly version: string;
  readonly logger?: HeartbeatLogger;
  /** Called once per failed registry call (each retry attempt counts), e.g. to bump a metric. */
  readonly onFailure?: (kind: HeartbeatFailureKind, error: unknown) => void;
  /** Called after each successful registry write, so a health tracker sees recovery. */
  readonly onSuccess?: (kind: HeartbeatFailureKind) => void;
  /** Called when a keepalive extended the lease, with the new expiry (epoch ms): readers follow the lease. */
  readonly onKeepAlive?: (lease: Lease, expiresMs: number) => void;
  /** Default 3 attempts, 200 ms base delay. */
  readonly retry?: RetryPolicy;
  /**
   * The registry's parsed copy of an entry as stored at `revision` (the service's inventory), or
   * undefined when it holds no such copy (yet). Given it, the heartbeat keeps a reference to that
   * copy instead of a document of its own, so each document is held once, not twice.
   */
  readonly stored?: (name: string, revision: string) => KubeServer | undefined;
  /**
   * Whether the registry's copy of an entry hangs on `lease`, as the service last read it (its
   * inventory): undefined when it holds no copy (yet). An entry another writer re-put on a lease of
   * its own (or on none) would lapse with that lease although it looks unchanged here: the next
   * announce puts it back onto ours.
   */
  readonly storedOnLease?: (name: string, lease: string) => boolean | undefined;
}

interface Entry {
  /**
   * Which announce the entry holds (a counter, reused when the same document is re-put): a write
   * that finishes after a newer announce of the name leaves the newer one in place. A counter,
   * not a digest of the document: hashing its canonical JSON was a fifth of a first cycle's
   * registration CPU, and "unchanged" is decided by comparing documents (`sameJson`).
   */
  readonly doc: number;
  /**
   * The document, for re-putting it under a new lease: the inventory's stored copy once it has one
   * (`stored`), else the announced draft; a stored copy's expires/revision are ignored when re-put.
   */
  readonly server: KubeServerDraft | KubeServer;
  /** Lease of the stored copy; undefined while a write is pending or after it failed. */
  readonly lease: string | undefined;
  readonly revision: string;
  /** Written by this heartbeat (as opposed to adopted from the registry and not announced yet). */
  readonly mine: boolean;
  /** The draft last announced and found the same as `server` on `lease` (an entry replaced by a write or a read has none). */
  readonly equalDraft?: KubeServerDraft;
}

/** Re-puts in flight at once when a lost lease is replaced. */
const REPUT_CONCURRENCY = 64;

const silent: HeartbeatLogger = {debug: () => {}, info: () => {}, warn: () => {}, error: () => {}};

/** One replica's lease and the kube_server entries on it; see the file comment. */
export class Heartbeat {
  readonly #backend: RegistryBackend;
  readonly #clock: Clock;
  readonly #group: string;
  readonly #ttlMs: number;
  readonly #intervalMs: number;
  readonly #identity: {readonly version: string; readonly hostname: string; readonly host_id: string};
  readonly #log: HeartbeatLogger;
  readonly #onFailure: (kind: HeartbeatFailureKind, error: unknown) => void;
  readonly #onSuccess: (kind: HeartbeatFailureKind) => void;
  readonly #onKeepAlive: (lease: Lease, expiresMs: number) => void;
  readonly #retry: RetryPolicy;
  readonly #stored: (name: string, revision: string) => KubeServer | undefined;
  readonly #storedOnLease: (name: string, lease: string) => boolean | undefined;
  readonly #entries = new Map<string, Entry>();
  #docs = 0;
  readonly #abort = new AbortController();
  #lease: Lease | undefined;
  /** When the lease lapses as far as we know: the last successful grant or keepalive plus the TTL. */
  #leaseExpires = 0;
  #state: 'new' | 'running' | 'stopped' = 'new';
  #cancelTick: (() => void) | undefined;
  /** Keepalive timers of a previous run's leases of another TTL, kept alive while entries still hang on them. */
  readonly #formerLeases = new Map<string, () => void>();
  #ticking: Promise<void> | undefined;
  #replacing: Promise<void> | undefined;
  /**
   * Entries whose re-put onto a replacement lease failed (name → the doc it was to write): nobody
   * awaits that re-put, so the next good keepalive writes them again. Left out, such an entry stayed
   * out of the registry until a cycle wrote it, and a cycle whose source fails keeps only what the
   * registry has.
   */
  readonly #unannounced = new Map<string, number>();
  /** Told of each replacement lease before the entries move onto it (see onLeaseReplaced). */
  readonly #replacedListeners = new Set<(lease: Lease) => Promise<void>>();

  constructor(options: HeartbeatOptions) {
    const {ttlMs, retry = {attempts: 3, baseMs: 200}} = options;
    const intervalMs = options.keepaliveIntervalMs ?? Math.floor(ttlMs / 3);
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`Expected ttlMs to be a finite number > 0, got ${ttlMs}`);
    if (!Number.isFinite(intervalMs) || intervalMs <= 0 || intervalMs >= ttlMs) {
      throw new RangeError(`Expected keepaliveIntervalMs to be > 0 and < ttlMs (${ttlMs}), got ${intervalMs}`);
    }
    if (!Number.isInteger(retry.attempts) || retry.attempts < 1 || !(retry.baseMs >= 0)) {
      throw new RangeError(`Expected retry {attempts: integer >= 1, baseMs: >= 0}, got ${JSON.stringify(retry)}`);
    }
    if (options.group === '' || options.group.includes('/')) {
      throw new RangeError(`Expected group to be a non-empty name without "/", got ${JSON.stringify(options.group)}`);
    }
    this.#backend = options.backend;
    this.#clock = options.clock;
    this.#group = options.group;
    this.#ttlMs = ttlMs;
    this.#intervalMs = intervalMs;
    // In the document's order: the stored JSON keeps its keys as Teleport writes them.
    this.#identity = {version: options.version, hostname: options.hostname, host_id: options.hostId};
    this.#log = options.logger ?? silent;
    this.#onFailure = options.onFailure ?? (() => {});
    this.#onSuccess = options.onSuccess ?? (() => {});
    this.#onKeepAlive = options.onKeepAlive ?? (() => {});
    this.#retry = retry;
    this.#stored = options.stored ?? (() => undefined);
    this.#storedOnLease = options.storedOnLease ?? (() => undefined);
  }

  /** The lease our entries hang on (undefined before start). */
  get lease(): Lease | undefined {
    return this.#lease;
  }

  /**
   * Calls `listener` with each lease granted to replace a lost one, and waits for it before the
   * entries are re-put: what else hung on the lost lease (the writer record of an embedded registry)
   * is written again first. Returns the unsubscribe.
   */
  onLeaseReplaced(listener: (lease: Lease) => Promise<void>): () => void {
    this.#replacedListeners.add(listener);
    return () => this.#replacedListeners.delete(listener);
  }

  /** Names of the entries this heartbeat announced and keeps alive. */
  owned(): string[] {
    return [...this.#entries].filter(([, e]) => e.mine).map(([name]) => name);
  }

  /**
   * Reads the group's current entries (kept as the baseline for "unchanged"), resumes our own
   * lease from a previous run when it is still valid, else grants a new one, and starts keepalives.
   */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error(`heartbeat of group ${this.#group} was already started; expected a new one`);
    this.#state = 'running';
    const prefix = kubeServerPrefix(this.#group);
    // A read: its success says nothing about whether writes work again.
    this.adopt(await this.#retrying('announce', prefix, () => this.#backend.list(prefix), true, false));
    this.#lease = await this.#resumeOwnLease();
    if (!this.#lease) {
      const grantedAt = this.#clock.now();
      this.#lease = await this.#retrying('keepalive', `lease of ${prefix}`, () => this.#backend.grantLease(this.#ttlMs));
      this.#leaseExpires = grantedAt + this.#ttlMs;
    }
    this.#log.info({group: this.#group, lease: this.#lease.id, entries: this.#entries.size}, 'heartbeat started');
    this.#schedule();
  }

  /**
   * Takes registry entries of the group (from a previous run or another replica) as the known
   * stored state. Those on another lease are re-put under ours when next announced; the rest
   * expire unless announced.
   */
  adopt(items: readonly RegistryItem[]): void {
    const prefix = kubeServerPrefix(this.#group);
    for (const item of items) {
      if (!item.key.startsWith(prefix)) continue;
      const name = item.key.slice(prefix.length);
      try {
        // The inventory already parsed this revision: share its copy instead of parsing another.
        const server = this.#stored(name, item.revision) ?? kubeServerFromItem(item);
        this.#entries.set(name, {doc: this.#nextDoc(), server, lease: intern(item.lease), revision: item.revision, mine: false});
      } catch (err) {
        // Unreadable: no baseline, so the next announce simply overwrites it.
        this.#log.warn({key: item.key, err: errorMessage(err)}, 'registry entry is not a readable kube_server; it will be overwritten when announced');
      }
    }
  }

  /**
   * Writes the kube_server under our lease, unless the stored copy already has the same content
   * on our lease. Returns it with `expires` and `revision` filled in from the registry. With
   * `registryDiffers` (the caller read the registry's copy and found it differs) it is written
   * whatever this heartbeat believes is stored: someone else may have edited it on our lease.
   */
  async announce(draft: KubeServerDraft, options?: {readonly registryDiffers?: boolean}): Promise<KubeServer> {
    this.#requireRunning('announce');
    const name = draft.metadata.name;
    if (name === '' || name.includes('/')) throw new RangeError(`Expected a kube_server name without "/", got ${JSON.stringify(name)}`);
    const lease = await this.#currentLease();
    // Known as ours only while the registry does not show it on another lease (a write by someone else).
    const known = this.#storedOnLease(name, lease.id) === false || options?.registryDiffers === true ? undefined : this.#entries.get(name);
    // The same draft object as the one last found equal to this entry (an unchanged cluster of a
    // steady cycle: drafts are not changed once made), or the very copy this heartbeat stored (reconcile
    // hands on the registered entry when nothing changed), needs no comparing again.
    const same = known !== undefined && known.lease === lease.id && (known.equalDraft === draft || (known.mine && known.server === draft));
    // The identity leads the spec (first spread: key order) and wins over a draft's own (last spread).
    const server = same ? undefined : withoutRegistryFields({...draft, spec: this.#spec(draft.spec)} as KubeServer);
    // Compared as documents first (the stored copy without its registry fields): the digest
    // (canonical JSON, then SHA-256) is only needed for a write.
    if (known && known.lease === lease.id && (server === undefined || sameJson(withoutRegistryFields(known.server), server))) {
      // A registry whose watch lags its writes (etcd) has the stored copy by now: drop the draft for it.
      const held = this.#stored(name, known.revision) ?? known.server;
      if (held !== known.server || !known.mine || known.equalDraft !== draft) this.#entries.set(name, {...known, server: held, mine: true, equalDraft: draft});
      return withRegistryFields(held, this.#leaseExpires, known.revision);
    }
    return this.#write(name, this.#nextDoc(), server ?? withoutRegistryFields({...draft, spec: this.#spec(draft.spec)} as KubeServer));
  }

  /** Deletes the entry of `name`; true when it existed. */
  async remove(name: string): Promise<boolean> {
    const key = kubeServerKey(this.#group, name);
    // Deletes during stop() must not be cut short by the stop itself.
    const existed = await this.#retrying('delete', key, () => this.#backend.delete(key), this.#state === 'running');
    this.#entries.delete(name);
    return existed;
  }

  /**
   * Stops keepalives. With `deregister` our entries are deleted at once (lease revoked);
   * otherwise they stay until the lease expires, so a rolling restart causes no flapping.
   */
  async stop(options: {deregister: boolean}): Promise<void> {
    if (this.#state === 'stopped') return;
    const wasRunning = this.#state === 'running';
    this.#state = 'stopped';
    this.#cancelTick?.();
    for (const cancel of this.#formerLeases.values()) cancel();
    this.#formerLeases.clear();
    this.#abort.abort(new Error(`heartbeat of group ${this.#group} stopped`));
    await this.#ticking;
    await this.#replacing;
    const lease = this.#lease;
    if (!wasRunning || !lease) return;
    if (!options.deregister) {
      this.#log.info({group: this.#group, entries: this.owned().length, expires: iso(this.#leaseExpires)}, 'heartbeat stopped; entries left to expire');
      return;
    }
    await this.#retrying('delete', `lease ${lease.id} of ${kubeServerPrefix(this.#group)}`, () => this.#backend.revokeLease(lease), false);
    // Entries of ours not on the lease (a write that failed half-way) are deleted one by one.
    for (const [name, entry] of this.#entries) {
      if (entry.mine && entry.lease !== lease.id) await this.remove(name);
    }
    this.#log.info({group: this.#group}, 'heartbeat stopped; entries deregistered');
    this.#entries.clear();
  }

  /**
   * The draft's spec led by this writer's identity (first spread: key order), which also wins over
   * the draft's own (last spread). A spec of just the cluster and proxy ids (every discovered one)
   * is built with all its keys at once: spread, the last ones took a property array per entry.
   */
  #spec(spec: KubeServerDraft['spec']): KubeServer['spec'] {
    const {version, hostname, host_id} = this.#identity;
    let keys = 0;
    for (const key in spec) if (Object.hasOwn(spec, key)) keys++;
    if (keys === 2 && Object.keys(spec).join() === 'cluster,proxy_ids') return {version, hostname, host_id, cluster: spec.cluster, proxy_ids: spec.proxy_ids};
    return {...this.#identity, ...spec, ...this.#identity};
  }

  /** A new value for `Entry.doc`. */
  #nextDoc(): number {
    return ++this.#docs;
  }

  async #write(name: string, doc: number, server: KubeServerDraft, fixedLease?: Lease): Promise<KubeServer> {
    const key = kubeServerKey(this.#group, name);
    const previous = this.#entries.get(name);
    this.#entries.set(name, {doc, server, lease: undefined, revision: previous?.revision ?? '', mine: true});
    const item = await this.#retrying('announce', key, async () => {
      const lease = fixedLease ?? (await this.#currentLease());
      const document = withRegistryFields(server, this.#clock.now() + this.#ttlMs, undefined);
      try {
        // The document goes along with its text: a local registry's inventory shares it instead of parsing a copy.
        return await this.#backend.put(key, JSON.stringify(document), {lease, document});
      } catch (err) {
        // A lost lease takes every entry with it: replace it (re-announcing all) and try again.
        if (err instanceof LeaseNotFoundError && !fixedLease) await this.#replaceLease(lease);
        throw err;
      }
    });
    // A newer announce of the same name may have finished meanwhile; keep the newest.
    const current = this.#entries.get(name);
    // Memory and SQLite deliver the write to the inventory before put() returns: keep its copy, not the draft.
    if (!current || current.doc === doc) this.#entries.set(name, {doc, server: this.#stored(name, item.revision) ?? server, lease: intern(item.lease), revision: item.revision, mine: true});
    return withRegistryFields(server, item.expires ?? this.#leaseExpires, item.revision);
  }

  async #resumeOwnLease(): Promise<Lease | undefined> {
    if (!this.#backend.resumeLease) return undefined;
    const ours = new Set<string>();
    for (const entry of this.#entries.values()) {
      if (entry.lease !== undefined && entry.server.spec.host_id === this.#identity.host_id) ours.add(entry.lease);
    }
    for (const id of ours) {
      const lease = await this.#backend.resumeLease(id).catch(() => undefined);
      if (!lease) continue;
      if (lease.ttlMs !== this.#ttlMs) {
        // A TTL changed by config gets a new lease; the entries are re-put on announce. Until then
        // they hang on the old one, which must not lapse: the first cycle may take longer than it has left.
        this.#keepFormerLeaseAlive(lease);
        continue;
      }
      try {
        const at = this.#clock.now();
        await this.#backend.keepAlive(lease);
        this.#leaseExpires = at + this.#ttlMs;
        this.#log.info({group: this.#group, lease: id}, 'resumed the lease of a previous run');
        return lease;
      } catch {
        // Expired between the two calls: grant a new one.
      }
    }
    return undefined;
  }

  /**
   * Keeps a previous run's lease (of another TTL) alive at a third of its own TTL while any entry
   * is still on it; once the cycles have re-put or removed them all it is left to lapse.
   */
  #keepFormerLeaseAlive(lease: Lease): void {
    const tick = async (): Promise<void> => {
      if (this.#state === 'stopped') return;
      if (![...this.#entries.values()].some((e) => e.lease === lease.id)) {
        this.#formerLeases.delete(lease.id);
        return;
      }
      try {
        await this.#backend.keepAlive(lease);
      } catch (err) {
        if (err instanceof LeaseNotFoundError) {
          this.#formerLeases.delete(lease.id);
          return;
        }
        // Another failure: the next tick tries again, as for our own lease.
      }
      // stop() empties the map: a keepalive answered after it schedules nothing.
      if (this.#formerLeases.has(lease.id)) schedule();
    };
    const schedule = (): void => {
      this.#formerLeases.set(lease.id, this.#clock.setTimeout(() => void tick(), Math.max(1, Math.floor(lease.ttlMs / 3))));
    };
    this.#log.info({group: this.#group, lease: lease.id, ttl_ms: lease.ttlMs}, 'a previous run\'s lease has another TTL: kept alive until its entries are re-announced');
    this.#formerLeases.set(lease.id, () => undefined);
    void tick();
  }

  #schedule(): void {
    if (this.#state !== 'running') return;
    this.#cancelTick = this.#clock.setTimeout(() => {
      this.#ticking = this.#keepAliveOnce().finally(() => {
        this.#ticking = undefined;
        this.#schedule();
      });
    }, this.#intervalMs);
  }

  /** One keepalive; never rejects. A failure waits for the next tick unless the lease is surely gone. */
  async #keepAliveOnce(): Promise<void> {
    const lease = this.#lease;
    if (!lease || this.#replacing) return;
    const at = this.#clock.now();
    try {
      await this.#backend.keepAlive(lease);
      this.#leaseExpires = at + this.#ttlMs;
      this.#onSuccess('keepalive');
      this.#onKeepAlive(lease, this.#leaseExpires);
      this.#reclaimMoved(lease);
      if (this.#unannounced.size > 0) await this.#reputUnannounced(lease);
    } catch (err) {
      this.#onFailure('keepalive', err);
      // A backend whose leases live while their holder keeps calling (sqlite) has not lost one to a failing disk.
      const lost = err instanceof LeaseNotFoundError || (!this.#backend.leasesFollowHolder && this.#clock.now() >= this.#leaseExpires);
      // Repeated failures are the registry health's to log (once per state change); only a lost lease is news here.
      this.#log[lost ? 'warn' : 'debug'](
        {group: this.#group, lease: lease.id, lost, err: errorMessage(err)},
        lost ? 'lease lost; granting a new one and re-announcing' : 'keepalive failed; retrying on the next tick',
      );
      if (lost) await this.#replaceLease(lease);
    }
  }

  /** Grants a new lease and re-puts every entry the lost one held; never rejects, one at a time. */
  #replaceLease(lost: Lease): Promise<void> {
    if (this.#replacing) return this.#replacing;
    if (this.#lease?.id !== lost.id) return Promise.resolve();
    this.#replacing = (async () => {
      const prefix = kubeServerPrefix(this.#group);
      try {
        const at = this.#clock.now();
        const lease = await this.#retrying('keepalive', `lease of ${prefix}`, () => this.#backend.grantLease(this.#ttlMs));
        this.#lease = lease;
        this.#leaseExpires = at + this.#ttlMs;
        for (const listener of [...this.#replacedListeners]) await listener(lease).catch(() => undefined);
        const held = [...this.#entries].filter(([, e]) => e.mine || e.lease === lost.id);
        // A bounded number of re-puts in flight: all 50,000 at once held every document's JSON text together.
        let failed = 0;
        let next = 0;
        const rePut = async (): Promise<void> => {
          while (next < held.length) {
            const [name, e] = held[next++] as [string, Entry];
            this.#unannounced.delete(name);
            await this.#write(name, e.doc, withoutRegistryFields(e.server), lease).catch(() => {
              failed++;
              this.#unannounced.set(name, e.doc);
            });
          }
        };
        await Promise.all(Array.from({length: Math.min(REPUT_CONCURRENCY, held.length)}, rePut));
        this.#log.warn({group: this.#group, lost: lost.id, lease: lease.id, reannounced: held.length - failed, failed}, 'replaced a lost lease');
      } catch (err) {
        this.#log.debug({group: this.#group, err: errorMessage(err)}, 'could not grant a new lease; trying again on the next keepalive');
      }
    })().finally(() => {
      this.#replacing = undefined;
    });
    return this.#replacing;
  }

  /**
   * Queues for a re-put the entries this heartbeat wrote on its lease that the registry now shows on
   * another: a second process on the same file (an overlapping restart) moved them, and they would
   * lapse with its lease if it died, although every listing still has them. Not left to the next
   * announce: with a poll interval near the TTL, that cycle comes after the other lease lapsed.
   */
  #reclaimMoved(lease: Lease): void {
    for (const [name, e] of this.#entries) {
      if (e.mine && e.lease === lease.id && !this.#unannounced.has(name) && this.#storedOnLease(name, lease.id) === false) this.#unannounced.set(name, e.doc);
    }
  }

  /** Writes again the entries whose re-put onto `lease` failed, unless a newer announce or a removal came since. */
  async #reputUnannounced(lease: Lease): Promise<void> {
    const pending = [...this.#unannounced];
    let next = 0;
    const rePut = async (): Promise<void> => {
      while (next < pending.length && this.#state === 'running' && this.#lease?.id === lease.id) {
        const [name, doc] = pending[next++] as [string, number];
        const entry = this.#entries.get(name);
        if (entry?.doc !== doc) {
          this.#unannounced.delete(name);
          continue;
        }
        try {
          await this.#write(name, doc, withoutRegistryFields(entry.server), lease);
          if (this.#unannounced.get(name) === doc) this.#unannounced.delete(name);
        } catch {
          // Still refused: the next keepalive tries again.
        }
      }
    };
    await Promise.all(Array.from({length: Math.min(REPUT_CONCURRENCY, pending.length)}, rePut));
  }

  async #currentLease(): Promise<Lease> {
    if (this.#replacing) await this.#replacing;
    this.#requireRunning('announce');
    if (!this.#lease) throw new Error(`heartbeat of group ${this.#group} has no lease; expected start() to have granted one`);
    return this.#lease;
  }

  /** Runs `fn` up to `attempts` times with exponential backoff on the clock; the final error names `what`, never a value. */
  async #retrying<T>(kind: HeartbeatFailureKind, what: string, fn: () => Promise<T>, abortable = true, write = true): Promise<T> {
    const {attempts, baseMs} = this.#retry;
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await fn();
        if (write) this.#onSuccess(kind);
        return result;
      } catch (err) {
        // Refused by the fence: this replica no longer leads (a handover). The store works and no
        // retry can help, so the caller learns it at once and no registry failure is reported.
        if (err instanceof FencedError) throw err;
        this.#onFailure(kind, err);
        if (attempt >= attempts || (abortable && this.#abort.signal.aborted)) {
          throw new Error(`${kind} of ${what} failed after ${attempt} attempt(s): ${errorMessage(err)}`, {cause: err});
        }
        this.#log.debug({kind, key: what, attempt, err: errorMessage(err)}, 'registry call failed; retrying');
        await this.#clock.sleep(baseMs * 2 ** (attempt - 1), abortable ? this.#abort.signal : undefined);
      }
    }
  }

  #requireRunning(operation: string): void {
    if (this.#state !== 'running') {
      throw new Error(`cannot ${operation}: heartbeat of group ${this.#group} is ${this.#state === 'new' ? 'not started' : 'stopped'}`);
    }
  }
}

/** The document with registry fields; `revision` undefined leaves it out (it is only known after the write). */
function withRegistryFields(server: KubeServerDraft, expiresMs: number, revision: string | undefined): KubeServer {
  return {
    ...server,
    metadata: {...server.metadata, expires: iso(expiresMs), ...(revision === undefined ? {} : {revision})},
  } as KubeServer;
}


function iso(ms: number): string {
  // Every unchanged entry of a cycle is stamped with the same lease expiry: formatted once.
  if (ms !== lastIso.ms) {
    lastIso.ms = ms;
    lastIso.text = new Date(ms).toISOString();
  }
  return lastIso.text;
}

const lastIso = {ms: Number.NaN, text: ''};
