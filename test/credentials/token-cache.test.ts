import {describe, expect, it} from 'vitest';
import {FakeClock, flushMicrotasks} from '../helpers/fake-clock.ts';
import {TokenCache} from '../../src/credentials/token-cache.ts';

interface Tok {
  readonly value: string;
  readonly expiresAt: Date;
}

const MIN = 60_000;

/** A mint that issues `t1`, `t2`, ... valid for `lifetimeMs`, and can be told to fail or hold. */
function minter(clock: FakeClock, lifetimeMs = 14 * MIN) {
  const state = {calls: 0, fail: false, hold: undefined as Promise<void> | undefined};
  const mint = async (key: string): Promise<Tok> => {
    state.calls++;
    const n = state.calls;
    if (state.hold) await state.hold;
    if (state.fail) throw new Error(`sts unavailable for ${key}`);
    return {value: `t${n}`, expiresAt: new Date(clock.now() + lifetimeMs)};
  };
  return {state, mint};
}

describe('TokenCache', () => {
  it('serves a fresh token from memory and renews only after half its life', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    const cache = new TokenCache<Tok>({clock, mint});
    expect((await cache.get('c1|id')).value).toBe('t1');

    await clock.advance(7 * MIN - 1);
    expect((await cache.get('c1|id')).value).toBe('t1');
    expect(state.calls).toBe(1);

    await clock.advance(1);
    // Past half-life the still-valid token is served while one renewal runs.
    expect((await cache.get('c1|id')).value).toBe('t1');
    expect(state.calls).toBe(2);
    await flushMicrotasks();
    expect((await cache.get('c1|id')).value).toBe('t2');
    expect(cache.stats).toEqual({hits: 3, mints: 2, errors: 0});
  });

  it('keeps one token per key', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    const cache = new TokenCache<Tok>({clock, mint});
    const [a, b] = await Promise.all([cache.get('c1|id'), cache.get('c2|id')]);
    expect(a.value).not.toBe(b.value);
    expect((await cache.get('c1|id')).value).toBe(a.value);
    expect(state.calls).toBe(2);
  });

  it('shares one in-flight mint among concurrent callers', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    let release!: () => void;
    state.hold = new Promise((resolve) => (release = resolve));
    const cache = new TokenCache<Tok>({clock, mint});
    const callers = Array.from({length: 10}, () => cache.get('c1|id'));
    release();
    const tokens = await Promise.all(callers);
    expect(new Set(tokens.map((t) => t.value))).toEqual(new Set(['t1']));
    expect(state.calls).toBe(1);
  });

  it('keeps serving the old token when a renewal fails, and retries after a backoff', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    const errors: string[] = [];
    const cache = new TokenCache<Tok>({clock, mint, retryBackoffMs: 5_000, onError: (key) => errors.push(key)});
    await cache.get('c1|id');
    await clock.advance(8 * MIN);
    state.fail = true;

    expect((await cache.get('c1|id')).value).toBe('t1');
    await flushMicrotasks();
    expect(state.calls).toBe(2);
    expect(errors).toEqual(['c1|id']);

    // A hot path within the backoff does not hammer the mint.
    for (let i = 0; i < 50; i++) expect((await cache.get('c1|id')).value).toBe('t1');
    expect(state.calls).toBe(2);

    state.fail = false;
    await clock.advance(5_000);
    expect((await cache.get('c1|id')).value).toBe('t1');
    await flushMicrotasks();
    expect((await cache.get('c1|id')).value).toBe('t3');
    expect(cache.stats.errors).toBe(1);
  });

  it('rejects when no valid token is left, without wedging: the next call mints again', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    const cache = new TokenCache<Tok>({clock, mint});
    await cache.get('c1|id');
    state.fail = true;
    await clock.advance(14 * MIN);

    await expect(cache.get('c1|id')).rejects.toThrow('sts unavailable for c1|id');
    await expect(cache.get('c1|id')).rejects.toThrow('sts unavailable');
    state.fail = false;
    expect((await cache.get('c1|id')).value).toBe('t4');
    expect(state.calls).toBe(4);
  });

  it('does not cache a failed first mint', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    const cache = new TokenCache<Tok>({clock, mint});
    state.fail = true;
    await expect(cache.get('c1|id')).rejects.toThrow();
    expect(cache.size).toBe(0);
    state.fail = false;
    expect((await cache.get('c1|id')).value).toBe('t2');
  });

  it('mints again once a token expired (renewal never attempted)', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock, 2 * MIN);
    const cache = new TokenCache<Tok>({clock, mint});
    await cache.get('k');
    await clock.advance(2 * MIN);
    expect((await cache.get('k')).value).toBe('t2');
    expect(state.calls).toBe(2);
  });

  it('holds at most maxEntries keys, evicting the least recently used', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock);
    const cache = new TokenCache<Tok>({clock, mint, maxEntries: 3});
    for (const key of ['a', 'b', 'c']) await cache.get(key);
    await cache.get('a'); // a is now the most recently used
    await cache.get('d');
    expect(cache.size).toBe(3);
    expect(state.calls).toBe(4);
    await cache.get('a');
    await cache.get('c');
    expect(state.calls).toBe(4);
    await cache.get('b'); // evicted, so minted again
    expect(state.calls).toBe(5);
  });

  it('takes the mint per call and follows a custom renewal point', async () => {
    const clock = new FakeClock();
    const {state, mint} = minter(clock, 60 * MIN);
    const cache = new TokenCache<Tok>({clock, renewAt: (_minted, expires) => expires - 5 * MIN});
    await cache.get('role', mint);
    await clock.advance(54 * MIN);
    await cache.get('role', mint);
    expect(state.calls).toBe(1);
    await clock.advance(1 * MIN);
    await cache.get('role', mint);
    expect(state.calls).toBe(2);
    expect(() => cache.get('other')).toThrow(/expected a mint function/);
  });

  it('validates its options', () => {
    const clock = new FakeClock();
    expect(() => new TokenCache<Tok>({clock, maxEntries: 0})).toThrow('Expected `maxEntries` to be an integer >= 1, got 0');
    expect(() => new TokenCache<Tok>({clock, retryBackoffMs: -1})).toThrow('Expected `retryBackoffMs` to be a finite number >= 0, got -1');
  });
});
