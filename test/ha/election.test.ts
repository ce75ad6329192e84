/**
 * Leader election on a real etcd: two replicas in one process, each with its own client.
 * A session meant to lapse uses a 2 s TTL so lapses take seconds; a TCP proxy partitions one
 * replica from etcd. Every other session has a TTL longer than any test: a loaded machine can stall
 * the event loop past a 2 s session's renew deadline, and a leader that steps down then fails a
 * test that never meant its session to lapse.
 */
import {afterAll, afterEach, beforeAll, expect, it} from 'vitest';
import {FencedError} from '../../src/core/errors.ts';
import {LeaderElection, type LeaderState} from '../../src/ha/election.ts';
import {openEtcdBackend, type EtcdBackend} from '../../src/registry/etcd.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {startTcpProxy} from '../helpers/tcp-proxy.ts';

const SESSION_TTL_MS = 2_000;
/** The TTL of a session that must not lapse: longer than a test may run, so only stop() ends it. */
const LASTING_TTL_MS = 120_000;

/** One replica: its own etcd client and election, with every role change it announced. */
interface Replica {
  readonly id: string;
  readonly backend: EtcdBackend;
  readonly election: LeaderElection;
  readonly changes: Array<LeaderState & {at: number}>;
}

describeWithEtcd('leader election on etcd', () => {
  let etcd: TestEtcd;
  let groups = 0;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterEach(async () => {
    await Promise.all(replicas.map((r) => r.election.stop()));
    await Promise.all(replicas.map((r) => r.backend.close()));
    replicas = [];
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  /** A replica whose session lapses after `ttlMs` once it cannot be kept alive (the short TTL by default). */
  async function replica(id: string, group: string, {endpoint = etcd.endpoint, ttlMs = SESSION_TTL_MS} = {}): Promise<Replica> {
    const backend = await openEtcdBackend({endpoints: [endpoint], prefix: '/election-test/', requestTimeoutMs: 1_000});
    const election = new LeaderElection({backend, group, replicaId: id, sessionTtlMs: ttlMs, retryDelayMs: 200});
    const changes: Replica['changes'] = [];
    election.onChange((state) => changes.push({...state, at: Date.now()}));
    const r = {id, backend, election, changes};
    replicas.push(r);
    await election.start();
    return r;
  }

  /** Exactly one leader, and the other replica names it. */
  function expectOneLeader(a: Replica, b: Replica): Replica {
    const leaders = [a, b].filter((r) => r.election.isLeader());
    expect(leaders.map((r) => r.id)).toHaveLength(1);
    const [leader] = leaders as [Replica];
    const follower = leader === a ? b : a;
    expect(follower.election.state()).toEqual({role: 'follower', leader: leader.id});
    return leader;
  }

  it('elects exactly one leader; the follower knows who it is', async () => {
    const group = `g${groups++}`;
    const a = await replica('replica-a', group, {ttlMs: LASTING_TTL_MS});
    const b = await replica('replica-b', group, {ttlMs: LASTING_TTL_MS});
    expect(a.election.state()).toMatchObject({role: 'leader', leader: 'replica-a', fence: {key: expect.stringMatching(`^election/${group}/`)}});
    expect(expectOneLeader(a, b)).toBe(a);
  });

  it("the leader's stop() hands over at once, before the session TTL runs out", async () => {
    const group = `g${groups++}`;
    // A's session would last longer than the test: B can lead only because A resigned.
    const a = await replica('replica-a', group, {ttlMs: LASTING_TTL_MS});
    const b = await replica('replica-b', group, {ttlMs: LASTING_TTL_MS});
    const stoppedAt = Date.now();
    await a.election.stop();
    expect(a.election.state()).toEqual({role: 'follower'});
    await until(() => b.election.isLeader(), 20_000);
    expect(Date.now() - stoppedAt).toBeLessThan(LASTING_TTL_MS);
  });

  it("a leader whose client dies is replaced once its session lapses", async () => {
    const group = `g${groups++}`;
    const a = await replica('replica-a', group);
    const b = await replica('replica-b', group, {ttlMs: LASTING_TTL_MS});
    await a.backend.close();
    await until(() => b.election.isLeader(), 3 * SESSION_TTL_MS);
    expect(b.election.state()).toMatchObject({role: 'leader', leader: 'replica-b'});
  });

  it('a partitioned leader steps down before the other takes over, its late writes are fenced, and it returns as follower', async () => {
    const proxy = await startTcpProxy(etcd.endpoint);
    try {
      const group = `g${groups++}`;
      const a = await replica('replica-a', group, {endpoint: proxy.endpoint});
      // Only A's session is meant to lapse; B's must hold until the end.
      const b = await replica('replica-b', group, {ttlMs: LASTING_TTL_MS});
      expect(expectOneLeader(a, b)).toBe(a);
      const oldFence = a.election.fence();
      if (!oldFence) throw new Error('expected the leader to hold a fence');

      proxy.cut();
      await until(() => b.election.isLeader(), 4 * SESSION_TTL_MS);
      const steppedDown = a.changes.find((c) => c.role === 'follower');
      const tookOver = b.changes.find((c) => c.role === 'leader');
      // Never two leaders: A gave up before B was elected.
      expect(steppedDown?.at).toBeLessThanOrEqual(tookOver?.at ?? 0);

      proxy.restore();
      await until(() => a.election.state().leader === 'replica-b', 10_000);
      expectOneLeader(a, b);
      await expect(a.backend.withFence(oldFence).put('kube_servers/g/x', 'late')).rejects.toBeInstanceOf(FencedError);
      expect(await b.backend.get('kube_servers/g/x')).toBeUndefined();
    } finally {
      await proxy.close();
    }
  });

  it('a leader whose election entry was deleted and put back without its lease (by hand) campaigns again, clears that entry and leads with a fence that holds', async () => {
    const proxy = await startTcpProxy(etcd.endpoint);
    const admin = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/election-test/', requestTimeoutMs: 1_000});
    try {
      const group = `g${groups++}`;
      const a = await replica('replica-a', group, {endpoint: proxy.endpoint, ttlMs: LASTING_TTL_MS});
      const oldFence = a.election.fence();
      if (!oldFence) throw new Error('expected the leader to hold a fence');
      // The leader hears of the delete and the put together (as after a restore, or a watch resumed late).
      proxy.hold();
      try {
        await admin.delete(oldFence.key);
        await admin.put(oldFence.key, 'replica-a');
      } finally {
        proxy.release();
      }
      await until(() => a.election.isLeader() && a.election.fence()?.key !== oldFence.key, 10_000);
      const fence = a.election.fence();
      if (!fence) throw new Error('expected the leader to hold a fence');
      await expect(a.backend.withFence(fence).put('kube_servers/g/x', 'written')).resolves.toMatchObject({key: 'kube_servers/g/x'});
      // Left in place, the entry put back by hand would be the oldest for ever, naming a leader no session holds.
      expect(await admin.get(oldFence.key)).toBeUndefined();
    } finally {
      await admin.close();
      await proxy.close();
    }
  });

  it('a write refused because the leader key was replaced makes the leader step down and campaign again; a refusal of an older fence does not', async () => {
    const proxy = await startTcpProxy(etcd.endpoint);
    const admin = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/election-test/', requestTimeoutMs: 1_000});
    try {
      const group = `g${groups++}`;
      const a = await replica('replica-a', group, {endpoint: proxy.endpoint, ttlMs: LASTING_TTL_MS});
      const fence = a.election.fence();
      if (!fence) throw new Error('expected the leader to hold a fence');
      const view = (f: typeof fence): ReturnType<EtcdBackend['withFence']> => admin.withFence(f, (refused) => a.election.fenceRefused(refused));

      await expect(view({...fence, createRevision: '1'}).put('kube_servers/g/x', 'old')).rejects.toBeInstanceOf(FencedError);
      expect(a.election.fence()).toEqual(fence);

      // The election's own connection hears nothing meanwhile: only the refused write can tell it.
      proxy.hold();
      try {
        const entry = await admin.get(fence.key);
        await admin.delete(fence.key);
        await admin.put(fence.key, entry?.value ?? '', ...(entry?.lease ? [{lease: {id: entry.lease, ttlMs: LASTING_TTL_MS}}] : []));
        await expect(view(fence).put('kube_servers/g/x', 'refused')).rejects.toBeInstanceOf(FencedError);
        expect(a.election.isLeader()).toBe(false);
      } finally {
        proxy.release();
      }
      await until(() => a.election.isLeader(), 10_000);
      const next = a.election.fence();
      if (!next) throw new Error('expected the leader to hold a fence');
      expect(next.key).not.toBe(fence.key);
      await expect(view(next).put('kube_servers/g/x', 'written')).resolves.toMatchObject({key: 'kube_servers/g/x'});
    } finally {
      await admin.close();
      await proxy.close();
    }
  });

  it('etcd down longer than the session TTL: everyone steps down, and one leader is elected when it is back', async () => {
    const group = `g${groups++}`;
    const a = await replica('replica-a', group);
    const b = await replica('replica-b', group);
    expectOneLeader(a, b);

    etcd.kill();
    await until(() => !a.election.isLeader() && !b.election.isLeader(), SESSION_TTL_MS + 1_000);
    await new Promise((resolve) => setTimeout(resolve, SESSION_TTL_MS / 2));
    expect([a, b].filter((r) => r.election.isLeader())).toEqual([]);

    await etcd.restart();
    await until(() => [a, b].some((r) => r.election.isLeader()) && [a, b].every((r) => r.election.state().leader !== undefined), 15_000);
    const leader = expectOneLeader(a, b);
    expect(leader.election.fence()).toBeDefined();
  });
});

/** Polls `condition` until it holds; fails after `timeoutMs`. */
async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
