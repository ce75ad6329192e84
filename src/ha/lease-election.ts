/**
 * Leader election per discovery group on a `coordination.k8s.io/v1` Lease, the way Kubernetes
 * controllers do it: the holder renews `renewTime` every retry period; another replica takes the
 * Lease over (acquireTime, leaseTransitions + 1) once it has seen no renewal for
 * leaseDurationSeconds by its own clock. A leader that cannot renew within the renew deadline
 * (shorter than the lease duration) steps down before anyone else can take over, so its writes
 * are fenced by the time a successor writes. A replica that comes to hold the Lease without that
 * wait (it was deleted and created again, restored or edited to name it) leads only one lease
 * duration later, for the same reason. Storage-independent: any registry backend can be fenced by
 * `holds()`.
 */
import {createHash} from 'node:crypto';
import type {Logger} from 'pino';
import type {Clock} from '../core/clock.ts';
import type {KubeClient} from '../registry/kube-client.ts';
import {KubeApiError} from '../registry/kube-client.ts';
import type {LeaderState} from './election.ts';

/** Settings of one Lease election. */
export interface LeaseElectionOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  /** Discovery group: one Lease, one leader per group. */
  readonly group: string;
  /** This replica's id (the pod name in a cluster): the Lease's holderIdentity. */
  readonly identity: string;
  /** leaseDurationSeconds × 1000; default 15 s (client-go's default). */
  readonly leaseDurationMs?: number;
  /** A leader that has not renewed for this long steps down; default 10 s. */
  readonly renewDeadlineMs?: number;
  /** Period of acquire/renew attempts; default 2 s. */
  readonly retryPeriodMs?: number;
  readonly clock: Clock;
  readonly logger?: Logger;
}

/** Label naming the discovery group a Lease elects (KubeServers carry the same one). */
const GROUP_LABEL = 'kube-discovery.io/group';

interface LeaseRecord {
  /** The group it elects, when labelled (Leases written before the label have none). */
  readonly group: string | undefined;
  readonly holder: string;
  readonly durationMs: number;
  readonly transitions: number;
  readonly acquireTime: string | undefined;
  readonly resourceVersion: string;
}

/** Name of the election Lease of a discovery group. */
export function electionLeaseName(group: string): string {
  const safe = group.toLowerCase().replace(/[^a-z0-9.-]+/g, '-').replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  return `kube-discovery-leader-${safe || 'default'}`.slice(0, 253);
}

/**
 * The Lease of a group whose name's Lease is another group's (`prod_eu` and `prod-eu` both map to
 * `kube-discovery-leader-prod-eu`): the name with a digest of the group, which no other group has.
 */
export function electionFallbackLeaseName(group: string): string {
  return `${electionLeaseName(group).slice(0, 243)}-${createHash('sha256').update(group).digest('hex').slice(0, 8)}`;
}

/** Campaigns for a group's Lease until `stop()`. */
export class LeaseElection {
  readonly #o: Required<Omit<LeaseElectionOptions, 'logger'>> & {logger: Logger | undefined};
  readonly #primary: string;
  /** The Lease campaigned on: the group's name, or its fallback once that name is found another group's. */
  #name: string;
  /** Whether the fallback Lease was looked for since this process last used the group's name. */
  #fallbackChecked = false;
  readonly #listeners = new Set<(state: LeaderState) => void>();
  #state: LeaderState = {role: 'follower'};
  /** Last record seen and when (local clock): expiry is judged by observation, not by the holder's clock. */
  #observed: {record: LeaseRecord; at: number} | undefined;
  #lastRenewAt = 0;
  /** resourceVersion of the Lease as this replica last wrote it: another one means someone else wrote it since. */
  #wroteVersion: string | undefined;
  /**
   * Not leading before this time (clock): the Lease came to name this replica without it having seen
   * the previous holder's claim lapse (deleted and recreated, restored naming it), and that holder
   * may lead until its renew deadline.
   */
  #notBefore = Number.NEGATIVE_INFINITY;
  #cancel: (() => void) | undefined;
  #stopped = false;
  #busy = false;
  #round: Promise<void> = Promise.resolve();

