/**
 * Regions of an organization matcher with `regions: ["*"]` come from each member account's
 * `account:ListRegions`. That answer is not a listing of clusters: a region it no longer has
 * (opted out, or an answer that is simply inconsistent) must not deregister the clusters
 * registered there. They stay until a successful EKS listing of that region no longer has them
 * (a region that answers "not enabled" keeps them, stale), across restarts too. And a ListRegions
 * answer that fails or is malformed or empty never drops a region. Real Organizations, STS,
 * Account and EKS clients against the wire-level AWS fake, through Discovery and Heartbeat.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws, type FaultHook} from '../fakes/aws-fakes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

const MGMT = '111111111111';
const MEMBER = '222222222222';
const KEY = {accessKeyId: 'AKIAREGIONGRACE00001', secretAccessKey: 'region-grace-secret'};
const ROLE = 'kube-discovery';
const HOME = `home-eks-us-east-1-${MEMBER}`;
const OPT_IN = `far-eks-me-south-1-${MEMBER}`;
const HOUR = 3_600_000;

let fake: FakeAws;
let clock: FakeClock;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  clock = new FakeClock(Date.now());
  const world = new FakeAwsWorld({clock});
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  org.addAccount(MEMBER, {parent: org.addUnit('prod')});
  world.addAccount(MEMBER, {roles: [{arn: `arn:aws:iam::${MEMBER}:role/${ROLE}`, trust: [MGMT]}]});
  world.addCluster(MEMBER, 'us-east-1', {name: 'home'});
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

interface World {
  readonly registrar: Registrar;
  /**
   * A new process over the same registry: a restart, a leader change, a rebuilt planner or `once`.
   * Its AWS calls end at `requestTimeoutMs`: generous unless a call is made to hang.
   */
  replica(requestTimeoutMs?: number): Discovery;
  names(): Promise<string[]>;
  close(): Promise<void>;
}

async function world(): Promise<World> {
  fake.world.enabledRegions.set(MEMBER, ['me-south-1', 'us-east-1']);
  fake.world.addCluster(MEMBER, 'me-south-1', {name: 'far'});
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: regions
  aws:
    - types: [eks]
      regions: ["*"]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["*"], exclude: []}}
