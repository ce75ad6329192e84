/**
 * Client-side rate shaping of AWS calls (design §5, issue 15 item 4): one token bucket per
 * (account, region, operation), so a large cycle spends its budget at the rate the API
 * grants instead of bursting into throttling and then backing off below it.
 *
 * Each bucket starts at its configured rate and adapts on throttling by AIMD: a throttled
 * answer multiplies the rate by `decrease` (at most once per `cooldownMs`, since a burst of
 * throttles reports one overload) and spends the saved burst, and the rate regains `increase`
 * requests per second for every second that passes, never above the configured ceiling. The
 * regain runs on time, not on successes: a cycle that ended throttled must not start the next
 * one, minutes later, at the cut rate (the buckets of the API have refilled meanwhile). The cut is gentle (0.9) and the rate never falls below
 * half the ceiling unless asked: most throttles at a rate matched to the quota come from
 * requests bunching on their way (scheduling, connection set-up), not from a lower quota, and
 * halving on each of them left a throttled cycle far below the rate the API grants. The SDK's
 * retries still retry throttled calls; each attempt takes a token here.
 *
 * EKS documents no per-operation request rates; the defaults are conservative figures that
 * users with different quotas override in `discovery.aws.rate_limits`.
 */
import type {Clock} from '../../core/clock.ts';

/** A sustained rate and how many requests may start at once above it. */
export interface RateLimit {
  readonly ratePerSecond: number;
  readonly burst: number;
}

/** Limits by operation name; `'*'` applies to operations not listed. */
export type RateLimits = Readonly<Record<string, RateLimit>>;

/** Default ceilings per (account, region, operation). */
export const DEFAULT_AWS_RATE_LIMITS: RateLimits = {
  ListClusters: {ratePerSecond: 10, burst: 10},
  DescribeCluster: {ratePerSecond: 50, burst: 20},
  GetResources: {ratePerSecond: 10, burst: 5},
  '*': {ratePerSecond: 20, burst: 10},
};

/** Tuning of the adaptation. */
export interface RateShaperOptions {
  readonly clock: Clock;
  readonly limits?: RateLimits;
  /** Factor applied to a bucket's rate on throttling (default 0.9). */
  readonly decrease?: number;
  /** Requests per second regained per second (default 5 % of the bucket's ceiling). */
  readonly increase?: number;
  /** At most one decrease per this period (default 1 s). */
  readonly cooldownMs?: number;
  /** Lowest rate a bucket adapts down to (default half its ceiling). */
  readonly minRatePerSecond?: number;
}

interface Bucket {
  readonly ceiling: RateLimit;
  rate: number;
  tokens: number;
  at: number;
  /** When the next decrease may happen. */
  calmAt: number;
  /** Tail of the FIFO of waiters: each waits for the one before it, so tokens are handed out in order. */
  queue: Promise<void>;
}

/** Token buckets per key that adapt their rate on throttling. */
export class RateShaper {
  readonly #clock: Clock;
  readonly #limits: RateLimits;
  readonly #decrease: number;
  readonly #increase: number | undefined;
  readonly #cooldownMs: number;
  readonly #minRate: number | undefined;
  readonly #buckets = new Map<string, Bucket>();

