/**
 * The per-cycle side effects in one place: each source's and each cycle's outcome goes to the
 * status tracker, the metrics and the log; callers waiting for a cycle are answered once the
 * cycle's probes ran.
 */
import type {Clock} from '../core/clock.ts';
import type {SourceResult} from '../core/types.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import {logCycleSummary, logSourceResult, warnIfNoCredentials} from '../observability/log-events.ts';
import type {Logger} from '../observability/logger.ts';
import type {Metrics} from '../observability/metrics.ts';
import type {StatusTracker} from '../status/status.ts';

/** What the observer reports to. */
export interface CycleObserverOptions {
  readonly clock: Clock;
  readonly status: StatusTracker;
  readonly metrics: Pick<Metrics, 'observeSource' | 'observeCycle' | 'cycleOverrun' | 'cycleError'>;
  readonly log: Logger;
}

/** Records sources and cycles; answers `nextCycle()` callers. */
export class CycleObserver {
  readonly #options: CycleObserverOptions;
  readonly #waiters: ((report: CycleReport) => void)[] = [];
  #firstCycleDone = false;

  constructor(options: CycleObserverOptions) {
    this.#options = options;
  }

  /** A cycle of this process has completed (readiness waits for it). */
  get firstCycleDone(): boolean {
    return this.#firstCycleDone;
  }

  /** One source's listing finished. */
  readonly source = (result: SourceResult, durationMs: number): void => {
    const {status, metrics, log, clock} = this.#options;
    status.recordSource(result, clock.now());
    metrics.observeSource(result, durationMs);
    logSourceResult(log, result, durationMs);
  };

  /** The schedule fell behind: the next cycle starts at once. */
  readonly overrun = (lateByMs: number): void => {
    this.#options.metrics.cycleOverrun();
    this.#options.log.warn({late_ms: lateByMs}, 'discovery cycle overran its schedule; the next cycle starts now');
  };

  /** A cycle threw: nothing was applied. */
  readonly failed = (error: unknown): void => {
    this.#options.metrics.cycleError();
    this.#options.log.error({err: error}, 'discovery cycle failed; the registry was left as it was');
  };

  /** A cycle's plan was applied (before access set-up and probes). */
  applied(report: CycleReport): void {
    const {status, metrics, log} = this.#options;
    if (report.deadlineExceeded) {
      metrics.cycleOverrun();
      log.warn({event: 'cycle_deadline', failed_sources: report.sources.filter((r) => r.error?.code === 'CycleDeadline').map((r) => r.id)}, 'discovery cycle reached its deadline; sources still running were cut off and keep their entries');
    }
    status.recordCycle(report);
    metrics.observeCycle(report);
    logCycleSummary(log, report);
    warnIfNoCredentials(log, report);
    this.#firstCycleDone = true;
  }

  /** The cycle's probes changed `changed` entries' health; the cycle is complete. */
  completed(report: CycleReport, changed: number): void {
    if (changed > 0) this.#options.log.info({event: 'probe', changed}, `probes changed the health of ${changed} clusters`);
    for (const waiter of this.#waiters.splice(0)) waiter(report);
  }

  /** Resolves with the report of the next completed cycle. */
  nextCycle(): Promise<CycleReport> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}
