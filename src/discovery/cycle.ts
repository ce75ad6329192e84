/** One discovery cycle: plan sources, fetch them concurrently, evaluate, reconcile, apply. */
import {statusWith, type KubeServer, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import type {TagMatcher} from '../../matchers/index.ts';
import type {ClusterFetcher, PlanContext, PlannedSources} from '../clouds/fetcher.ts';
import type {Clock} from '../core/clock.ts';
import type {SourceRef, SourceResult} from '../core/types.ts';
import {evaluate, registeredIdentity, type EvaluateContext} from './evaluate.ts';
import {decidePending, settleUnchanged, sortPlanItems, stagePlan, type Action, type PendingItem, type PlanItem, type StagedPlan} from './reconcile.ts';
import {respellResourceGroups} from './respell.ts';
import {builtInClouds} from '../clouds/index.ts';
import {errorMessage} from '../core/errors.ts';
import {compareText} from '../core/collate.ts';
import type {DiscoveryEvents} from './events.ts';

/** Registry writes of a cycle in flight at once. */
const APPLY_CONCURRENCY = 64;

/** Where sources come from (one planner per cloud). */
export interface SourcePlanner {
  /** `context` reads the registry lazily (see PlanContext); a planner that needs none ignores it. */
  plan(context?: PlanContext): Promise<PlannedSources>;
  /**
   * The source reported as failed when planning itself fails or outlives the cycle deadline
   * (an STS or subscription call that drips): it must cover every entry the planner's
   * sources could, so nothing of that cloud is deleted.
   */
  readonly coversAll?: SourceRef;
}

/** Applies a plan to the registry (the heartbeat implements it). */
export interface Registrar {
  /** Current entries of this discovery group. */
  current(): Promise<KubeServer[]>;
  /**
   * `registryDiffers`: the registry's copy (as `current()` read it) differs from `server` (a create
   * or an update), so it must be written even when the writer believes its own copy is stored: an
   * edit by someone else on the writer's lease (kubectl edit, etcdctl put --lease) is not its own.
   */
  announce(server: KubeServerDraft, options?: AnnounceOptions): Promise<unknown>;
  remove(name: string): Promise<unknown>;
}

/** How an announce is made (see `Registrar.announce`). */
export interface AnnounceOptions {
  readonly registryDiffers?: boolean;
}

/** Per-source outcome of a cycle, as printed by `once` and served by /v1/status. */
export interface SourceReport {
  readonly id: string;
  readonly cloud: string;
  readonly region: string;
  readonly account: string;
  readonly ok: boolean;
  readonly clusters: number;
  readonly skipped?: string;
  readonly error?: SourceResult['error'];
}

/** The overall result of a cycle. */
export type CycleResult = 'success' | 'partial' | 'failure';

/** Everything a cycle did. */
export interface CycleReport {
  readonly startedAt: number;
  readonly durationMs: number;
  readonly result: CycleResult;
  readonly sources: readonly SourceReport[];
  readonly items: readonly PlanItem[];
  readonly counts: Readonly<Record<Action, number>>;
  readonly notes: readonly string[];
  /** Writes that failed after retries (the entry is retried next cycle). */
  readonly applyErrors: readonly {name: string; action: Action; message: string}[];
  /** The source results themselves (for probes and status). */
  readonly results: readonly SourceResult[];
  /** Some sources were still running at the cycle deadline and were cut off (an overrun). */
  readonly deadlineExceeded?: boolean;
}

/** Dependencies of a cycle. */
export interface CycleOptions {
  readonly planners: readonly SourcePlanner[];
  readonly registrar: Registrar;
  readonly clock: Clock;
  readonly discoveryGroup: string;
  readonly evaluateContext: Omit<EvaluateContext, 'discoveryGroup' | 'matcherFor'>;
  readonly matcherFor: (source: SourceRef) => TagMatcher;
  /** Global bound on sources fetched at once. */
  readonly sourceConcurrency: number;
  readonly signal?: AbortSignal;
  /**
   * Longest the sources may run (ms, on `clock`). Sources still running then fail as `timeout`
   * and the cycle reconciles with the rest, reporting `deadlineExceeded`.
   */
  readonly deadlineMs?: number;
  /** Told when each source finishes (logs and metrics). */
  readonly events?: Pick<DiscoveryEvents, 'sourceDone'>;
}

/** Runs one cycle. Never throws for cloud errors; throws only when the registry cannot be read. */
export async function runCycle(options: CycleOptions): Promise<CycleReport> {
  const {clock} = options;
  const startedAt = clock.now();
  const signal = options.signal ?? new AbortController().signal;
  // The deadline cuts off planning and sources only; a shutdown (`signal`) still aborts the whole cycle below.
  const deadline = new AbortController();
  const deadlineMs = options.deadlineMs;
  const cancelDeadline =
    deadlineMs !== undefined && deadlineMs > 0
      ? clock.setTimeout(() => deadline.abort(Object.assign(new Error(`cycle deadline of ${deadlineMs} ms reached before this source answered`), {name: 'TimeoutError'})), deadlineMs)
      : () => undefined;
  const fetchSignal = AbortSignal.any([signal, deadline.signal]);
  // The registry is read for planning only if a planner asks (the first walk of a new process, a
  // region list that dropped a region), once, and let go before the sources run.
  let registered: Promise<readonly KubeServer[]> | undefined;
  const context: PlanContext = {
    registered: () => (registered ??= options.registrar.current()),
    signal: fetchSignal,
    sourceConcurrency: Math.max(1, options.sourceConcurrency),
    now: () => clock.now(),
  };
  const planned = await Promise.all(options.planners.map((p) => planSafely(p, fetchSignal, context)));
  registered = undefined;
  const fetchers = planned.flatMap((p) => p.fetchers);
  const results: SourceResult[] = planned.flatMap((p) => p.failed);
  for (const failed of results) options.events?.sourceDone?.(failed, 0);

  // One listener on the cycle's signal tells every running source: one listener per source made
  // each add and remove scan the signal's list (~3 % of an organization cycle's CPU).
  const running = new Set<() => void>();
  const abortRunning = (): void => {
    for (const abort of running) abort();
  };
  fetchSignal.addEventListener('abort', abortRunning, {once: true});
  try {
    // A fixed set of workers takes the sources in order: queueing every source up front (a task,
    // its promise and closures each) held ~16 MB through an organization's cycle of 16,677 sources.
    await boundedEach(fetchers.length, Math.max(1, options.sourceConcurrency), async (i) => {
      const fetcher = fetchers[i] as ClusterFetcher;
      const asked = clock.now();
      const result = await fetchSafely(fetcher, fetchSignal, running);
      results.push(result);
      // A listing started early (while its plan's walk ran) began before the cycle asked for it.
      const began = Math.min(asked, fetcher.startedAt?.() ?? asked);
      options.events?.sourceDone?.(result, clock.now() - began);
    });
  } finally {
    cancelDeadline();
    fetchSignal.removeEventListener('abort', abortRunning);
  }

  // A cycle cut short (shutdown, lost leadership) must not publish what its aborted sources "found".
  signal.throwIfAborted();
  const {staged, notes} = stageCycle(await options.registrar.current(), results, options);
  const discoveredAt = new Date(startedAt).toISOString();

  const applyErrors: {name: string; action: Action; message: string}[] = [];
  const write = async (item: PlanItem): Promise<PlanItem> => {
    if (item.action !== 'delete' && !item.server) return item;
    try {
      if (item.action === 'delete') {
        await options.registrar.remove(item.name);
        return item;
      }
      const differs = item.action === 'create' || item.action === 'update';
      const stored = storedCopy(await options.registrar.announce(item.server as KubeServerDraft, differs ? REGISTRY_DIFFERS : undefined), item.name);
      // The registrar's stored copy shares the registered document: keep it, not a draft of the same.
      return stored ? {...item, server: stored} : item;
    } catch (error) {
      applyErrors.push({name: item.name, action: item.action, message: errorMessage(error)});
      return item;
    }
  };
  // Listed clusters are decided (their document built and compared) just before their write, a
  // bounded number at a time: holding a draft of each of 50,000 clusters at once (plus the plan's
  // copies) was most of a cycle's peak memory.
  const decidedPending: PlanItem[] = new Array<PlanItem>(staged.pending.length);
  await boundedEach(staged.pending.length, APPLY_CONCURRENCY, async (i) => {
    const pending = staged.pending[i] as PendingItem;
    const item = withDiscoveredAt(decidePending(pending), discoveredAt);
    const written = await write(item);
    decidedPending[i] = written;
    // Announced (the write answered with the stored document): an unchanged decision keeps the registered entry as its document.
    if (written !== item) settleUnchanged(pending, item);
  });
  const decided = [...staged.decided];
  // A renamed entry goes only after its new name is announced: readers never see the cluster missing.
  await boundedEach(decided.length, APPLY_CONCURRENCY, async (i) => {
    const item = decided[i] as PlanItem;
    if (item.renamedTo === undefined) decided[i] = await write(item);
  });
  const failedNames = new Set(applyErrors.map((e) => e.name));
  await boundedEach(decided.length, APPLY_CONCURRENCY, async (i) => {
    const item = decided[i] as PlanItem;
    if (item.renamedTo !== undefined && !failedNames.has(item.renamedTo)) decided[i] = await write(item);
  });
  const plan = {items: sortPlanItems([...decidedPending, ...decided])};

  const counts: Record<Action, number> = {create: 0, update: 0, delete: 0, unchanged: 0, stale: 0, skip: 0};
  for (const item of plan.items) counts[item.action]++;
  const failedSources = results.filter((r) => !r.ok).length;
  const result: CycleResult =
    failedSources === 0 && applyErrors.length === 0 ? 'success' : failedSources === results.length && results.length > 0 ? 'failure' : 'partial';
  return {
    startedAt,
    durationMs: clock.now() - startedAt,
    result,
    sources: results.map(sourceReport).sort((a, b) => compareText(a.id, b.id)),
    items: plan.items,
    counts,
    notes,
    applyErrors,
    results,
    ...(deadline.signal.aborted ? {deadlineExceeded: true} : {}),
  };
}

/**
 * Evaluates and stages the plan. Its own function so that the evaluation's own structures (the
 * registered identities) are garbage before the writes start.
 */
function stageCycle(current: readonly KubeServer[], results: readonly SourceResult[], options: CycleOptions): {staged: StagedPlan; notes: readonly string[]} {
  const {clouds} = options.evaluateContext;
  // Read only on a name collision or a rename: the map is built then, not every cycle for every entry.
  let byNameMap: Map<string, KubeServer> | undefined;
  const byName = {get: (name: string): KubeServer | undefined => (byNameMap ??= new Map(current.map((s) => [s.metadata.name, s]))).get(name)};
  const registered = {get: (name: string): string | undefined => {
    const entry = byName.get(name);
    return entry && registeredIdentity(entry, clouds);
  }};
  const context = {...options.evaluateContext, discoveryGroup: options.discoveryGroup, matcherFor: options.matcherFor, registered};
  const evaluation = evaluate(results, context);
  const staged = stagePlan(current, evaluation, results, options.discoveryGroup, clouds);
  // A rename whose only cause is a resource group spelled in another case is none (respell.ts): staged again, rarely.
  const respelled = respellResourceGroups(staged, results, byName, clouds ?? builtInClouds);
  if (!respelled) return {staged, notes: evaluation.notes};
  const again = evaluate(respelled, context);
  return {staged: stagePlan(current, again, respelled, options.discoveryGroup, clouds), notes: again.notes};
}

/** A new entry remembers when it was first registered (`ls` shows its age); updates carry it over. */
function withDiscoveredAt(item: PlanItem, discoveredAt: string): PlanItem {
  return item.action === 'create' && item.server ? {...item, server: {...item.server, status: statusWith(item.server.status, undefined, discoveredAt)}} : item;
}

const REGISTRY_DIFFERS: AnnounceOptions = Object.freeze({registryDiffers: true});

/** What an announce resolved with, when it is the stored document of `name` (the heartbeat's answer). */
function storedCopy(announced: unknown, name: string): KubeServerDraft | undefined {
  const doc = announced as Partial<KubeServerDraft> | null | undefined;
  return typeof doc === 'object' && doc !== null && doc.kind === 'kube_server' && doc.metadata?.name === name && doc.spec?.cluster ? (doc as KubeServerDraft) : undefined;
}

/** Runs `fn(0 .. count-1)` with at most `concurrency` calls in flight, without a promise per index up front. */
async function boundedEach(count: number, concurrency: number, fn: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({length: Math.min(concurrency, count)}, worker));
}