storage: {type: memory}
`,
    'region-grace.yaml',
  );
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'regions', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const providers = new AwsCredentialProviders({env: process.env, clock, base: () => Promise.resolve(KEY)});
  const registrar = createRegistrar(backend, heartbeat, 'regions');
  return {
    registrar,
    replica: (requestTimeoutMs = ROUND_TRIP.timeout) =>
      new Discovery({config, clock: systemClock, aws: {requestTimeoutMs, credentialProvider: (role) => providers.provider(role), organizations: {organizationsTimeoutMs: requestTimeoutMs, clock}}}),
    names: async () => (await registrar.current()).map((s) => s.metadata.name).sort(),
    close: async () => {
      fake.fault = undefined;
      fake.world.enabledRegions.delete(MEMBER);
      fake.world.removeCluster(MEMBER, 'me-south-1', 'far');
      await heartbeat.stop({deregister: false});
      await backend.close();
    },
  };
}

const action = (report: CycleReport, name: string): string | undefined => report.items.find((i) => i.name === name)?.action;
const deletes = (report: CycleReport): string[] => report.items.filter((i) => i.action === 'delete').map((i) => i.name);
const optedOut: FaultHook = (ctx) => (ctx.region === 'me-south-1' && ctx.service === 'eks' ? {optInRequired: true} : undefined);

describe('a region gone from an account\'s ListRegions answer', () => {
  it('keeps its clusters until an EKS listing of that region no longer has them, across a restart', async () => {
    const w = await world();
    try {
      const discovery = w.replica();
      await discovery.runCycle(w.registrar);
      expect(await w.names()).toEqual([OPT_IN, HOME].sort());

      // The refreshed answer lacks me-south-1, but EKS there still lists the cluster: it stays, not even stale.
      fake.world.enabledRegions.set(MEMBER, ['us-east-1']);
      await clock.advance(2 * HOUR);
      const inconsistent = await discovery.runCycle(w.registrar);
      expect(deletes(inconsistent)).toEqual([]);
      expect(action(inconsistent, OPT_IN)).toBe('unchanged');

      // The region really opted out: EKS answers "not enabled", which is no listing: kept, stale.
      fake.fault = optedOut;
      const disabled = await discovery.runCycle(w.registrar);
      expect(deletes(disabled)).toEqual([]);
      expect(action(disabled, OPT_IN)).toBe('stale');

      // A new process has no cached region list: the registry tells it me-south-1 has entries.
      const restarted = w.replica();
      const afterRestart = await restarted.runCycle(w.registrar);
      expect(deletes(afterRestart)).toEqual([]);
      expect(action(afterRestart, OPT_IN)).toBe('stale');
      expect(await w.names()).toEqual([OPT_IN, HOME].sort());

      // The region answers again and its listing no longer has the cluster: deregistered, and the
      // region, which the account does not enable, is not asked any more.
      fake.fault = undefined;
      fake.world.removeCluster(MEMBER, 'me-south-1', 'far');
      const gone = await restarted.runCycle(w.registrar);
      expect(deletes(gone)).toEqual([OPT_IN]);
      const after = await restarted.runCycle(w.registrar);
      expect(after.sources.filter((s) => s.account === MEMBER).map((s) => s.id)).toEqual([`eks:us-east-1:${MEMBER}`]);
      // Put back for close(), which removes it.
      fake.world.addCluster(MEMBER, 'me-south-1', {name: 'far'});
    } finally {
      await w.close();
    }
  });
});

// A failed, malformed or empty ListRegions answer is no region list: no region is dropped, on a
// process's first answer (every region of the partition is listed) or on a refresh (the last known list).
// Only the hang row has a short deadline (its good calls share the client with the hung one).
const LIST_REGIONS_FAULTS: {fault: string; hook?: FaultHook; enabled?: readonly string[]; requestTimeoutMs?: number}[] = [
  {fault: '500 InternalFailure', hook: (c) => (c.operation === 'ListRegions' ? {code: 'InternalFailure', status: 500} : undefined)},
  {fault: 'AccessDeniedException', hook: (c) => (c.operation === 'ListRegions' ? {code: 'AccessDeniedException', status: 403} : undefined)},
  {fault: 'throttled', hook: (c) => (c.operation === 'ListRegions' ? {code: 'TooManyRequestsException', status: 429} : undefined)},
  {fault: '200 cut-off JSON', hook: (c) => (c.operation === 'ListRegions' ? {malformed: 'invalid-json'} : undefined)},
  {fault: '200 {} (no Regions list)', hook: (c) => (c.operation === 'ListRegions' ? {malformed: 'missing-fields'} : undefined)},
  {fault: '200 with no enabled region', enabled: []},
  {fault: 'hang', hook: (c) => (c.operation === 'ListRegions' ? {hang: true} : undefined), requestTimeoutMs: 1000},
];

describe('ListRegions faults drop no region', () => {
  for (const row of LIST_REGIONS_FAULTS) {
    it(`${row.fault}: nothing deregistered, on a first answer and on a refresh`, async () => {
      const w = await world();
      try {
        const discovery = w.replica(row.requestTimeoutMs);
        await discovery.runCycle(w.registrar);
        const apply = (): void => {
          if (row.hook) fake.fault = row.hook;
          if (row.enabled) fake.world.enabledRegions.set(MEMBER, row.enabled);
        };
        apply();
        await clock.advance(2 * HOUR);
        const refresh = await discovery.runCycle(w.registrar);
        expect(deletes(refresh)).toEqual([]);
        expect(action(refresh, OPT_IN)).toBe('unchanged');
        const first = await w.replica(row.requestTimeoutMs).runCycle(w.registrar);
        expect(deletes(first)).toEqual([]);
        expect(action(first, OPT_IN)).toBe('unchanged');
        expect(await w.names()).toEqual([OPT_IN, HOME].sort());
      } finally {
        await w.close();
      }
    }, 30_000);
  }
});
