/**
 * Leader election per discovery group, the one place that decides which replica polls and
 * writes (and later, how sources are split across replicas). Each replica holds a session lease
 * and an entry `election/<group>/<lease id>` under it; the live entry with the lowest revision
 * leads. When the session cannot be kept alive for its TTL the leader steps down at once and
 * campaigns again once the registry answers, without a process restart.
 */
import type {Logger} from 'pino';
import {systemClock, type Clock} from '../core/clock.ts';
import type {Lease, RegistryBackend, RegistryItem, Watcher} from '../registry/backend.ts';
import type {Fence} from '../registry/fence.ts';
import {errorMessage} from '../core/errors.ts';

/** What this replica is, and who leads when known. */
export interface LeaderState {
  readonly role: 'leader' | 'follower';
  /** Replica id of the current leader, when known (unknown while the registry is unreachable). */
  readonly leader?: string;
  /** Set while leader: what a fenced backend view checks on every write. */
  readonly fence?: Fence;
}

/** Settings of one election. */
export interface LeaderElectionOptions {
  /** Where the election runs; in production the etcd backend all replicas share. */
  readonly backend: RegistryBackend;
  /** Discovery group: one leader per group. */
  readonly group: string;
  /** This replica's stable id, shown to the others as the leader's name. */
  readonly replicaId: string;
  /** Session TTL (`storage.session_ttl`), separate from the entries' TTL. Default 15 s. */
  readonly sessionTtlMs?: number;
  /** Pause before campaigning again after a lapsed session or a failed attempt. Default 1 s. */
  readonly retryDelayMs?: number;
  readonly logger?: Logger;
  readonly clock?: Clock;
}

/** Default session TTL. */
export const DEFAULT_SESSION_TTL_MS = 15_000;

const FOLLOWER: LeaderState = {role: 'follower'};

/** Campaigns for leadership of one discovery group until `stop()`. */
export class LeaderElection {
  readonly #backend: RegistryBackend;
  readonly #prefix: string;
  readonly #replicaId: string;
  readonly #ttlMs: number;
  readonly #retryDelayMs: number;
  readonly #logger: Logger | undefined;
  readonly #clock: Clock;
  readonly #listeners = new Set<(state: LeaderState) => void>();
  readonly #stop = new AbortController();
  /** Leases of ended sessions not yet revoked (etcd renews leases when it restarts). */
  readonly #stale = new Set<Lease>();
  #state: LeaderState = FOLLOWER;
  /** Ends the running session (the campaign in progress), to step down and campaign again. */
  #session: AbortController | undefined;
  #running: Promise<void> | undefined;
  #firstRound: (() => void) | undefined;

  constructor(options: LeaderElectionOptions) {
    const ttl = options.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS;
    if (!Number.isFinite(ttl) || ttl < 1000) throw new RangeError(`Expected sessionTtlMs to be a number >= 1000, got ${ttl}`);
    if (options.group === '' || options.group.includes('/')) {
      throw new RangeError(`Expected group to be a non-empty name without '/', got ${JSON.stringify(options.group)}`);
    }
    this.#backend = options.backend;
    this.#prefix = `election/${options.group}/`;
    this.#replicaId = options.replicaId;
    this.#ttlMs = ttl;
    this.#retryDelayMs = options.retryDelayMs ?? 1_000;
    this.#logger = options.logger;
    this.#clock = options.clock ?? systemClock;
  }

