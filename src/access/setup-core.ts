/**
 * What the EKS and AKS access set-up steps share: the registry view of the run in progress, the
 * per-cluster records of what a step created (so deregistration cleans it up, after a restart
 * too), the fingerprint cache that spares an unchanged cluster its calls, the health notes, and
 * one cycle's round of set-up and clean-up. What a step creates, and how, stays in its own file.
 */
import {AsyncLocalStorage} from 'node:async_hooks';
import PQueue from 'p-queue';
import type {Clock} from '../core/clock.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {PlanItem} from '../discovery/reconcile.ts';
import type {RegistryBackend} from '../registry/backend.ts';

/** Every outcome counted in `kube_discovery_access_setup_total{outcome}`. */
export const SETUP_OUTCOMES = [
  'configured', 'unchanged', 'cached', 'config_map', 'foreign_entry', 'not_ready', 'failed', 'removed', 'cleanup_failed', 'repaired', 'repair_failed',
] as const;
/** One bounded outcome of set-up, cleanup or repair. */
export type SetupOutcome = (typeof SETUP_OUTCOMES)[number];

/** How often a cluster already set up is checked again (reads only) even when nothing about it changed. */
export const FULL_REFRESH_MS = 60 * 60_000;

/** The log calls the step makes (a pino logger fits). */
export interface SetupLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The registry calls a step makes. */
export type SetupRegistry = Pick<RegistryBackend, 'get' | 'list' | 'put' | 'delete'>;

/** A cluster a step wants set up this cycle. */
export interface SetupWanted {
  /** Its kube_server name: the key of its record, cache entry and note. */
  readonly server: string;
  /** Its cloud name, for messages. */
  readonly cluster: string;
}

/** Options of createSetupCore. */
export interface SetupCoreOptions {
  readonly clock: Clock;
  /** The registry a run writes to unless `run` is given the leader's (fenced) view. */
  readonly backend: RegistryBackend;
  readonly logger: SetupLogger;
  /** Registry key prefix of the step's records, one per kube_server name. */
  readonly recordPrefix: string;
  /** The step's name in log lines, e.g. `AKS access set-up`. */
  readonly label: string;
  /** What a record stands for, in the log line of a failed cleanup, e.g. `role assignment`. */
  readonly created: string;
  readonly concurrency: number;
  readonly fullRefreshMs?: number | undefined;
  /** Counts outcomes (metrics). */
  readonly onOutcome?: ((outcome: SetupOutcome) => void) | undefined;
}

/** One cycle of a step: what it wants set up and how it sets up and cleans up one cluster. */
export interface SetupCycle<W extends SetupWanted> {
  readonly wanted: readonly W[];
  readonly setUp: (wanted: W, signal: AbortSignal) => Promise<SetupOutcome>;
  /** Cleans up after deregistered `server`; see SetupCore.cleanUp. */
  readonly cleanUp: (server: string, signal: AbortSignal) => Promise<SetupOutcome | undefined>;
}

/** The state a step keeps between cycles, and its cycle loop. */
export interface SetupCore<N> {
  /** Registry calls, sent to the view of the run in progress. */
  readonly registry: SetupRegistry;
  /** What each cluster's health message should add, by kube_server name. */
  readonly notes: Map<string, N>;
  count(outcome: SetupOutcome): void;
  /** Whether `server` was set up as `fingerprint` says less than the refresh period ago. */
  fresh(server: string, fingerprint: string): boolean;
  /** Remembers that `server` is set up as `fingerprint` says. */
  remember(server: string, fingerprint: string): void;
  /** Whether the registry holds a record for `server`. */
  hasRecord(server: string): Promise<boolean>;
  /** Records what the step created for `server`, before or right after creating it. */
  writeRecord(server: string, record: object): Promise<void>;
  /**
   * Cleans up after deregistered `server`: unless what its record names is still in use (`live`:
   * renamed, or registered under another name), `remove` deletes it and says whether it did; the
   * record goes either way. Returns the record when something was removed.
   */
  cleanUp<R>(server: string, live: (record: R) => boolean, remove: (record: R) => Promise<boolean>): Promise<R | undefined>;
  /**
   * Runs one cycle through `registry` (the leader's fenced view; the step's backend without one):
   * `cycle` says what to do, then every wanted cluster is set up and every record whose kube_server
   * is no longer registered is cleaned up. Never throws; `noteOf` turns a set-up failure into a note.
   */
  run<W extends SetupWanted>(report: CycleReport, signal: AbortSignal, registry: RegistryBackend | undefined, noteOf: (error: unknown) => N, cycle: () => Promise<SetupCycle<W>>): Promise<void>;
}