  constructor(options: RateShaperOptions) {
    this.#clock = options.clock;
    this.#limits = options.limits ?? DEFAULT_AWS_RATE_LIMITS;
    this.#decrease = options.decrease ?? 0.9;
    this.#increase = options.increase;
    this.#cooldownMs = options.cooldownMs ?? 1000;
    this.#minRate = options.minRatePerSecond;
    for (const [op, limit] of Object.entries(this.#limits)) {
      if (!(limit.ratePerSecond > 0) || !(limit.burst >= 1)) throw new Error(`rate limit of ${op}: expected rate_per_second > 0 and burst >= 1`);
    }
  }

  /** Waits for a token of (account, region, operation); rejects when `signal` aborts first. */
  acquire(account: string, region: string, operation: string, signal?: AbortSignal): Promise<void> {
    const bucket = this.#bucket(account, region, operation);
    if (!bucket) return Promise.resolve();
    const turn = bucket.queue.then(() => this.#take(bucket, signal));
    // The next waiter goes after this one whether it got its token or was aborted.
    bucket.queue = turn.catch(() => undefined);
    return turn;
  }

  /** Reports a throttled answer: the bucket slows down (at most once per cooldown). */
  throttled(account: string, region: string, operation: string): void {
    const bucket = this.#bucket(account, region, operation);
    if (!bucket) return;
    const now = this.#clock.now();
    if (now < bucket.calmAt) return;
    this.#refill(bucket, now);
    bucket.rate = Math.max(this.#minRate ?? bucket.ceiling.ratePerSecond / 2, bucket.rate * this.#decrease);
    // Drop the saved burst too: the server just said the budget is spent.
    bucket.tokens = Math.min(bucket.tokens, 0);
    bucket.calmAt = now + this.#cooldownMs;
  }

  /** Current rate of a bucket (requests per second); for metrics and tests. */
  rate(account: string, region: string, operation: string): number | undefined {
    const bucket = this.#buckets.get(key(account, region, operation));
    return bucket && this.#regained(bucket, this.#clock.now());
  }

  #bucket(account: string, region: string, operation: string): Bucket | undefined {
    const k = key(account, region, operation);
    let bucket = this.#buckets.get(k);
    if (!bucket) {
      const ceiling = this.#limits[operation] ?? this.#limits['*'];
      if (!ceiling) return undefined;
      bucket = {ceiling, rate: ceiling.ratePerSecond, tokens: ceiling.burst, at: this.#clock.now(), calmAt: 0, queue: Promise.resolve()};
      this.#buckets.set(k, bucket);
    }
    return bucket;
  }

  #refill(bucket: Bucket, now: number): void {
    bucket.tokens = Math.min(bucket.ceiling.burst, bucket.tokens + ((now - bucket.at) / 1000) * bucket.rate);
    bucket.rate = this.#regained(bucket, now);
    bucket.at = now;
  }

  /** The bucket's rate at `now`: its rate at its last refill plus what the time since regained. */
  #regained(bucket: Bucket, now: number): number {
    const increase = this.#increase ?? bucket.ceiling.ratePerSecond * 0.05;
    return Math.min(bucket.ceiling.ratePerSecond, bucket.rate + (Math.max(0, now - bucket.at) / 1000) * increase);
  }

  async #take(bucket: Bucket, signal: AbortSignal | undefined): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      this.#refill(bucket, this.#clock.now());
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return;
      }
      await this.#clock.sleep(Math.ceil(((1 - bucket.tokens) / bucket.rate) * 1000), signal);
    }
  }
}

function key(account: string, region: string, operation: string): string {
  return `${account}|${region}|${operation}`;
}

/** The part of an SDK v3 client the shaper hooks into. */
export interface ShapeableClient {
  readonly middlewareStack: {
    addRelativeTo(middleware: unknown, options: {name: string; relation: 'after'; toMiddleware: string; override?: boolean}): void;
  };
}

const THROTTLE_CODES: ReadonlySet<string> = new Set(['ThrottlingException', 'Throttling', 'TooManyRequestsException', 'RequestLimitExceeded', 'ThrottledException']);

/** Whether an SDK error says the caller was throttled. */
export function isThrottle(error: unknown): boolean {
  const e = error as {name?: unknown; Code?: unknown; $metadata?: {httpStatusCode?: unknown}} | null;
  return (typeof e?.name === 'string' && THROTTLE_CODES.has(e.name)) || (typeof e?.Code === 'string' && THROTTLE_CODES.has(e.Code)) || e?.$metadata?.httpStatusCode === 429;
}

/**
 * Makes every attempt of `client` (inside the SDK's retry loop, so retries are shaped too)
 * take a token of (account, region, operation) and report throttling back to the shaper.
 */
export function shapeClient(client: ShapeableClient, shaper: RateShaper, account: string, region: string): void {
  type Next = (args: unknown) => Promise<unknown>;
  const middleware = (next: Next, context: {commandName?: string}) => async (args: unknown) => {
    const operation = (context.commandName ?? '*').replace(/Command$/, '');
    await shaper.acquire(account, region, operation);
    try {
      return await next(args);
    } catch (error) {
      if (isThrottle(error)) shaper.throttled(account, region, operation);
      throw error;
    }
  };
  client.middlewareStack.addRelativeTo(middleware, {name: 'kubeDiscoveryRateShaper', relation: 'after', toMiddleware: 'retryMiddleware', override: true});
}

/** The shaper's limits from `discovery_service.aws_rate_limits`: the configured operations over the defaults. */
export function awsRateLimits(configured: Readonly<Record<string, {readonly rate_per_second: number; readonly burst: number}>>): RateLimits {
  const out: Record<string, RateLimit> = {...DEFAULT_AWS_RATE_LIMITS};
  for (const [operation, limit] of Object.entries(configured)) out[operation] = {ratePerSecond: limit.rate_per_second, burst: limit.burst};
  return out;
}
