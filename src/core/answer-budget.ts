/**
 * One cap on the bytes of cloud answers being read at once, shared by the HTTP handlers of every
 * client. Each handler caps one answer (AWS 8 MiB, ARM 32 MiB), but hundreds of calls may be in
 * flight over their pools: without a shared cap, an endpoint answering every call with a body
 * just under the per-answer cap could hold gigabytes at once (64 AWS answers of 8 MiB: ~890 MiB
 * of RSS measured). The largest answer a healthy cloud gives here is ~2.5 MB (a GetResources
 * page of 100 clusters with 50 tags each), and bytes are held only while an answer arrives, so
 * 64 MiB leaves room for two dozen of those at the same instant. It must fit in the shipped pods'
 * memory limits above the service's own peak (320Mi against ≤ 256 MB at 10,000 clusters;
 * test/deploy/answer-budget-fits.test.ts): a larger budget would end a hostile endpoint's flood in
 * an OOM kill instead of failed sources.
 */

/** Bytes of answers the process reads at once, all clouds together (64 MiB). */
export const MAX_ANSWER_BYTES_IN_FLIGHT = 64 * 1024 * 1024;

/** A count of answer bytes held by calls still reading, against a limit. */
export class AnswerBudget {
  readonly limit: number;
  #used = 0;

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected limit to be an integer >= 1, got ${limit}`);
    this.limit = limit;
  }

  /** Bytes held now. */
  get used(): number {
    return this.#used;
  }

  /** Takes `bytes` when they fit under the limit (true); takes nothing otherwise (false). */
  take(bytes: number): boolean {
    if (this.#used + bytes > this.limit) return false;
    this.#used += bytes;
    return true;
  }

  /** Gives back bytes taken (a call settled: its answer is handed on or dropped). */
  give(bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes);
  }
}

/** The process's budget: every cloud HTTP handler takes from it unless given another (tests). */
export const sharedAnswerBudget = new AnswerBudget(MAX_ANSWER_BYTES_IN_FLIGHT);
