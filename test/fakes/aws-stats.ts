/**
 * Per-request records of the AWS fakes, so tests can assert "every page was read", "each
 * region was asked" and "regions overlapped" without timing: every start and end takes the
 * next number of one shared counter, and two calls overlapped when each started before the
 * other ended.
 */

/** The API a request went to. */
export type FakeAwsService = 'eks' | 'sts' | 'organizations' | 'account' | 'tagging';

/** One request the fake received. */
export interface FakeAwsCall {
  readonly service: FakeAwsService;
  readonly operation: string;
  readonly region: string;
  /** Account of the caller ('' when authentication failed before it was known). */
  readonly account: string;
  /** Access key id that signed the request, once authenticated (tells replicas sharing an account apart). */
  readonly accessKeyId?: string;
  /** HTTP status sent; 0 while in flight or when the fake never answered (`hang`). */
  readonly status: number;
  /** AWS error code sent, if any. */
  readonly code?: string;
  /** World-clock times, epoch ms. */
  readonly startedAt: number;
  readonly endedAt?: number;
  /** Position of the start / end in the sequence of all starts and ends. */
  readonly startOrder: number;
  readonly endOrder?: number;
}

/** Selects calls by any of their identifying fields. */
export type FakeAwsCallFilter = Partial<Pick<FakeAwsCall, 'service' | 'operation' | 'region' | 'account' | 'status' | 'code' | 'accessKeyId'>>;

type MutableCall = {-readonly [K in keyof FakeAwsCall]: FakeAwsCall[K]};

function matches(call: FakeAwsCall, filter: FakeAwsCallFilter): boolean {
  return (Object.keys(filter) as Array<keyof FakeAwsCallFilter>).every((k) => filter[k] === undefined || call[k] === filter[k]);
}

/** The request log of one fake server. */
export class FakeAwsStats {
  #calls: MutableCall[] = [];
  #order = 0;

  /** Every call so far, in order of arrival. */
  get calls(): readonly FakeAwsCall[] {
    return this.#calls;
  }

  /** Records the start of a call; the returned record is passed to `update` and `end`. */
  begin(fields: Pick<FakeAwsCall, 'service' | 'operation' | 'region' | 'account'>, now: number): FakeAwsCall {
    const call: MutableCall = {...fields, status: 0, startedAt: now, startOrder: this.#order++};
    this.#calls.push(call);
    return call;
  }

  /** Fills in what became known after authentication (the caller's account). */
  update(call: FakeAwsCall, fields: Partial<Pick<FakeAwsCall, 'account' | 'accessKeyId'>>): void {
    Object.assign(call as MutableCall, fields);
  }

  /** Records the end of a call with the status (and error code) sent; status 0 means no answer. */
  end(call: FakeAwsCall, now: number, status: number, code?: string): void {
    if (call.endOrder !== undefined) return;
    Object.assign(call as MutableCall, {status, endedAt: now, endOrder: this.#order++}, code === undefined ? {} : {code});
  }

  /** Number of calls matching the filter. */
  count(filter: FakeAwsCallFilter = {}): number {
    return this.#calls.filter((c) => matches(c, filter)).length;
  }

  /** Calls matching the filter. */
  find(filter: FakeAwsCallFilter = {}): FakeAwsCall[] {
    return this.#calls.filter((c) => matches(c, filter));
  }

  /** Calls matching the filter that have not ended yet. */
  inFlight(filter: FakeAwsCallFilter = {}): number {
    return this.#calls.filter((c) => c.endOrder === undefined && matches(c, filter)).length;
  }

  /** Largest number of matching calls that were in flight at the same moment. */
  maxInFlight(filter: FakeAwsCallFilter = {}): number {
    const events: Array<[number, number]> = [];
    for (const c of this.#calls) {
      if (!matches(c, filter)) continue;
      events.push([c.startOrder, 1]);
      if (c.endOrder !== undefined) events.push([c.endOrder, -1]);
    }
    events.sort((a, b) => a[0] - b[0]);
    let current = 0;
    let max = 0;
    for (const [, delta] of events) {
      current += delta;
      max = Math.max(max, current);
    }
    return max;
  }

  /** Whether some call matching `a` was in flight while some call matching `b` was. */
  overlapped(a: FakeAwsCallFilter, b: FakeAwsCallFilter): boolean {
    const end = (c: FakeAwsCall): number => c.endOrder ?? Number.POSITIVE_INFINITY;
    const bs = this.find(b);
    return this.find(a).some((x) => bs.some((y) => x !== y && x.startOrder < end(y) && y.startOrder < end(x)));
  }

  /** Forgets all calls (between cycles). */
  reset(): void {
    this.#calls = [];
  }
}
