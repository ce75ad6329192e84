/**
 * The registry backend contract, as one reusable suite: every backend's test file calls
 * `backendContract(name, make)`. Backends on an injected clock (memory, sqlite) get a FakeClock;
 * a backend on real time (etcd) passes `{supportsFakeClock: false, realTimeTtlMs}` and returns an
 * `advance` that waits in real time, or leaves `realTimeTtlMs` out to skip the time-dependent cases.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import type {Lease, RegistryBackend, WatchEvent} from '../../src/registry/backend.ts';
import {LeaseNotFoundError} from '../../src/registry/backend.ts';

/** What a backend's `make` returns. */
export interface ContractSubject {
  readonly backend: RegistryBackend;
  /** Moves time forward; defaults to the FakeClock's `advance`. Real-time backends wait. */
  readonly advance?: (ms: number) => Promise<void>;
  /** Removes files, stops servers; runs after the backend is closed. */
  readonly cleanup?: () => Promise<void>;
}

/** How a backend relates to time. */
export interface ContractOptions {
  /** True when `make` honours the FakeClock it is given (memory, sqlite). */
  readonly supportsFakeClock: boolean;
  /** Real-time backends: lease TTL for the time-dependent cases; without it they are skipped. */
  readonly realTimeTtlMs?: number;
}

