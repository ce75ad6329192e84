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
