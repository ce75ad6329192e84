// Leader election on a coordination.k8s.io Lease, against the fake API server, on a FakeClock.
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {FencedError} from '../../src/core/errors.ts';
import {LeaseElection, electionLeaseName} from '../../src/ha/lease-election.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {fencedView} from '../../src/registry/fenced-view.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {quiet, startKubeEnv} from '../kubernetes/kube-env.ts';
import {eventually} from '../registry/contract.ts';

let env: KubeEnv;
let clock: FakeClock;
const running: LeaseElection[] = [];

/**
 * A replica's election. `requestTimeoutMs` bounds each request in real time: short only for a
 * replica whose requests are meant to hang, so a slow answer on a loaded machine is not one.
 */
async function election(identity: string, group = 'mgmt', requestTimeoutMs = 10_000): Promise<LeaseElection> {
  const e = new LeaseElection({client: await env.clientAs(identity, {requestTimeoutMs}), namespace: 'kd', group, identity, clock, leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000});
  running.push(e);
  return e;
}

function lease(group = 'mgmt'): Record<string, unknown> | undefined {
  return env.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName(group))?.['spec'] as Record<string, unknown> | undefined;
}

/** Advances fake time in retry periods, letting each round's real HTTP finish. */
async function tick(periods: number): Promise<void> {
  for (let i = 0; i < periods; i++) {
    await clock.advance(2_000);
    await quiet(env.server);
  }
}

/** Ticks retry periods until `check` passes (each round's HTTP runs in real time). */
async function tickUntil(check: () => void): Promise<void> {
  await eventually(async () => {
    await tick(1);
    check();
  }, 15_000);
}

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
});
afterEach(async () => {
  env.server.setFault(undefined);
  for (const e of running.splice(0)) await e.stop();
  await env.close();
});

describe('Lease election', () => {
  it('one replica leads and writes the Lease as Kubernetes controllers do; the other follows it', async () => {
    const a = await election('replica-a');
    const b = await election('replica-b');
    await a.start();
    await b.start();
    expect(a.state()).toMatchObject({role: 'leader', leader: 'replica-a'});
    expect(b.state()).toEqual({role: 'follower', leader: 'replica-a'});
    expect(lease()).toMatchObject({holderIdentity: 'replica-a', leaseDurationSeconds: 15, leaseTransitions: 0});
    const first = lease();
    await tick(2);
    expect(lease()?.['renewTime']).not.toBe(first?.['renewTime']);
    expect(lease()?.['acquireTime']).toBe(first?.['acquireTime']);
    expect(b.state().role).toBe('follower');
  });

  it('a leader cut off from the API server steps down within the renew deadline; the other takes over after the lease duration', async () => {
    const a = await election('replica-a', 'mgmt', 2_000);
    const b = await election('replica-b');
    await a.start();
    await b.start();
    const view = fencedView(new MemoryBackend({clock}), () => a.holds(), 'the test lease');
    await view.put('k/a', 'x');
    env.server.setFault((call) => (call.user === 'replica-a' ? 'hang' : undefined));
    await tick(6);
    // 12 s without renewal > renew deadline: fenced, although nobody else leads yet.
    expect(a.state().role).toBe('follower');
    await expect(view.put('k/b', 'x')).rejects.toBeInstanceOf(FencedError);
    await tickUntil(() => expect(b.state()).toMatchObject({role: 'leader', leader: 'replica-b'}));
    expect(lease()).toMatchObject({holderIdentity: 'replica-b', leaseTransitions: 1});
    env.server.setFault(undefined);
    // Its hung requests end at the client deadline (real time); then it sees the new holder.
    await tickUntil(() => expect(a.state()).toEqual({role: 'follower', leader: 'replica-b'}));
  });

  it('stop() releases the Lease so the successor leads at its next attempt', async () => {
    const a = await election('replica-a');
    const b = await election('replica-b');
    await a.start();
    await b.start();
    await a.stop();
    expect(lease()).toMatchObject({holderIdentity: ''});
    await tickUntil(() => expect(b.state().role).toBe('leader'));
  });

  it('elects one leader per discovery group', async () => {
    const a = await election('replica-a', 'east');
    const b = await election('replica-b', 'west');
    await a.start();
    await b.start();
    expect(a.state().role).toBe('leader');
    expect(b.state().role).toBe('leader');
    expect(lease('east')?.['holderIdentity']).toBe('replica-a');
    expect(lease('west')?.['holderIdentity']).toBe('replica-b');
  });
});