/** Runs the whole contract against one backend. */
export function backendContract(
  name: string,
  make: (clock: FakeClock | undefined) => Promise<ContractSubject>,
  options: ContractOptions = {supportsFakeClock: true},
): void {
  const fake = options.supportsFakeClock;
  const timed = fake || options.realTimeTtlMs !== undefined;
  // With a fake clock, expiry is checked to the millisecond; on real time, with generous margins.
  const ttl = fake ? 30_000 : (options.realTimeTtlMs ?? 0);
  const stillAliveAt = fake ? ttl - 1 : Math.floor(ttl / 4);
  const surelyExpiredAt = fake ? ttl : ttl * 2;
  // Fake time is free: look much later. Real time waits, so only as long as needed.
  const muchLater = fake ? ttl * 10 : surelyExpiredAt + ttl;

  describe(`registry backend contract: ${name}`, () => {
    let clock: FakeClock | undefined;
    let subject: ContractSubject;
    let backend: RegistryBackend;
    let elapsed = 0;

    async function advance(ms: number): Promise<void> {
      elapsed += ms;
      if (subject.advance) return subject.advance(ms);
      if (clock) return clock.advance(ms);
      throw new Error(`backend ${name} runs on real time but its make() returned no advance()`);
    }

    /** Advances to `at` ms after the test's start. */
    async function advanceTo(at: number): Promise<void> {
      if (at > elapsed) await advance(at - elapsed);
    }

    async function watchAll(prefix: string): Promise<WatchEvent[]> {
      const events: WatchEvent[] = [];
      await backend.watch(prefix, (event) => events.push(event));
      return events;
    }

    beforeEach(async () => {
      clock = fake ? new FakeClock() : undefined;
      elapsed = 0;
      subject = await make(clock);
      backend = subject.backend;
    });

    afterEach(async () => {
      await backend.close().catch(() => undefined);
      await subject.cleanup?.();
    });

    it('returns what was put, with a decimal revision; a missing key is undefined', async () => {
      const put = await backend.put('kube_servers/g/a', '{"a":1}');
      expect(put).toMatchObject({key: 'kube_servers/g/a', value: '{"a":1}'});
      expect(put.revision).toMatch(/^\d+$/);
      expect(await backend.get('kube_servers/g/a')).toEqual(put);
      expect(await backend.get('kube_servers/g/missing')).toBeUndefined();
    });

    it('gives every write a new, higher revision across the whole backend', async () => {
      const first = await backend.put('k/a', '1');
      const other = await backend.put('k/b', '1');
      const second = await backend.put('k/a', '2');
      expect(BigInt(other.revision)).toBeGreaterThan(BigInt(first.revision));
      expect(BigInt(second.revision)).toBeGreaterThan(BigInt(other.revision));
      expect(await backend.get('k/a')).toMatchObject({value: '2', revision: second.revision});
    });

    it('lists live entries under a prefix, sorted by key, and nothing outside it', async () => {
      for (const key of ['kube_servers/g1/b', 'kube_servers/g10/x', 'kube_servers/g1/a', 'kube_servers/g1', 'kube_servers/g2/c']) {
        await backend.put(key, key);
      }
      expect((await backend.list('kube_servers/g1/')).map((i) => i.key)).toEqual(['kube_servers/g1/a', 'kube_servers/g1/b']);
      expect((await backend.list('kube_servers/')).map((i) => i.key)).toEqual([
        'kube_servers/g1',
        'kube_servers/g1/a',
        'kube_servers/g1/b',
        'kube_servers/g10/x',
        'kube_servers/g2/c',
      ]);
      expect(await backend.list('nothing/')).toEqual([]);
    });

    it('treats % and _ in a prefix literally and matches case-sensitively', async () => {
      for (const key of ['p%/1', 'pX/1', 'p_/1', 'pY/1', 'P_/1']) await backend.put(key, key);
      expect((await backend.list('p%')).map((i) => i.key)).toEqual(['p%/1']);
      expect((await backend.list('p_')).map((i) => i.key)).toEqual(['p_/1']);
      expect((await backend.list('')).map((i) => i.key)).toEqual(['P_/1', 'p%/1', 'pX/1', 'pY/1', 'p_/1']);
    });

    it('orders keys by code point, the byte order etcd uses', async () => {
      for (const key of ['u/\u{1F600}', 'u/\uffee', 'u/a']) await backend.put(key, 'x');
      expect((await backend.list('u/')).map((i) => i.key)).toEqual(['u/a', 'u/\uffee', 'u/\u{1F600}']);
    });

    it('deletes an entry and reports whether it existed', async () => {
      await backend.put('k/a', 'x');
      expect(await backend.delete('k/a')).toBe(true);
      expect(await backend.get('k/a')).toBeUndefined();
      expect(await backend.list('k/')).toEqual([]);
      expect(await backend.delete('k/a')).toBe(false);
    });

    it('attaches an entry to its lease and reports the lease expiry', async () => {
      const before = Date.now();
      const lease = await backend.grantLease(ttl || 60_000);
      const item = await backend.put('k/a', 'x', {lease});
      expect(item.lease).toBe(lease.id);
      if (clock) expect(item.expires).toBe(clock.now() + lease.ttlMs);
      else expect(item.expires).toBeGreaterThanOrEqual(before);
      expect(await backend.get('k/a')).toMatchObject({lease: lease.id, expires: item.expires});
    });

    it('revokeLease deletes the attached entries only, with delete events; revoking twice is harmless', async () => {
      const events = await watchAll('k/');
      const lease = await backend.grantLease(60_000);
      const other = await backend.grantLease(60_000);
      await backend.put('k/a', 'x', {lease});
      await backend.put('k/b', 'x', {lease});
      await backend.put('k/c', 'x', {lease: other});
      await backend.put('k/d', 'x');
      await backend.revokeLease(lease);
      expect((await backend.list('k/')).map((i) => i.key)).toEqual(['k/c', 'k/d']);
      await eventually(() => {
        const deleted = events.flatMap((e) => (e.type === 'delete' ? [e.key] : []));
        expect(deleted.sort()).toEqual(['k/a', 'k/b']);
      });
      await expect(backend.revokeLease(lease)).resolves.toBeUndefined();
    });

    it('refuses to keep alive or write on a revoked lease', async () => {
      const lease = await backend.grantLease(60_000);
      await backend.revokeLease(lease);
      await expect(backend.keepAlive(lease)).rejects.toBeInstanceOf(LeaseNotFoundError);
      await expect(backend.put('k/a', 'x', {lease})).rejects.toBeInstanceOf(LeaseNotFoundError);
      expect(await backend.get('k/a')).toBeUndefined();
    });

    it('watch delivers puts and deletes under its prefix only, and nothing after close', async () => {
      const events: WatchEvent[] = [];
      const watcher = await backend.watch('kube_servers/g1/', (e) => events.push(e));
      const put = await backend.put('kube_servers/g1/a', 'v1');
      await backend.put('kube_servers/g2/a', 'other group');
      await backend.delete('kube_servers/g1/a');
      await eventually(() => expect(events).toHaveLength(2));
      expect(events[0]).toEqual({type: 'put', item: put});
      expect(events[1]).toMatchObject({type: 'delete', key: 'kube_servers/g1/a'});
      const deleteRevision = events[1]?.type === 'delete' ? events[1].revision : '0';
      expect(BigInt(deleteRevision)).toBeGreaterThan(BigInt(put.revision));

      await watcher.close();
      await backend.put('kube_servers/g1/b', 'after close');
      const probe = await watchAll('kube_servers/g1/');
      await backend.put('kube_servers/g1/c', 'marker');
      await eventually(() => expect(probe).toHaveLength(1));
      expect(events).toHaveLength(2);
    });

    it('resumeLease returns a live lease by id and undefined for a revoked one', async (ctx) => {
      if (!backend.resumeLease) ctx.skip();
      const lease = await backend.grantLease(60_000);
      expect(await backend.resumeLease?.(lease.id)).toEqual<Lease>({id: lease.id, ttlMs: 60_000});
      await backend.revokeLease(lease);
      expect(await backend.resumeLease?.(lease.id)).toBeUndefined();
    });

    it('ping resolves while open and rejects after close', async () => {
      await expect(backend.ping()).resolves.toBeUndefined();
      await backend.close();
      await expect(backend.ping()).rejects.toThrow();
    });

    describe.skipIf(!timed)('time-dependent', () => {
      it('returns a leased entry until its TTL and never after; entries without a lease stay', async () => {
        const lease = await backend.grantLease(ttl);
        await backend.put('k/leased', 'x', {lease});
        await backend.put('k/forever', 'x');
        await advanceTo(stillAliveAt);
        expect(await backend.get('k/leased')).toBeDefined();
        await advanceTo(surelyExpiredAt);
        expect(await backend.get('k/leased')).toBeUndefined();
        expect((await backend.list('k/')).map((i) => i.key)).toEqual(['k/forever']);
        await advanceTo(muchLater);
        expect(await backend.get('k/forever')).toMatchObject({value: 'x'});
      });

      it('emits a delete event when a lease expires, without anyone reading', async () => {
        const events = await watchAll('k/');
        const lease = await backend.grantLease(ttl);
        await backend.put('k/a', 'x', {lease});
        await backend.put('k/b', 'x', {lease});
        await advanceTo(fake ? muchLater : surelyExpiredAt);
        await eventually(() => {
          const deleted = events.flatMap((e) => (e.type === 'delete' ? [e.key] : []));
          expect(deleted.sort()).toEqual(['k/a', 'k/b']);
        });
      });

      it('keepAlive extends every entry attached to the lease', async () => {
        const lease = await backend.grantLease(ttl);
        for (const key of ['k/a', 'k/b', 'k/c']) await backend.put(key, 'x', {lease});
        for (let i = 1; i <= 6; i++) {
          await advanceTo((i * ttl) / 2);
          await backend.keepAlive(lease);
        }
        const items = await backend.list('k/');
        expect(items.map((i) => i.key)).toEqual(['k/a', 'k/b', 'k/c']);
        if (clock) for (const item of items) expect(item.expires).toBe(clock.now() + ttl);
        await advanceTo(3 * ttl + surelyExpiredAt);
        expect(await backend.list('k/')).toEqual([]);
      });

      it('keepAlive of an expired lease throws, and so does a put on it', async () => {
        const lease = await backend.grantLease(ttl);
        await advanceTo(surelyExpiredAt);
        await expect(backend.keepAlive(lease)).rejects.toBeInstanceOf(LeaseNotFoundError);
        await expect(backend.put('k/a', 'x', {lease})).rejects.toBeInstanceOf(LeaseNotFoundError);
      });

      it('resumeLease returns undefined once the lease expired', async (ctx) => {
        if (!backend.resumeLease) ctx.skip();
        const lease = await backend.grantLease(ttl);
        await advanceTo(stillAliveAt);
        expect(await backend.resumeLease?.(lease.id)).toMatchObject({id: lease.id});
        await advanceTo(surelyExpiredAt);
        expect(await backend.resumeLease?.(lease.id)).toBeUndefined();
      });
    });
  });
}

/**
 * Retries `check` until it passes: events of a networked backend arrive asynchronously.
 * Local backends deliver synchronously, so the first try passes and no time is spent.
 */
export async function eventually(check: () => void | Promise<void>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