  constructor(options: LeaseElectionOptions) {
    const leaseDurationMs = options.leaseDurationMs ?? 15_000;
    const renewDeadlineMs = options.renewDeadlineMs ?? Math.round((leaseDurationMs * 2) / 3);
    const retryPeriodMs = options.retryPeriodMs ?? Math.max(200, Math.round(leaseDurationMs / 7.5));
    if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > retryPeriodMs && retryPeriodMs > 0)) {
      throw new RangeError(`Expected leaseDurationMs > renewDeadlineMs > retryPeriodMs > 0, got ${leaseDurationMs}, ${renewDeadlineMs}, ${retryPeriodMs}`);
    }
    this.#o = {...options, leaseDurationMs, renewDeadlineMs, retryPeriodMs, logger: options.logger};
    this.#primary = electionLeaseName(options.group);
    this.#name = this.#primary;
  }

  /** Name of the Lease object. */
  get leaseName(): string {
    return this.#name;
  }

  /** Starts; resolves once the first attempt settled. */
  async start(): Promise<void> {
    await this.#attempt();
    this.#schedule();
  }

  /** The current state; `fence` names the Lease and the transition this replica won. */
  state(): LeaderState {
    return this.#state;
  }

  /** Calls `listener` on every role or leader change; returns the unsubscribe function. */
  onChange(listener: (state: LeaderState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** True while this replica leads and renewed within the renew deadline: what fenced writes check. */
  holds(): boolean {
    return this.#state.role === 'leader' && this.#o.clock.now() - this.#lastRenewAt < this.#o.renewDeadlineMs;
  }

  /** Stops campaigning; a leader releases the Lease so a successor need not wait out the duration. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancel?.();
    await this.#round;
    if (this.#state.role !== 'leader') return;
    this.#set({role: 'follower'});
    const seen = this.#observed?.record;
    if (!seen) return;
    try {
      await this.#o.client.request({
        method: 'PUT',
        path: this.#path(this.#name),
        body: this.#lease({...seen, holder: ''}, this.#o.clock.now(), 1),
        priority: 10,
      });
    } catch (err) {
      this.#o.logger?.warn({err, lease: this.#name}, 'could not release the leader Lease; the next leader waits for it to expire');
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.setTimeout(() => {
      this.#schedule();
      // A renewal hanging in the API server must not keep a leader leading past its deadline.
      if (this.#state.role === 'leader' && !this.holds()) this.#set({role: 'follower'});
      if (this.#busy) return;
      this.#busy = true;
      this.#round = this.#attempt().finally(() => {
        this.#busy = false;
      });
    }, this.#o.retryPeriodMs);
  }

  #path(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#o.namespace)}/leases`;
    return name === undefined ? base : `${base}/${name}`;
  }

  #lease(record: LeaseRecord, now: number, durationSeconds = Math.ceil(this.#o.leaseDurationMs / 1000)): Record<string, unknown> {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {name: this.#name, resourceVersion: record.resourceVersion, labels: {'app.kubernetes.io/name': 'kube-discovery', [GROUP_LABEL]: this.#o.group}},
      spec: {
        holderIdentity: record.holder,
        leaseDurationSeconds: durationSeconds,
        ...(record.acquireTime === undefined ? {} : {acquireTime: record.acquireTime}),
        renewTime: microTime(now),
        leaseTransitions: record.transitions,
      },
    };
  }

  async #attempt(): Promise<void> {
    if (this.#stopped) return;
    const now = this.#o.clock.now();
    try {
      const current = await this.#readOwn();
      // Renewed by us within a lease duration: no other replica can have waited our claim out and led.
      const recent = this.#wroteVersion !== undefined && now - this.#lastRenewAt < this.#o.leaseDurationMs;
      // Else a Lease gone, or naming us in a version we did not write, was not won by waiting: the last
      // holder we saw before this reading (or one we missed) may have renewed it right before, and lead
      // until its renew deadline. A replica that never saw this Lease (its first start) has nobody to wait for.
      const rival = recent ? undefined : this.#observed?.record;
      if (current === undefined) {
        const created = parseRecord(await this.#o.client.request({
          method: 'POST',
          path: this.#path(),
          body: this.#lease({group: this.#o.group, holder: this.#o.identity, durationMs: this.#o.leaseDurationMs, transitions: 0, acquireTime: microTime(now), resourceVersion: ''}, now),
          priority: 10,
        }), this.#o.leaseDurationMs);
        this.#won(created, now, rival);
        return;
      }
      if (this.#observed?.record.resourceVersion !== current.resourceVersion) this.#observed = {record: current, at: now};
      if (current.holder === this.#o.identity) {
        const renewed = parseRecord(await this.#o.client.request({method: 'PUT', path: this.#path(this.#name), body: this.#lease(current, now), priority: 10}), this.#o.leaseDurationMs);
        this.#won(renewed, now, current.resourceVersion === this.#wroteVersion ? undefined : rival);
        return;
      }
      const seenAt = this.#observed?.at ?? now;
      // Released (holderIdentity ''), it is free at once only with no rival to wait for (as above);
      // else once its duration passed since we saw it so: our own release gives it 1 s, a hand edit
      // may have released it under a leader that still writes.
      const free = seenAt + current.durationMs <= now || (current.holder === '' && rival === undefined);
      if (!free) {
        this.#set({role: 'follower', leader: current.holder});
        return;
      }
      const taken = parseRecord(await this.#o.client.request({
        method: 'PUT',
        path: this.#path(this.#name),
        body: this.#lease({...current, holder: this.#o.identity, transitions: current.transitions + 1, acquireTime: microTime(now)}, now),
        priority: 10,
      }), this.#o.leaseDurationMs);
      this.#won(taken, now);
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409) {
        // Someone else wrote the Lease first (renewed or took it over): follow them next round.
        this.#set({role: 'follower', ...(this.#observed ? {leader: this.#observed.record.holder} : {})});
        return;
      }
      this.#o.logger?.warn({err, lease: this.#name}, 'leader Lease attempt failed');
      // A leader that cannot renew in time steps down before a successor could take over.
      if (this.#state.role === 'leader' && !this.holds()) this.#set({role: 'follower'});
      else if (this.#state.role === 'follower') this.#set({role: 'follower'});
    }
  }

  /** Records a successful write of the Lease; `previous`: the claim seen before it, whose holder may still lead. */
  #won(record: LeaseRecord, now: number, previous?: LeaseRecord): void {
    this.#observed = {record, at: now};
    this.#lastRenewAt = now;
    this.#wroteVersion = record.resourceVersion;
    if (previous !== undefined) {
      // From the answer on: the previous holder's last renewal was sent before our write landed.
      const until = this.#o.clock.now() + Math.max(previous.durationMs, this.#o.leaseDurationMs);
      if (until > this.#notBefore) this.#notBefore = until;
      this.#o.logger?.warn({lease: this.#name, previous: previous.holder, waitMs: until - now}, 'the leader Lease was recreated or rewritten naming this replica; leading once its previous holder must have stepped down');
    }
    if (this.#o.clock.now() < this.#notBefore) {
      this.#set({role: 'follower'});
      return;
    }
    this.#set({role: 'leader', leader: this.#o.identity, fence: {key: this.#name, createRevision: String(record.transitions)}});
  }

  #set(next: LeaderState): void {
    const prev = this.#state;
    this.#state = next;
    if (prev.role === next.role && prev.leader === next.leader && prev.fence?.createRevision === next.fence?.createRevision) return;
    if (next.role !== prev.role) this.#o.logger?.info({lease: this.#name, role: next.role, leader: next.leader}, `discovery group leadership: ${next.role}`);
    for (const listener of this.#listeners) listener(next);
  }

  /**
   * This group's Lease. Under the group's name unless that Lease elects another group, or the
   * fallback exists (another replica of the group moved there): then under the fallback, for good.
   * The fallback is looked for on the first reading and whenever the group's name has no Lease, so
   * a replica never creates one while the group campaigns on the other.
   */
  async #readOwn(): Promise<LeaseRecord | undefined> {
    if (this.#name !== this.#primary) return this.#read();
    const primary = await this.#read();
    const taken = primary?.group !== undefined && primary.group !== this.#o.group;
    if (!taken && primary !== undefined && this.#fallbackChecked) return primary;
    this.#fallbackChecked = true;
    this.#name = electionFallbackLeaseName(this.#o.group);
    const fallback = await this.#read().catch((err: unknown) => {
      this.#name = this.#primary;
      throw err;
    });
    if (!taken && fallback === undefined) {
      this.#name = this.#primary;
      return primary;
    }
    this.#o.logger?.warn({lease: this.#primary, group: primary?.group, fallback: this.#name}, 'the leader Lease of this discovery group\'s name elects another group; campaigning on a Lease of its own');
    // What was seen and written concerns the other Lease: this one is judged afresh.
    this.#observed = undefined;
    this.#wroteVersion = undefined;
    return fallback;
  }

  async #read(): Promise<LeaseRecord | undefined> {
    try {
      return parseRecord(await this.#o.client.request({method: 'GET', path: this.#path(this.#name), priority: 10}), this.#o.leaseDurationMs);
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }
}

function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

/**
 * The Lease as the election reads it. Its spec fields are optional to the API server: a Lease applied
 * without leaseDurationSeconds (a manifest, a hand edit) is judged with ours, `defaultDurationMs`, and
 * gets it back with the holder's next renewal; failing it would leave the group without a leader.
 */
function parseRecord(answer: unknown, defaultDurationMs: number): LeaseRecord {
  const obj = answer as {metadata?: {resourceVersion?: unknown}; spec?: {holderIdentity?: unknown; leaseDurationSeconds?: unknown; leaseTransitions?: unknown; acquireTime?: unknown}} | undefined;
  const rv = obj?.metadata?.resourceVersion;
  const group = (obj?.metadata as {labels?: Record<string, unknown>} | undefined)?.labels?.[GROUP_LABEL];
  const given = obj?.spec?.leaseDurationSeconds;
  const duration = given === undefined || given === null ? defaultDurationMs / 1000 : given;
  if (typeof rv !== 'string' || typeof duration !== 'number' || !(duration > 0)) {
    throw new Error('malformed Lease from the API server: expected metadata.resourceVersion and a positive spec.leaseDurationSeconds');
  }
  const transitions = obj?.spec?.leaseTransitions;
  const holder = obj?.spec?.holderIdentity;
  const acquire = obj?.spec?.acquireTime;
  return {
    group: typeof group === 'string' && group !== '' ? group : undefined,
    holder: typeof holder === 'string' ? holder : '',
    durationMs: duration * 1000,
    transitions: typeof transitions === 'number' ? transitions : 0,
    acquireTime: typeof acquire === 'string' ? acquire : undefined,
    resourceVersion: rv,
  };
}