/** Plans one cloud; a planner that throws or is cut off by the deadline fails its catch-all source. */
async function planSafely(planner: SourcePlanner, signal: AbortSignal, context: PlanContext): Promise<{fetchers: ClusterFetcher[]; failed: SourceResult[]}> {
  if (!planner.coversAll) return planner.plan(context);
  const source = planner.coversAll;
  let onAbort = (): void => undefined;
  const cutOff = new Promise<{fetchers: ClusterFetcher[]; failed: SourceResult[]}>((resolve) => {
    onAbort = () => resolve({fetchers: [], failed: [timedOut(source, signal.reason)]});
    signal.addEventListener('abort', onAbort, {once: true});
  });
  try {
    return await Promise.race([planner.plan(context), cutOff]);
  } catch (error) {
    const failure = {reason: 'other' as const, code: error instanceof Error && error.name ? error.name : 'Error', message: errorMessage(error), operation: 'plan'};
    return {fetchers: [], failed: [{source, ok: false, clusters: [], malformed: [], error: failure}]};
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Runs one source with a signal of its own, aborted (with the cycle's reason) when the cycle's is:
 * `running` holds the abort of every source in flight, called by the cycle's one listener.
 */
async function fetchSafely(fetcher: ClusterFetcher, signal: AbortSignal, running: Set<() => void>): Promise<SourceResult> {
  if (signal.aborted) return timedOut(fetcher.source, signal.reason);
  // A fetcher stuck in a call that ignores the abort (a body dripping in byte by byte) must not hold the cycle.
  const own = new AbortController();
  let cut = (_: SourceResult): void => undefined;
  const cutOff = new Promise<SourceResult>((resolve) => {
    cut = resolve;
  });
  const onAbort = (): void => {
    cut(timedOut(fetcher.source, signal.reason));
    own.abort(signal.reason);
  };
  running.add(onAbort);
  try {
    const result = await Promise.race([fetcher.fetch(own.signal), cutOff]);
    // Whatever a fetcher says after the deadline fired, its listing did not finish in time.
    return signal.aborted && result.ok ? timedOut(fetcher.source, signal.reason) : result;
  } catch (error) {
    // A fetcher bug must cost one source, never the cycle.
    return {
      source: fetcher.source,
      ok: false,
      clusters: [],
      malformed: [],
      error: {reason: 'other', code: error instanceof Error && error.name ? error.name : 'Error', message: errorMessage(error), operation: 'fetch'},
    };
  } finally {
    running.delete(onAbort);
  }
}

function timedOut(source: SourceRef, reason: unknown): SourceResult {
  const message = reason instanceof Error ? reason.message : 'the cycle was cut short';
  const timeout = reason instanceof Error && reason.name === 'TimeoutError';
  return {
    source,
    ok: false,
    clusters: [],
    malformed: [],
    error: {reason: timeout ? 'timeout' : 'other', code: timeout ? 'CycleDeadline' : 'Aborted', message, operation: 'fetch'},
  };
}

function sourceReport(r: SourceResult): SourceReport {
  return {
    id: r.source.id,
    cloud: r.source.cloud,
    region: r.source.region,
    account: r.source.account,
    ok: r.ok,
    clusters: r.clusters.length,
    ...(r.skippedReason ? {skipped: r.skippedReason} : {}),
    ...(r.error ? {error: r.error} : {}),
  };
}
