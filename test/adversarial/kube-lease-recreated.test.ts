/**
 * Adversarial: the election Lease of `storage: kubernetes` (or `leader_election: kubernetes_lease`)
 * is changed by someone other than the replicas while one leads: `kubectl delete lease`, a restore
 * (Velero, a GitOps tool re-applying it) naming another replica as holder, holderIdentity cleared by
 * hand to force a fail-over, or a manifest applied without `leaseDurationSeconds`. The leader's
 * writes are fenced only by its own renew deadline (src/registry/fenced-view.ts), which holds only
 * while no successor leads before one lease duration has passed since it last saw the leader's
 * claim. A replica that found the Lease gone (and created it), naming itself or released led at
 * once, while the old leader, its requests slow, still wrote for up to its renew deadline: two
 * leaders at once, whose writes move entries back and forth between their registry Leases (see
 * kube-deposed-late-writes.test.ts for how that loses clusters). A Lease without a duration could
 * not be read at all: the leader stepped down and no replica led again, so no new cluster was
 * registered and the entries lapsed with nobody renewing them.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {LeaseElection, electionLeaseName} from '../../src/ha/lease-election.ts';
import type {KubeClient} from '../../src/registry/kube-client.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {quiet, startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const PATH = `/apis/coordination.k8s.io/v1/namespaces/kd/leases/${electionLeaseName('mgmt')}`;

let env: KubeEnv;
let clock: FakeClock;
let admin: KubeClient;
const running: LeaseElection[] = [];

/** A replica's election; `requestTimeoutMs` (real time) bounds a request the test makes hang. */
async function election(identity: string, requestTimeoutMs = 10_000): Promise<LeaseElection> {
  const e = new LeaseElection({client: await env.clientAs(identity, {requestTimeoutMs}), namespace: 'kd', group: 'mgmt', identity, clock, leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000});
  running.push(e);
  return e;
}

/** Advances fake time one retry period at a time, letting each round's real HTTP finish; true when both ever held at once. */
async function bothHeld(a: LeaseElection, b: LeaseElection, periods: number): Promise<boolean> {
  let both = false;
  for (let i = 0; i < periods; i++) {
    await clock.advance(2_000);
    await quiet(env.server);
    both ||= a.holds() && b.holds();
  }
  return both;
}

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
  admin = await env.client();
});
afterEach(async () => {
  env.server.setFault(undefined);
  for (const e of running.splice(0)) await e.stop();
  await env.close();
});

it('kubectl delete lease while the leader is slow to renew: the replica that recreates it leads only once the old leader stepped down', async () => {
  const a = await election('replica-a', 3_000);
  const b = await election('replica-b');
  await a.start();
  await b.start();
  expect(a.holds()).toBe(true);
  // The leader's requests go unanswered (its node's network), then the Lease is deleted.
  env.server.setFault((call) => (call.user === 'replica-a' ? 'hang' : undefined));
  await admin.request({method: 'DELETE', path: PATH});

  expect(await bothHeld(a, b, 10), 'two replicas held the Lease at once').toBe(false);
  expect(b.state()).toMatchObject({role: 'leader', leader: 'replica-b'});
  env.server.setFault(undefined);
});

// A restore of an older copy, from when replica-b held it (same object, holderIdentity replica-b), and an operator
// "releasing" it by hand to force a fail-over (holderIdentity ''); the duration stays as the leader wrote it.
it.each([
  ['a restored Lease naming a follower: it leads', 'replica-b'],
  ['holderIdentity cleared by hand: the follower takes it and leads', ''],
])('%s only once the leader, slow to renew, stepped down', async (_, holder) => {
  const a = await election('replica-a', 3_000);
  const b = await election('replica-b');
  await a.start();
  await b.start();
  env.server.setFault((call) => (call.user === 'replica-a' ? 'hang' : undefined));
  const current = (await admin.request({method: 'GET', path: PATH})) as {metadata: Record<string, unknown>; spec: Record<string, unknown>};
  await admin.request({method: 'PUT', path: PATH, body: {...current, spec: {...current.spec, holderIdentity: holder}}});

  expect(await bothHeld(a, b, 10), 'two replicas held the Lease at once').toBe(false);
  expect(b.state()).toMatchObject({role: 'leader', leader: 'replica-b'});
  env.server.setFault(undefined);
});

it('the Lease deleted and created again naming the leader (a GitOps tool re-applying it): the leader keeps leading without a gap, the follower follows', async () => {
  const a = await election('replica-a');
  const b = await election('replica-b');
  await a.start();
  await b.start();
  const current = (await admin.request({method: 'GET', path: PATH})) as {metadata: {name: string; labels?: unknown}; spec: Record<string, unknown>};
  await admin.request({method: 'DELETE', path: PATH});
  await admin.request({method: 'POST', path: PATH.slice(0, PATH.lastIndexOf('/')), body: {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name: current.metadata.name}, spec: current.spec}});

  for (let i = 0; i < 10; i++) {
    await clock.advance(2_000);
    await quiet(env.server);
    expect(a.holds(), 'the leader stopped leading').toBe(true);
    expect(b.state()).toEqual({role: 'follower', leader: 'replica-a'});
  }
});

it('a Lease applied without leaseDurationSeconds: a replica leads again and the Lease gets its duration back', async () => {
  const a = await election('replica-a');
  const b = await election('replica-b');
  await a.start();
  await b.start();
  // A manifest applied over it (kubectl apply, a GitOps tool) that gives holder and times but no duration: valid for the API server.
  const current = (await admin.request({method: 'GET', path: PATH})) as {metadata: Record<string, unknown>; spec: Record<string, unknown>};
  const {leaseDurationSeconds: _dropped, ...spec} = current.spec;
  await admin.request({method: 'PUT', path: PATH, body: {...current, spec}});

  let leaderless = 0;
  for (let i = 0; i < 15; i++) {
    await clock.advance(2_000);
    await quiet(env.server);
    if (!a.holds() && !b.holds()) leaderless++;
    expect(a.holds() && b.holds(), 'two replicas held the Lease at once').toBe(false);
  }
  expect([a.state().role, b.state().role], 'no replica leads the discovery group').toContain('leader');
  expect(leaderless, 'retry periods without a leader').toBe(0);
  const spec2 = env.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName('mgmt'))?.['spec'] as Record<string, unknown>;
  expect(spec2['leaseDurationSeconds']).toBe(15);
});
