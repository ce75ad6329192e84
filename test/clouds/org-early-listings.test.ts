/**
 * Early listings of an organization matcher (src/clouds/early-listings.ts): from its second cycle
 * on, the (account, region) sources of the last good plan are listed while the organization walk
 * runs; the plan hands on those it still has with the same inputs. Real Organizations, STS and
 * EKS clients against the wire-level fake; the order of calls is read from the fake's request log.
 */
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws, type FakeAwsCall} from '../fakes/aws-fakes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {setEnv} from '../helpers/env.ts';
import {earlyHarness, orgMatcherYaml, type EarlyHarness} from '../helpers/org-early.ts';

const MGMT = '111111111111';
const [A, B, C] = ['222222222222', '333333333333', '444444444444'] as const;
const KEY = {accessKeyId: 'AKIAORGEARLY00000001', secretAccessKey: 'org-early-secret'};
const ROLE = 'kube-discovery';
const EXTERNAL_ID = 'early-ext';
const REGIONS = ['eu-west-1', 'us-east-1'];

let fake: FakeAws;
let clock: FakeClock;
let org: FakeOrganization;
let prod: string;
let restoreEnv: () => void;
let h: EarlyHarness | undefined;

function addMember(world: FakeAwsWorld, account: string): void {
  org.addAccount(account, {parent: prod});
  world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: [MGMT], externalId: EXTERNAL_ID}]});
  for (const region of REGIONS) world.addCluster(account, region, {name: `c${account.slice(0, 1)}`});
}

beforeAll(async () => {
  clock = new FakeClock(Date.now());
  const world = new FakeAwsWorld({clock});
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  prod = org.addUnit('prod');
  addMember(world, A);
  addMember(world, B);
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

beforeEach(() => {
  fake.fault = undefined;
  fake.stats.reset();
});

afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function until(what: string, fn: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (fn()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`never happened: ${what}`);
}

/** The last end of a call to Organizations in the request log: the walk's last page answered. */
function walkEnd(): number {
  return Math.max(...fake.stats.find({service: 'organizations'}).map((c) => c.endOrder ?? Infinity));
}

const listings = (account?: string): FakeAwsCall[] => fake.stats.find({operation: 'ListClusters', ...(account ? {account} : {})});

describe('early listings of an organization matcher', () => {
  it('starts the EKS listings of the last plan\'s accounts before the walk\'s last page is answered, and the cycle uses them', async () => {
    h = await earlyHarness(clock, orgMatcherYaml({orgId: org.id, role: ROLE, externalId: EXTERNAL_ID, regions: REGIONS, include: [prod]}), KEY);
    await h.cycle();
    fake.stats.reset();

    h.gate.hold();
    const cycle = h.cycle();
    await until('every source of A and B listed', () => listings(A).length === 2 && listings(B).length === 2);
    // Listed while the walk's account pages are held (not even sent).
    expect(fake.stats.count({operation: 'ListAccountsForParent'})).toBe(0);
    h.gate.release();
    const report = await cycle;

    expect(report.counts).toMatchObject({unchanged: 4, delete: 0, create: 0});
    expect(report.sources.filter((s) => s.ok && !s.skipped).map((s) => s.id).sort()).toEqual([`eks:eu-west-1:${A}`, `eks:eu-west-1:${B}`, `eks:us-east-1:${A}`, `eks:us-east-1:${B}`]);
    // The request log: every listing started before the walk's last page was answered, and none
    // was listed twice (the cycle got the early listings). Steady state: no AssumeRole.
    const end = walkEnd();
    expect(listings().every((call) => call.startOrder < end)).toBe(true);
    expect(listings()).toHaveLength(4);
    expect(fake.stats.count({operation: 'AssumeRole'})).toBe(0);
  });

  it('an account that joined is listed after the walk, next to the early listings of the others', async () => {
    h = await earlyHarness(clock, orgMatcherYaml({orgId: org.id, role: ROLE, externalId: EXTERNAL_ID, regions: REGIONS, include: [prod]}), KEY);
    await h.cycle();
    addMember(fake.world, C);
    try {
      fake.stats.reset();
      const report = await h.cycle();
      expect(report.counts).toMatchObject({create: 2, unchanged: 4, delete: 0});
      const end = walkEnd();
      // C was not in the last plan: its listings wait for the walk (and its AssumeRole).
      expect(listings(C).map((call) => call.startOrder > end)).toEqual([true, true]);
      expect(listings(A).every((call) => call.startOrder < end)).toBe(true);
    } finally {
      org.removeAccount(C);
    }
  });

  it('regions ["*"]: a region the account enabled is listed after the walk, one it no longer lists is still listed while it holds clusters', async () => {
    fake.world.enabledRegions.set(A, REGIONS);
    fake.world.enabledRegions.set(B, REGIONS);
    try {
      h = await earlyHarness(clock, orgMatcherYaml({orgId: org.id, role: ROLE, externalId: EXTERNAL_ID, regions: ['*'], include: [prod]}), KEY, {regionRefreshMs: 60_000});
      await h.cycle();
      // A opts in to ap-south-1 (a cluster there) and out of eu-west-1; the lists are asked again.
      fake.world.enabledRegions.set(A, ['ap-south-1', 'us-east-1']);
      fake.world.addCluster(A, 'ap-south-1', {name: 'far'});
      await clock.advance(120_000);
      fake.stats.reset();
      const report = await h.cycle();

      expect(report.counts.delete).toBe(0);
      expect(await h.names()).toContain(`far-eks-ap-south-1-${A}`);
      const end = walkEnd();
      const byRegion = (region: string): boolean[] => listings(A).filter((c) => c.region === region).map((c) => c.startOrder < end);
      // Early: the regions of the last plan (eu-west-1 is held: it has a cluster); after the walk: the new one.
      expect([byRegion('us-east-1'), byRegion('eu-west-1'), byRegion('ap-south-1')]).toEqual([[true], [true], [false]]);
      expect(report.sources.find((s) => s.id === `eks:eu-west-1:${A}`)).toMatchObject({ok: true});
    } finally {
      fake.world.enabledRegions.clear();
      fake.world.removeCluster(A, 'ap-south-1', 'far');
    }
  });

  it('lists nothing early once the cached credentials near their expiry: the walk goes first, as on a first cycle', async () => {
    h = await earlyHarness(clock, orgMatcherYaml({orgId: org.id, role: ROLE, externalId: EXTERNAL_ID, regions: REGIONS, include: [prod]}), KEY);
    await h.cycle();
    // Assumed-role credentials live an hour; at 57 minutes they are within the renewal margin.
    await clock.advance(57 * 60_000);
    fake.stats.reset();
    const report = await h.cycle();
    expect(report.counts).toMatchObject({unchanged: 4, delete: 0});
    const end = walkEnd();
    expect(listings().every((call) => call.startOrder > end)).toBe(true);
  });
});
