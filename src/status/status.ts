/** Per-source health across cycles, served by /v1/status (same ids and reasons as the metrics). */
import type {SourceFailure, SourceResult} from '../core/types.ts';
import type {CycleReport, CycleResult} from '../discovery/cycle.ts';

type Writable<T> = {-readonly [K in keyof T]: T[K]};

/** What /v1/status says about one source. */
export interface SourceStatus {
  readonly id: string;
  readonly cloud: string;
  readonly region: string;
  readonly account: string;
  readonly ok: boolean;
  /** RFC 3339 of the last successful listing. */
  readonly last_success?: string;
  readonly last_error?: SourceFailure & {readonly at: string};
  /** Clusters listed by the last successful listing. */
  readonly clusters: number;
  /** Entries kept registered only because this source is failing. */
  readonly stale: boolean;
  readonly consecutive_failures: number;
  readonly skipped?: string;
}

/** The last cycle, summarised. */
export interface CycleStatus {
  readonly started_at: string;
  readonly duration_ms: number;
  readonly result: CycleResult;
  readonly counts: CycleReport['counts'];
  /** Sources were cut off at the cycle deadline (an overrun). */
  readonly deadline_exceeded?: boolean;
}

/** Tracks source health and cycle outcomes. */
export class StatusTracker {
  readonly #sources = new Map<string, SourceStatus>();
  #lastCycle: CycleStatus | undefined;
  #lastSuccess: string | undefined;
  /** The last time recordSource formatted, and its text. */
  #lastNow = Number.NaN;
  #lastIso = '';

  /** Records one source's outcome at `now`. */
  recordSource(result: SourceResult, now: number): void {
    const at = this.#isoAt(now);
    const {source} = result;
    const prev = this.#sources.get(source.id);
    // Literals in the order /v1/status shows the fields (this runs for every source of every cycle).
    if (result.ok) {
      const clusters = result.clusters.length;
      const status: Writable<SourceStatus> = prev?.last_error
        ? {id: source.id, cloud: source.cloud, region: source.region, account: source.account, ok: true, last_success: at, last_error: prev.last_error, clusters, stale: false, consecutive_failures: 0}
        : {id: source.id, cloud: source.cloud, region: source.region, account: source.account, ok: true, last_success: at, clusters, stale: false, consecutive_failures: 0};
      if (result.skippedReason) status.skipped = result.skippedReason;
      this.#sources.set(source.id, status);
      return;
    }
    this.#sources.set(source.id, {
      id: source.id,
      cloud: source.cloud,
      region: source.region,
      account: source.account,
      ok: false,
      ...(prev?.last_success ? {last_success: prev.last_success} : {}),
      ...(result.error ? {last_error: {...result.error, at}} : {}),
      clusters: prev?.clusters ?? 0,
      stale: true,
      consecutive_failures: (prev?.consecutive_failures ?? 0) + 1,
    });
  }

  /** `now` in RFC 3339, formatted once for the sources that finish in the same millisecond. */
  #isoAt(now: number): string {
    if (now !== this.#lastNow) {
      this.#lastIso = new Date(now).toISOString();
      this.#lastNow = now;
    }
    return this.#lastIso;
  }

  /** Records a finished cycle; sources not seen in it (config changed) are forgotten. */
  recordCycle(report: CycleReport): void {
    const seen = new Set(report.sources.map((s) => s.id));
    for (const id of this.#sources.keys()) if (!seen.has(id)) this.#sources.delete(id);
    this.#lastCycle = {started_at: new Date(report.startedAt).toISOString(), duration_ms: report.durationMs, result: report.result, counts: report.counts, ...(report.deadlineExceeded ? {deadline_exceeded: true} : {})};
    if (report.result === 'success') this.#lastSuccess = new Date(report.startedAt + report.durationMs).toISOString();
  }

  /** The last finished cycle, if any. */
  get lastCycle(): CycleStatus | undefined {
    return this.#lastCycle;
  }

  /** RFC 3339 end of the last fully successful cycle. */
  get lastSuccess(): string | undefined {
    return this.#lastSuccess;
  }

  /** Every known source, sorted by id. */
  sources(): SourceStatus[] {
    return [...this.#sources.values()].sort((a, b) => a.id.localeCompare(b.id));
  }
}
