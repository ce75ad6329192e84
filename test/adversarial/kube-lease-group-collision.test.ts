/**
 * Adversarial: two discovery groups in one namespace whose names give one election Lease name.
 * Group names may hold `_` and `.`; the Lease name `kube-discovery-leader-<group>` maps `_` to `-`,
 * so `prod_eu` and `prod-eu` campaign for the same Lease. The group that wrote it first leads; every
 * replica of the other one reads a live holder and follows it for ever: that group never runs a
 * cycle, registers nothing new, and once the heartbeat TTL passes every cluster it had registered
 * lapses (the kube_server entries of the KubeServer name collision, kube-object-name-collision.test.ts,
 * have the same cause). Existing Lease names must not change (a rolling upgrade would split the
 * election), so the group that finds the Lease taken by another group campaigns on a name of its own.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {LeaseElection, electionLeaseName} from '../../src/ha/lease-election.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {quiet, startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let env: KubeEnv;
let clock: FakeClock;
const running: LeaseElection[] = [];

async function election(identity: string, group: string): Promise<LeaseElection> {
  const e = new LeaseElection({client: await env.clientAs(identity), namespace: 'kd', group, identity, clock, leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000});
  running.push(e);
  return e;
}

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
});
afterEach(async () => {
  for (const e of running.splice(0)) await e.stop();
  await env.close();
});

it('groups prod_eu and prod-eu in one namespace each get a leader, and the existing Lease keeps its name', async () => {
  expect(electionLeaseName('prod_eu')).toBe(electionLeaseName('prod-eu'));
  const first = await election('eu-dash-0', 'prod-eu');
  await first.start();
  const second = await election('eu-underscore-0', 'prod_eu');
  const secondFollower = await election('eu-underscore-1', 'prod_eu');
  await second.start();
  await secondFollower.start();
  for (let i = 0; i < 12; i++) {
    await clock.advance(2_000);
    await quiet(env.server);
  }
  expect(first.state()).toMatchObject({role: 'leader', leader: 'eu-dash-0'});
  expect(second.state(), 'the second group never gets a leader').toMatchObject({role: 'leader', leader: 'eu-underscore-0'});
  expect(secondFollower.state()).toEqual({role: 'follower', leader: 'eu-underscore-0'});
  // The first group's Lease is where it always was.
  expect((env.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName('prod-eu'))?.['spec'] as {holderIdentity?: string} | undefined)?.holderIdentity).toBe('eu-dash-0');
});

it("a group following the other group's unlabelled Lease (written by an older version) gets a leader of its own once that group labels it", async () => {
  // The other group's leader, still on the older version: a Lease without the group label.
  const admin = await env.client();
  const name = electionLeaseName('prod-eu');
  const at = new Date(clock.now()).toISOString().replace(/Z$/, '000Z');
  await admin.request({method: 'POST', path: '/apis/coordination.k8s.io/v1/namespaces/kd/leases', body: {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name}, spec: {holderIdentity: 'eu-dash-0', leaseDurationSeconds: 15, acquireTime: at, renewTime: at, leaseTransitions: 0}}});
  const underscore = await election('eu-underscore-0', 'prod_eu');
  await underscore.start();
  expect(underscore.state(), 'an unlabelled Lease is taken as the group\'s own, as before').toEqual({role: 'follower', leader: 'eu-dash-0'});

  // The other group's pod restarts on this version: it renews its Lease, now with its group's label.
  const dash = await election('eu-dash-0', 'prod-eu');
  await dash.start();
  for (let i = 0; i < 3; i++) {
    await clock.advance(2_000);
    await quiet(env.server);
  }
  expect(dash.state()).toMatchObject({role: 'leader', leader: 'eu-dash-0'});
  expect(underscore.state()).toMatchObject({role: 'leader', leader: 'eu-underscore-0'});
});
