/**
 * A cache of short-lived tokens (EKS bearer tokens, Entra ID tokens, assumed-role
 * credentials), one per key. Fresh tokens come from memory; a token past its renewal point
 * is still served while a single background mint replaces it; a failed renewal keeps the
 * old token until it expires; a failed mint is never cached, so the next call tries again.
 * It never logs or prints the values it holds.
 */
import type {Clock} from '../core/clock.ts';

/** What the cache holds: anything with an expiry. */
export interface Expiring {
  readonly expiresAt: Date;
}

/** Mints the value for one key. */
export type MintFn<T> = (key: string) => Promise<T>;

/** Counters for metrics. */
export interface TokenCacheStats {
  /** Calls answered from memory (including a still-valid token served while it renews). */
  readonly hits: number;
  /** Successful mints. */
  readonly mints: number;
  /** Failed mints. */
  readonly errors: number;
}

/** Options of a TokenCache. */
export interface TokenCacheOptions<T extends Expiring> {
  readonly clock: Clock;
  /** Default mint, used when `get` is called without one. */
  readonly mint?: MintFn<T>;
  /** Most keys kept; past it the least recently used entries go. Default 10 000. */
  readonly maxEntries?: number;
  /** First wait after a failed renewal before the next try; doubles per failure up to 60 s. Default 5 s. */
  readonly retryBackoffMs?: number;
  /**
   * When to start renewing a value minted at `mintedAt` (ms) that expires at `expiresAt` (ms).
   * Default: half its remaining life.
   */
  readonly renewAt?: (mintedAt: number, expiresAt: number) => number;
  /** Called after each successful mint, e.g. to count tokens minted. Never passed the value. */
  readonly onMint?: (key: string) => void;
  /** Called after each failed mint with the error (which must not contain a token). */
  readonly onError?: (key: string, error: unknown) => void;
}

interface Entry<T> {
  value?: T;
  renewAtMs: number;
  inflight?: Promise<T>;
  failures: number;
  retryAtMs: number;
}

const MAX_BACKOFF_MS = 60_000;

/** Half-life renewal: renew once half of the time between minting and expiry has passed. */
export function halfLife(mintedAt: number, expiresAt: number): number {
  return mintedAt + (expiresAt - mintedAt) / 2;
}

/** One token per key with shared in-flight mints, stale-while-renewing and bounded size. */
export class TokenCache<T extends Expiring> {
  readonly #clock: Clock;
  readonly #defaultMint: MintFn<T> | undefined;
  readonly #maxEntries: number;
  readonly #retryBackoffMs: number;
  readonly #renewAt: (mintedAt: number, expiresAt: number) => number;
  readonly #onMint: ((key: string) => void) | undefined;
  readonly #onError: ((key: string, error: unknown) => void) | undefined;
  // Map order is recency order: every access moves the key to the end.
  readonly #entries = new Map<string, Entry<T>>();
  #hits = 0;
  #mints = 0;
  #errors = 0;

  constructor(options: TokenCacheOptions<T>) {
    const {maxEntries = 10_000, retryBackoffMs = 5_000} = options;
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new TypeError(`Expected \`maxEntries\` to be an integer >= 1, got ${maxEntries}`);
    }
    if (!Number.isFinite(retryBackoffMs) || retryBackoffMs < 0) {
      throw new TypeError(`Expected \`retryBackoffMs\` to be a finite number >= 0, got ${retryBackoffMs}`);
    }
    this.#clock = options.clock;
    this.#defaultMint = options.mint;
    this.#maxEntries = maxEntries;
    this.#retryBackoffMs = retryBackoffMs;
    this.#renewAt = options.renewAt ?? halfLife;
    this.#onMint = options.onMint;
    this.#onError = options.onError;
  }

  /** The value for `key`: cached while valid, else minted (once, however many callers wait). */
  get(key: string, mint?: MintFn<T>): Promise<T> {
    const mintFn = mint ?? this.#defaultMint;
    if (!mintFn) throw new TypeError('TokenCache.get: expected a mint function, either in the options or as argument, got none');
    const now = this.#clock.now();
    let entry = this.#entries.get(key);
    if (entry) {
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    } else {
      entry = {renewAtMs: 0, failures: 0, retryAtMs: 0};
      this.#entries.set(key, entry);
      this.#evict();
    }

    const {value} = entry;
    if (value && now < value.expiresAt.getTime()) {
      this.#hits++;
      if (now >= entry.renewAtMs && now >= entry.retryAtMs && !entry.inflight) {
        // Renew in the background; this caller keeps the still-valid token. The failure is
        // recorded (stats, onError, backoff) by #mint, so nothing is lost by ignoring it here.
        this.#mint(key, entry, mintFn).catch(() => {});
      }
      return Promise.resolve(value);
    }
    return entry.inflight ?? this.#mint(key, entry, mintFn);
  }

  /** Forgets `key`, e.g. after the token was refused; the next `get` mints. */
  delete(key: string): boolean {
    return this.#entries.delete(key);
  }

  /** Forgets every key. */
  clear(): void {
    this.#entries.clear();
  }

  /** Number of keys held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Counters since construction. */
  get stats(): TokenCacheStats {
    return {hits: this.#hits, mints: this.#mints, errors: this.#errors};
  }

  #mint(key: string, entry: Entry<T>, mintFn: MintFn<T>): Promise<T> {
    const mintedAt = this.#clock.now();
    const inflight = (async () => {
      try {
        const value = await mintFn(key);
        entry.value = value;
        entry.renewAtMs = this.#renewAt(mintedAt, value.expiresAt.getTime());
        entry.failures = 0;
        entry.retryAtMs = 0;
        this.#mints++;
        this.#onMint?.(key);
        return value;
      } catch (error) {
        entry.failures++;
        entry.retryAtMs = this.#clock.now() + Math.min(this.#retryBackoffMs * 2 ** (entry.failures - 1), MAX_BACKOFF_MS);
        this.#errors++;
        this.#onError?.(key, error);
        // Without a usable token the entry holds nothing worth its slot.
        const valid = entry.value && this.#clock.now() < entry.value.expiresAt.getTime();
        if (!valid && this.#entries.get(key) === entry) this.#entries.delete(key);
        throw error;
      } finally {
        entry.inflight = undefined;
      }
    })();
    entry.inflight = inflight;
    return inflight;
  }

  /** Drops the least recently used idle entries past `maxEntries` (Map order is recency order). */
  #evict(): void {
    for (const [key, entry] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries) return;
      // An entry with a mint in flight has callers waiting on it; skip it rather than orphan them.
      if (!entry.inflight) this.#entries.delete(key);
    }
  }
}