  /** Starts campaigning; resolves once the first round settled (this replica leads, follows a known leader, or could not reach the registry). */
  start(): Promise<void> {
    if (this.#running) throw new Error('LeaderElection.start() was called twice');
    const first = new Promise<void>((resolve) => {
      this.#firstRound = resolve;
    });
    this.#running = this.#run();
    return first;
  }

  /** Subscribes to role changes; returns the unsubscribe function. */
  onChange(listener: (state: LeaderState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Current state. */
  state(): LeaderState {
    return this.#state;
  }

  /** True while this replica leads. */
  isLeader(): boolean {
    return this.#state.role === 'leader';
  }

  /** The fence of the current leadership, for `backend.withFence`; undefined when not leader. */
  fence(): Fence | undefined {
    return this.#state.fence;
  }

  /**
   * The registry refused a write fenced with `fence`: its leader key is gone or was recreated with
   * another create revision (an etcd restored from a snapshot, a key deleted and put back by hand).
   * When that is the fence of the current leadership, every further write would be refused too:
   * this replica steps down and campaigns again, with a new entry whose fence holds. A refusal of
   * an earlier leadership's fence changes nothing.
   */
  fenceRefused(fence: Fence): void {
    const current = this.#state.fence;
    if (current?.key !== fence.key || current.createRevision !== fence.createRevision) return;
    this.#logger?.warn({group: this.#prefix, key: fence.key}, 'leader election: a write was refused because our election entry was replaced; stepping down to campaign again');
    // At once, as when the session lapses: the term's cycles stop writing what would be refused.
    this.#publish(FOLLOWER);
    this.#session?.abort();
  }

  /** Steps down (followers are told first), resigns so another replica takes over at once, and stops. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      const session = new AbortController();
      this.#session = session;
      const onStop = (): void => session.abort();
      this.#stop.signal.addEventListener('abort', onStop, {once: true});
      let lease: Lease | undefined;
      try {
        await this.#campaign(session, (l) => (lease = l));
      } catch (err) {
        if (!this.#stop.signal.aborted) {
          this.#logger?.warn({group: this.#prefix, err: errorMessage(err)}, 'leader election: session ended; campaigning again');
        }
      } finally {
        this.#stop.signal.removeEventListener('abort', onStop);
        session.abort();
        this.#publish(FOLLOWER);
        this.#firstRound?.();
        if (lease) this.#stale.add(lease);
      }
      if (this.#stop.signal.aborted) break;
      await this.#clock.sleep(this.#retryDelayMs, this.#stop.signal).catch(() => undefined);
    }
    // Resign: revoking the session deletes our entry, so the next replica leads without waiting for the TTL.
    await this.#revokeStale();
  }

  async #campaign(session: AbortController, remember: (lease: Lease) => void): Promise<void> {
    await this.#revokeStale();
    const grantedAt = this.#clock.now();
    const lease = await this.#backend.grantLease(this.#ttlMs);
    remember(lease);
    this.#keepSessionAlive(lease, grantedAt, session);
    const key = `${this.#prefix}${lease.id}`;
    const mine = await this.#backend.put(key, this.#replicaId, {lease});

    let dirty = true;
    let wake: (() => void) | undefined;
    const watcher: Watcher = await this.#backend.watch(
      this.#prefix,
      () => {
        dirty = true;
        wake?.();
      },
      {fromRevision: mine.revision},
    );
    session.signal.addEventListener('abort', () => wake?.(), {once: true});
    try {
      while (!session.signal.aborted) {
        dirty = false;
        const entries = await this.#backend.list(this.#prefix);
        if (session.signal.aborted) break;
        const own = entries.find((e) => e.key === key);
        if (!own) throw new Error(`our election entry ${key} is gone: the session lease expired`);
        // We never write our entry again: another revision means it was deleted and put back (a
        // restore from a snapshot, a hand edit), and a fence on the create revision we won with is
        // refused from now on. Campaign again rather than lead without being able to write.
        if (own.revision !== mine.revision) throw new Error(`our election entry ${key} was written again (revision ${own.revision}, ours ${mine.revision}): our fence no longer holds`);
        const first = oldest(entries);
        if (first?.key === key) {
          this.#publish({role: 'leader', leader: this.#replicaId, fence: {key, createRevision: mine.revision}});
        } else {
          this.#publish({role: 'follower', ...(first ? {leader: first.value} : {})});
        }
        this.#firstRound?.();
        if (!dirty) {
          await new Promise<void>((resolve) => {
            wake = resolve;
            if (dirty || session.signal.aborted) resolve();
          });
          wake = undefined;
        }
      }
    } finally {
      await watcher.close().catch(() => undefined);
    }
  }

  /**
   * Sends a keepalive every TTL/3. The server's lease outlives `sent time of the last acknowledged
   * keepalive + TTL`, so stepping down a little before that moment means two replicas never both
   * believe they lead.
   */
  #keepSessionAlive(lease: Lease, grantedAt: number, session: AbortController): void {
    const interval = Math.max(100, Math.floor(lease.ttlMs / 3));
    const margin = Math.floor(lease.ttlMs / 10);
    let cancelTick: () => void = () => undefined;
    let cancelExpiry: () => void = () => undefined;
    const lose = (): void => {
      if (session.signal.aborted) return;
      this.#logger?.warn({group: this.#prefix, ttlMs: lease.ttlMs}, 'leader election: session not renewed within its TTL; stepping down');
      this.#publish(FOLLOWER);
      session.abort();
    };
    const armExpiry = (ackSentAt: number): void => {
      cancelExpiry();
      cancelExpiry = this.#clock.setTimeout(lose, ackSentAt + lease.ttlMs - margin - this.#clock.now());
    };
    const tick = async (): Promise<void> => {
      const sentAt = this.#clock.now();
      try {
        await this.#backend.keepAlive(lease);
        if (!session.signal.aborted) armExpiry(sentAt);
      } catch (err) {
        this.#logger?.debug({group: this.#prefix, err: errorMessage(err)}, 'leader election: session keepalive failed');
      }
      if (!session.signal.aborted) cancelTick = this.#clock.setTimeout(() => void tick(), interval);
    };
    armExpiry(grantedAt);
    cancelTick = this.#clock.setTimeout(() => void tick(), interval);
    session.signal.addEventListener(
      'abort',
      () => {
        cancelTick();
        cancelExpiry();
      },
      {once: true},
    );
  }

  async #revokeStale(): Promise<void> {
    for (const lease of this.#stale) {
      try {
        // Revoking deletes our entry with the lease; an entry put back by hand without it would
        // stay, the oldest, naming this replica as leader though no session of ours holds it.
        await this.#backend.delete(`${this.#prefix}${lease.id}`);
        await this.#backend.revokeLease(lease);
        this.#stale.delete(lease);
      } catch (err) {
        // It expires on its own; until then the other replicas wait for it.
        this.#logger?.debug({group: this.#prefix, err: errorMessage(err)}, 'leader election: could not revoke an old session');
      }
    }
  }

  #publish(next: LeaderState): void {
    const prev = this.#state;
    if (prev.role === next.role && prev.leader === next.leader && prev.fence?.createRevision === next.fence?.createRevision) return;
    this.#state = next;
    this.#logger?.info({group: this.#prefix, role: next.role, leader: next.leader}, 'leader election: role changed');
    for (const listener of this.#listeners) {
      try {
        listener(next);
      } catch (err) {
        this.#logger?.error({err}, 'leader election: listener threw');
      }
    }
  }
}

/** The entry created first (lowest revision; entries are never rewritten, so mod = create revision). */
function oldest(entries: readonly RegistryItem[]): RegistryItem | undefined {
  let best: RegistryItem | undefined;
  for (const e of entries) if (!best || BigInt(e.revision) < BigInt(best.revision)) best = e;
  return best;
}
