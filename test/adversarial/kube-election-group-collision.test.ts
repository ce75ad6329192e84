/**
 * Adversarial: the leader election of a discovery group runs on the Lease
 * `kube-discovery-leader-<group>`, the group mapped onto an object name by replacing what a name
 * cannot hold with `-` (src/ha/lease-election.ts). A group may hold `_`, so `prod_eu` and `prod-eu`
 * (two deployments sharing one namespace) campaigned on one Lease: only one replica of the two
 * groups led. The other group never ran a cycle or a heartbeat, so its registry Lease lapsed, its
 * clusters left every reader, and the leading group's reaper deleted them, although every cloud
 * listing still had them.
 */
import {afterEach, beforeEach, expect, it} from 'vitest';
import {LeaseElection, electionLeaseName} from '../../src/ha/lease-election.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let env: KubeEnv;
let clock: FakeClock;
const running: LeaseElection[] = [];

beforeEach(async () => {
  env = await startKubeEnv();
  clock = new FakeClock();
});
afterEach(async () => {
  for (const e of running.splice(0)) await e.stop();
  await env.close();
});

async function election(identity: string, group: string): Promise<LeaseElection> {
  const e = new LeaseElection({client: await env.clientAs(identity), namespace: 'kd', group, identity, clock, leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000});
  running.push(e);
  return e;
}

it('two groups whose names differ only where an object name cannot follow them each elect their own leader', async () => {
  const a = await election('prod-eu-underscore-0', 'prod_eu');
  const b = await election('prod-eu-dash-0', 'prod-eu');
  await a.start();
  await b.start();
  expect({prod_eu: a.state().role, 'prod-eu': b.state().role}).toEqual({prod_eu: 'leader', 'prod-eu': 'leader'});
  expect(electionLeaseName('prod_eu')).not.toBe(electionLeaseName('prod-eu'));
  // A group whose name is already a valid object name keeps its Lease (no new election on upgrade).
  expect(electionLeaseName('prod-eu')).toBe('kube-discovery-leader-prod-eu');
});
