/**
 * Adversarial: with `regions: ["*"]`, what the planner knows of an account's regions (its last
 * ListRegions answer, the regions it still holds because an answer dropped them) was forgotten as
 * soon as one organization walk missed the account — the walk the two-walk rule forgives. When the
 * account came back, its first ListRegions answer was taken alone: one that lacked an opt-in
 * region (an inconsistent answer, or a region opted out whose clusters still exist) left the
 * region unlisted, and its clusters, covered by no source, were deregistered. The real
 * Organizations, STS, Account and EKS clients against the wire-level fake, through Discovery.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeAws, type FakeAws, type FakeOrganization} from '../fakes/aws-fakes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {organizationWorld} from '../helpers/org-world.ts';

const MGMT = '111111111111';
const MEMBER = '222222222222';
/** An account of another OU, which a second organization matcher walks. */
const OTHER = '333333333333';
const KEY = {accessKeyId: 'AKIAREGIONWALKMISS01', secretAccessKey: 'region-walk-miss-secret'};
const ROLE = 'kube-discovery';
const HOME = `home-eks-us-east-1-${MEMBER}`;
const FAR = `far-eks-me-south-1-${MEMBER}`;

let fake: FakeAws;
let org: FakeOrganization;
let unit: string;
let otherUnit: string;
let restoreEnv: () => void;

beforeAll(async () => {
  const made = organizationWorld(MGMT, KEY);
  const world = made.world;
  org = made.org;
  unit = org.addUnit('prod');
  otherUnit = org.addUnit('other');
  made.addMember(MEMBER, unit, ROLE);
  made.addMember(OTHER, otherUnit, ROLE);
  world.enabledRegions.set(OTHER, ['us-east-1']);
  world.addCluster(OTHER, 'us-east-1', {name: 'other'});
  world.enabledRegions.set(MEMBER, ['me-south-1', 'us-east-1']);
  world.addCluster(MEMBER, 'us-east-1', {name: 'home'});
  world.addCluster(MEMBER, 'me-south-1', {name: 'far'});
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

const deletes = (report: CycleReport): string[] => report.items.filter((i) => i.action === 'delete').map((i) => i.name);

const matcher = (include: string): string => `    - types: [eks]
      regions: ["*"]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["${include}"], exclude: ${include === '*' ? `["${otherUnit}"]` : '[]'}}}
`;

describe('an account one walk missed, whose next region list lacks a region', () => {
  // With a second organization matcher (another OU), whose walk has never had the account: its plan,
  // before or after the missing walk's, must not forget what the first one kept.
  it.each([
    ['one organization matcher', (): string[] => [matcher('*')]],
    ['a second organization matcher planned after it', (): string[] => [matcher('*'), matcher(otherUnit)]],
    ['a second organization matcher planned before it', (): string[] => [matcher(otherUnit), matcher('*')]],
  ])('keeps the clusters of the region its answer dropped, as it would have without the missed walk (%s)', async (_, matchers) => {
    fake.world.enabledRegions.set(MEMBER, ['me-south-1', 'us-east-1']);
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: g
  aws:
${matchers().join('')}storage: {type: memory}
`,
      'region-walk-miss.yaml',
    );
    const others = matchers().length > 1 ? [`other-eks-us-east-1-${OTHER}`] : [];
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(KEY)});
    // The planner's clock: the region list is asked again once its hour is over.
    const clock = new FakeClock(Date.now());
    // No call hangs here: the deadlines only bound a stuck test, and a good call on a loaded machine stays within them.
    const discovery = new Discovery({config, clock: systemClock, aws: {requestTimeoutMs: ROUND_TRIP.timeout, credentialProvider: (role) => providers.provider(role), organizations: {organizationsTimeoutMs: ROUND_TRIP.timeout, clock}}});
    const registrar = createRegistrar(backend, heartbeat, 'g');
    const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
    try {
      await discovery.runCycle(registrar);
      expect(await names()).toEqual([FAR, HOME, ...others].sort());

      // One walk without the account (moved while it ran): kept, stale.
      org.removeAccount(MEMBER);
      const missed = await discovery.runCycle(registrar);
      expect(deletes(missed)).toEqual([]);

      // Back in the next walk, but its ListRegions answer lacks me-south-1, where EKS still lists `far`.
      org.addAccount(MEMBER, {parent: unit});
      fake.world.enabledRegions.set(MEMBER, ['us-east-1']);
      await clock.advance(2 * 3_600_000);
      const back = await discovery.runCycle(registrar);
      expect(deletes(back)).toEqual([]);
      // A matcher other than the first suffixes its source ids (`#1`).
      expect(back.sources.map((s) => s.id.replace(/#\d+$/, ''))).toContain(`eks:me-south-1:${MEMBER}`);
      expect(await names()).toEqual([FAR, HOME, ...others].sort());

      // An account gone from two walks in a row is deregistered, and what was known of it forgotten.
      org.removeAccount(MEMBER);
      expect(deletes(await discovery.runCycle(registrar))).toEqual([]);
      expect(deletes(await discovery.runCycle(registrar))).toEqual([FAR, HOME].sort());
      org.addAccount(MEMBER, {parent: unit});
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});
