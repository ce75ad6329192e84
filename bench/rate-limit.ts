/**
 * Token-bucket rate limits for the cloud simulator, as fault hooks of the wire fakes: one bucket
 * per key (AWS: region + operation; ARM: subscription + operation) holding `burst` tokens and
 * refilling at `ratePerSecond` on the world's clock. A request that finds its bucket empty is
 * answered the way the cloud answers it: EKS `429 ThrottlingException`, STS `400 Throttling`,
 * ARM `429 TooManyRequests` with `Retry-After`.
 */
import type {Clock} from '../src/core/clock.ts';
import type {ArmFault, ArmFaultHook, ArmRequestContext} from '../test/fakes/arm-server.ts';
import type {FaultAction, FaultContext, FaultHook} from '../test/fakes/aws-fakes.ts';

/** A sustained rate and how many requests may come at once above it. */
export interface RateLimit {
  readonly ratePerSecond: number;
  readonly burst: number;
}

/** Limits by operation name; `'*'` applies to operations not listed. Operations without a limit are never throttled. */
export type RateLimits = Readonly<Record<string, RateLimit>>;

interface Bucket {
  tokens: number;
  at: number;
}

/** Counts of what the buckets let through and refused. */
export interface BucketStats {
  readonly allowed: number;
  readonly throttled: number;
}

/** A set of token buckets on one clock. */
export class TokenBuckets {
  readonly #clock: Clock;
  readonly #buckets = new Map<string, Bucket>();
  #allowed = 0;
  #throttled = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Takes one token from the bucket of `key`; false (throttled) when it is empty. */
  take(key: string, limit: RateLimit): boolean {
    checkLimit(limit);
    const now = this.#clock.now();
    let bucket = this.#buckets.get(key);
    if (!bucket) {
      bucket = {tokens: limit.burst, at: now};
      this.#buckets.set(key, bucket);
    }
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * limit.ratePerSecond);
    bucket.at = now;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      this.#allowed++;
      return true;
    }
    this.#throttled++;
    return false;
  }

  /** Fills every bucket again, as the minutes between two real discovery cycles would. */
  refill(): void {
    this.#buckets.clear();
  }

  /** Requests allowed and throttled since the last `resetStats`. */
  get stats(): BucketStats {
    return {allowed: this.#allowed, throttled: this.#throttled};
  }

  /** Zeroes the counters (the buckets keep their level). */
  resetStats(): void {
    this.#allowed = 0;
    this.#throttled = 0;
  }
}

function checkLimit(limit: RateLimit): void {
  if (!(limit.ratePerSecond > 0) || !Number.isFinite(limit.ratePerSecond)) {
    throw new RangeError(`Expected ratePerSecond to be a finite number > 0, got ${limit.ratePerSecond}`);
  }
  if (!Number.isInteger(limit.burst) || limit.burst < 1) {
    throw new RangeError(`Expected burst to be an integer >= 1, got ${limit.burst}`);
  }
}

function limitFor(limits: RateLimits, operation: string): RateLimit | undefined {
  return limits[operation] ?? limits['*'];
}

/** An AWS fault hook throttling per (region, operation), and the buckets behind it. */
export interface AwsRateLimiter {
  readonly hook: FaultHook;
  readonly buckets: TokenBuckets;
}

/** Per-region, per-operation token buckets answering like AWS when empty. */
export function awsRateLimiter(options: {readonly clock: Clock; readonly limits: RateLimits}): AwsRateLimiter {
  return rateLimiter<FaultContext, FaultAction>(
    options,
    (ctx) => `${ctx.service}|${ctx.region}|${ctx.operation}`,
    (ctx) => (ctx.service === 'sts' ? {code: 'Throttling', status: 400, message: 'Rate exceeded'} : {code: 'ThrottlingException', status: 429, message: 'Rate exceeded'}),
  );
}

/** An ARM fault hook throttling per (subscription, operation), and the buckets behind it. */
export interface ArmRateLimiter {
  readonly hook: ArmFaultHook;
  readonly buckets: TokenBuckets;
}

/** Per-subscription, per-operation token buckets answering `429` with `Retry-After` (seconds until a token is back, at least 1). */
export function armRateLimiter(options: {readonly clock: Clock; readonly limits: RateLimits}): ArmRateLimiter {
  return rateLimiter<ArmRequestContext, ArmFault>(
    options,
    (ctx) => `${ctx.subscription ?? '-'}|${ctx.operation}`,
    (_ctx, limit) => ({status: 429, retryAfterSeconds: Math.max(1, Math.ceil(1 / limit.ratePerSecond))}),
  );
}

/** A fault hook taking a token of the bucket `keyOf` names for each call, and answering `refuse` when it is empty. */
function rateLimiter<C extends {readonly operation: string}, F>(
  options: {readonly clock: Clock; readonly limits: RateLimits},
  keyOf: (ctx: C) => string,
  refuse: (ctx: C, limit: RateLimit) => F,
): {hook: (ctx: C) => F | undefined; buckets: TokenBuckets} {
  for (const limit of Object.values(options.limits)) checkLimit(limit);
  const buckets = new TokenBuckets(options.clock);
  const hook = (ctx: C): F | undefined => {
    const limit = limitFor(options.limits, ctx.operation);
    if (!limit || buckets.take(keyOf(ctx), limit)) return undefined;
    return refuse(ctx, limit);
  };
  return {hook, buckets};
}