/** Builds the shared part of a step. */
export function createSetupCore<N>(options: SetupCoreOptions): SetupCore<N> {
  const {clock, logger, recordPrefix, label} = options;
  // Registry calls go to the view of the run in progress (a leader's fenced view, `run`'s `registry`):
  // a run of a deposed term keeps its own view, whose writes are refused, even while a later term runs.
  const runRegistry = new AsyncLocalStorage<RegistryBackend>();
  const registry: SetupRegistry = {
    get: (key) => (runRegistry.getStore() ?? options.backend).get(key),
    list: (prefix) => (runRegistry.getStore() ?? options.backend).list(prefix),
    put: (key, value) => (runRegistry.getStore() ?? options.backend).put(key, value),
    delete: (key) => (runRegistry.getStore() ?? options.backend).delete(key),
  };
  const refreshMs = options.fullRefreshMs ?? FULL_REFRESH_MS;
  const cache = new Map<string, {fingerprint: string; at: number}>();
  const notes = new Map<string, N>();
  const count = (outcome: SetupOutcome): void => options.onOutcome?.(outcome);

  return {
    registry,
    notes,
    count,
    fresh(server, fingerprint) {
      const cached = cache.get(server);
      return cached?.fingerprint === fingerprint && clock.now() - cached.at < refreshMs;
    },
    remember(server, fingerprint) {
      cache.set(server, {fingerprint, at: clock.now()});
    },
    async hasRecord(server) {
      return (await registry.get(`${recordPrefix}${server}`)) !== undefined;
    },
    async writeRecord(server, record) {
      await registry.put(`${recordPrefix}${server}`, JSON.stringify(record));
    },
    async cleanUp<R>(server: string, live: (record: R) => boolean, remove: (record: R) => Promise<boolean>) {
      const key = `${recordPrefix}${server}`;
      const item = await registry.get(key);
      notes.delete(server);
      if (!item) return undefined;
      const record = JSON.parse(item.value) as R;
      const removed = !live(record) && (await remove(record));
      await registry.delete(key);
      return removed ? record : undefined;
    },
    run(report, signal, view, noteOf, cycle) {
      return runRegistry.run(view ?? options.backend, async () => {
        try {
          const {wanted, setUp, cleanUp} = await cycle();
          const records = (await registry.list(recordPrefix)).map((item) => item.key.slice(recordPrefix.length));
          // Stale entries stay registered (their source failed): never clean up after them. Built only
          // when there is something to check against it: with no set-up records and nothing cached (no
          // matcher sets access up) a set of every plan item's name was built per step per cycle for nothing.
          let registered: Set<string> | undefined;
          const isRegistered = (name: string): boolean => (registered ??= new Set(report.items.filter((i) => i.action !== 'delete' && i.action !== 'skip').map((i) => i.name))).has(name);
          for (const name of [...cache.keys()]) if (!isRegistered(name)) cache.delete(name);
          await runSetupRound({
            concurrency: options.concurrency,
            signal,
            wanted,
            setUp,
            onSetUpError: (w, error) => {
              cache.delete(w.server);
              notes.set(w.server, noteOf(error));
              count('failed');
              logger.warn({event: 'access_setup', kube_server: w.server, err: error}, `${label} for cluster ${w.cluster} failed; it stays registered and is retried next cycle`);
            },
            // Records of names no longer registered: deregistered this cycle, or earlier by a run that could not finish.
            deregistered: records.filter((name) => !isRegistered(name)),
            cleanUp,
            onCleanUpError: (name, error) => {
              count('cleanup_failed');
              logger.warn({event: 'access_setup', kube_server: name, err: error}, `could not delete the ${options.created} of deregistered ${name}; retrying next cycle`);
            },
            count,
          });
        } catch (error) {
          // The registry could not be read or written: set-up waits for the next cycle; registration is untouched.
          logger.warn({event: 'access_setup', err: error}, `${label} skipped this cycle`);
        }
      });
    },
  };
}

/** This cycle's registered clusters (created, updated or unchanged) found by a `cloud` matcher, with that matcher's index. */
export function registeredByMatcher(report: CycleReport, cloud: 'AWS' | 'Azure'): {readonly item: PlanItem; readonly matcherIndex: number}[] {
  const matcherOf = new Map(report.results.filter((r) => r.source.cloud === cloud).map((r) => [r.source.id, r.source.matcherIndex]));
  const out: {item: PlanItem; matcherIndex: number}[] = [];
  for (const item of report.items) {
    if (item.action !== 'create' && item.action !== 'update' && item.action !== 'unchanged') continue;
    const matcherIndex = matcherOf.get(item.source);
    if (matcherIndex !== undefined) out.push({item, matcherIndex});
  }
  return out;
}

/** What one round of a set-up step does; see runSetupRound. */
interface SetupRound<W> {
  readonly concurrency: number;
  readonly signal: AbortSignal;
  readonly wanted: readonly W[];
  readonly setUp: (wanted: W, signal: AbortSignal) => Promise<SetupOutcome>;
  readonly onSetUpError: (wanted: W, error: unknown) => void;
  readonly deregistered: readonly string[];
  readonly cleanUp: (name: string, signal: AbortSignal) => Promise<SetupOutcome | undefined>;
  readonly onCleanUpError: (name: string, error: unknown) => void;
  readonly count: (outcome: SetupOutcome) => void;
}

/**
 * One round of an access set-up step (EKS or AKS): sets up the wanted clusters and cleans up after
 * deregistered ones, `concurrency` calls at a time; one cluster's failure never stops the others.
 */
async function runSetupRound<W>(round: SetupRound<W>): Promise<void> {
  const queue = new PQueue({concurrency: round.concurrency});
  await Promise.all([
    ...round.wanted.map((w) =>
      queue.add(async () => {
        if (round.signal.aborted) return;
        try {
          round.count(await round.setUp(w, round.signal));
        } catch (error) {
          round.onSetUpError(w, error);
        }
      }),
    ),
    ...round.deregistered.map((name) =>
      queue.add(async () => {
        try {
          const outcome = await round.cleanUp(name, round.signal);
          if (outcome) round.count(outcome);
        } catch (error) {
          round.onCleanUpError(name, error);
        }
      }),
    ),
  ]);
}
