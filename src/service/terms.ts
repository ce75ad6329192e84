/**
 * Leadership terms: what this replica runs only while it leads its discovery group (a heartbeat
 * on its own lease, the cycle scheduler, DiscoveryConfig resources on storage kubernetes). Role
 * changes arrive from the election; each is applied after the previous one, in order.
 */
import type {Clock} from '../core/clock.ts';
import type {Config} from '../config/schema.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {Logger} from '../observability/logger.ts';
import type {Metrics} from '../observability/metrics.ts';
import type {RegistryBackend} from '../registry/backend.ts';
import type {Scheduler} from '../scheduler/scheduler.ts';
import type {Role} from './leadership.ts';
import {reannounce} from './reannounce.ts';
import type {Runtime, Writer} from './runtime.ts';
import {claimWriter, releaseWriter, type HeldClaim} from './writer-claim.ts';

// Pause before a leader that failed to take over tries again.
const TERM_RETRY_MS = 5_000;

/** One leadership term: the heartbeat and the scheduler that only a leader runs. */
interface Term {
  readonly writer: Writer;
  readonly scheduler: Scheduler;
  /** storage kubernetes: DiscoveryConfig resources, reconciled while leading. */
  dynamic?: {start(): void; stop(): void};
  /** Embedded registries: this term's writer record, removed when the term ends. */
  claim?: HeldClaim;
  /** Stops writing the record again onto each replacement lease. */
  unclaim?: () => void;
}

/** What LeadershipTerms needs from the service. */
export interface LeadershipTermsOptions {
  readonly config: Config;
  readonly runtime: Runtime;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'setLeader'>;
  /** The scheduler of a term, running cycles through its writer. */
  readonly makeScheduler: (writer: Writer) => Scheduler;
  /** Resolves with the report of the next completed cycle. */
  readonly nextCycle: () => Promise<CycleReport>;
}

/** Begins a term when this replica becomes leader and ends it when it stops leading. */
export class LeadershipTerms {
  readonly #options: LeadershipTermsOptions;
  #term: Term | undefined;
  #transitions: Promise<void> = Promise.resolve();
  #role: Role = {role: 'follower'};
  #stopping = false;
  #failures = 0;
  // Stops a leader waiting for its first DiscoveryConfig list when the service stops.
  readonly #priming = new AbortController();

  constructor(options: LeadershipTermsOptions) {
    this.#options = options;
  }

  /** The last role the election reported. */
  get role(): Role {
    return this.#role;
  }

  /** The running term's scheduler; undefined while not leading (or while a term is starting). */
  get scheduler(): Scheduler | undefined {
    return this.#term?.scheduler;
  }

  /** The election's callback: records the role and queues beginning or ending a term. */
  readonly onRole = (next: Role): void => {
    const {metrics, log} = this.#options;
    this.#role = next;
    metrics.setLeader(next.role === 'leader');
    log.info({role: next.role, ...(next.role === 'follower' && next.leader ? {leader: next.leader} : {})}, next.role === 'leader' ? 'leading discovery group' : 'following');
    this.#transitions = this.#transitions
      .then(async () => {
        if (this.#stopping) return;
        // A deposed leader stops at once: its writes would be fenced anyway.
        if (next.role === 'leader') await this.#begin(next.backend);
        else await this.#end(0, false);
      })
      .catch((error: unknown) => log.error({err: error}, 'could not change role'));
  };

  /** Applies no further role changes and ends the running term (cycles get `graceMs` to finish). */
  async stop(graceMs: number, deregister: boolean): Promise<void> {
    this.#stopping = true;
    this.#priming.abort();
    await this.#transitions;
    await this.#end(graceMs, deregister);
  }

  async #begin(backend: RegistryBackend): Promise<void> {
    const {config, runtime, clock, log} = this.#options;
    const group = config.discovery_service.discovery_group;
    let writer: Writer | undefined;
    try {
      writer = await runtime.openWriter(backend);
      // Move every entry onto our own lease before the previous leader's lease can lapse.
      const moved = await reannounce(writer);
      if (moved > 0) log.info({entries: moved}, 'took over the registry entries of the previous leader');
    } catch (error) {
      // A leader that cannot write must not sit idle while the old lease lapses: clean up and try again.
      await writer?.heartbeat.stop({deregister: false}).catch(() => undefined);
      // Once per streak: the registry health already logs the backend's state changes.
      log[this.#failures++ === 0 ? 'error' : 'debug']({err: error, retry_in_ms: TERM_RETRY_MS, attempts: this.#failures}, 'could not take over as leader; retrying');
      clock.setTimeout(() => {
        if (!this.#stopping && !this.#term && this.#role.role === 'leader') this.onRole(this.#role);
      }, TERM_RETRY_MS);
      return;
    }
    // On an embedded registry, say who writes: `once` refuses to take over a running service's lease.
    // Etcd and Kubernetes elect a leader; only the embedded registries need a writer record (on Kubernetes it would show up as a KubeServer).
    let claim: HeldClaim | undefined;
    if ((config.storage.type === 'sqlite' || config.storage.type === 'memory') && writer.heartbeat.lease) {
      claim = await claimWriter(backend, group, writer.heartbeat.lease, runtime.replica, clock.now()).catch((error: unknown) => {
        log.warn({err: error}, 'could not record this process as the registry writer');
        return undefined;
      });
    }
    if (this.#failures > 0) log.info({attempts: this.#failures}, 'took over as leader after failed attempts');
    this.#failures = 0;
    const scheduler = this.#options.makeScheduler(writer);
    const begun: Term = {writer, scheduler, ...(claim ? {claim} : {})};
    if (claim) {
      // The record hangs on the heartbeat's lease; one that replaces a lost lease carries it again,
      // or `once` would find no writer and take over the entries of this running service.
      begun.unclaim = writer.heartbeat.onLeaseReplaced(async (lease) => {
        const again = await claimWriter(backend, group, lease, runtime.replica, clock.now()).catch((error: unknown) => {
          log.warn({err: error}, 'could not record this process as the registry writer on its new lease');
          return undefined;
        });
        if (again && this.#term === begun) begun.claim = again;
      });
    }
    if (config.storage.type === 'kubernetes') {
      // DiscoveryConfig matchers are applied before the first cycle, which must not deregister their clusters.
      const {startDiscoveryConfigs} = await import('./kube-dynamic.ts');
      begun.dynamic = await startDiscoveryConfigs({
        runtime,
        clock,
        log,
        signal: this.#priming.signal,
        runCycle: () => {
          const next = this.#options.nextCycle();
          scheduler.trigger();
          return next;
        },
      });
    }
    this.#term = begun;
    scheduler.start();
    begun.dynamic?.start();
  }

  async #end(graceMs: number, deregister: boolean): Promise<void> {
    const {runtime, log} = this.#options;
    const ending = this.#term;
    this.#term = undefined;
    if (!ending) return;
    ending.dynamic?.stop();
    await ending.scheduler.stop(graceMs);
    ending.unclaim?.();
    if (ending.claim) await releaseWriter(runtime.backend, ending.claim).catch(() => undefined);
    await ending.writer.heartbeat.stop({deregister}).catch((error: unknown) => log.warn({err: error}, 'heartbeat did not stop cleanly'));
  }
}
