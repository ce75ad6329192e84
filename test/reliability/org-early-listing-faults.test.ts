/**
 * Fault matrix of an organization matcher's early listings (src/clouds/early-listings.ts): from the
 * second cycle on, the accounts of the last good plan are listed while the walk runs. What may be
 * deleted is still decided only by the walk and the listing: a failed walk deletes nothing, an
 * account one walk lacks is kept once whatever its early listing found, a spoiled early listing
 * fails its own source, an aborted cycle publishes nothing, and a listing made with a role or
 * external id the config no longer has is never used. Real Organizations, STS and EKS clients
 * against the wire-level fake; each row holds the walk until its early listings were answered.
 */
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws, type FaultAction, type FaultHook} from '../fakes/aws-fakes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {setEnv} from '../helpers/env.ts';
import {earlyHarness, orgMatcherYaml, type EarlyHarness} from '../helpers/org-early.ts';

const MGMT = '111111111111';
const [A, B] = ['222222222222', '333333333333'] as const;
const KEY = {accessKeyId: 'AKIAORGEARLYFAULTS01', secretAccessKey: 'org-early-faults-secret'};
const ROLE = 'kube-discovery';
const EXTERNAL_ID = 'early-faults-ext';
const REGION = 'us-east-1';
const NAMES = [`a1-eks-${REGION}-${A}`, `a2-eks-${REGION}-${A}`, `b1-eks-${REGION}-${B}`, `b2-eks-${REGION}-${B}`];

let fake: FakeAws;
let clock: FakeClock;
let org: FakeOrganization;
let prod: string;
let restoreEnv: () => void;
let h: EarlyHarness | undefined;

beforeAll(async () => {
  clock = new FakeClock(Date.now());
  const world = new FakeAwsWorld({clock});
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  prod = org.addUnit('prod');
  for (const account of [A, B]) {
    world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: [MGMT], externalId: EXTERNAL_ID}]});
  }
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: REGION});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

/** The title of the row whose listing hangs: only its calls end at a short deadline (they share the client with the hung one). */
const HUNG_ROW = 'an early listing that is hung ';

/** A and B in the organization, two clusters each; a cycle registered them all. */
beforeEach(async ({task}) => {
  fake.fault = undefined;
  for (const account of [A, B]) {
    if (!org.has(account)) org.addAccount(account, {parent: prod});
    for (const name of ['1', '2']) {
      fake.world.removeCluster(account, REGION, `${account === A ? 'a' : 'b'}${name}`);
      fake.world.addCluster(account, REGION, {name: `${account === A ? 'a' : 'b'}${name}`});
    }
  }
  h = await earlyHarness(clock, matcher(), KEY, task.name.startsWith(HUNG_ROW) ? {requestTimeoutMs: 1000} : {});
  await h.cycle();
  expect(await h.names()).toEqual(NAMES);
  fake.stats.reset();
});

afterEach(async () => {
  fake.fault = undefined;
  await h?.close();
  h = undefined;
});

function matcher(options: {role?: string; externalId?: string} = {}): string {
  return orgMatcherYaml({orgId: org.id, role: options.role ?? ROLE, externalId: options.externalId ?? EXTERNAL_ID, regions: [REGION], include: [prod]});
}

async function until(what: string, fn: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (fn()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`never happened: ${what}`);
}

/** Runs a cycle whose walk is held until `listed` holds (its early listings were answered, or are in flight), with `fault` set meanwhile. */
async function cycleAfterEarly(harness: EarlyHarness, listed: () => boolean, fault?: FaultHook, onHeld?: () => void): Promise<Awaited<ReturnType<EarlyHarness['cycle']>>> {
  harness.gate.hold();
  fake.fault = fault;
  const cycle = harness.cycle();
  await until('the early listings', listed);
  // Nothing of the walk's account pages was sent: what was listed was listed early.
  expect(fake.stats.count({operation: 'ListAccountsForParent'})).toBe(0);
  onHeld?.();
  harness.gate.release();
  return cycle;
}

const answered = (account: string): boolean => fake.stats.find({operation: 'ListClusters', account}).some((c) => c.endOrder !== undefined);

describe('organization early listing faults', () => {
  it('the walk fails after the early listings answered: the matcher fails alone, nothing is deleted, every entry is stale', async () => {
    // Without the fault, B's missing cluster would go.
    fake.world.removeCluster(B, REGION, 'b2');
    const report = await cycleAfterEarly(h!, () => answered(A) && answered(B), undefined, () => {
      fake.fault = (c) => (c.operation === 'ListAccountsForParent' ? {code: 'ServiceException', status: 500} : undefined);
    });
    expect(report.sources).toEqual([expect.objectContaining({id: `eks:*:${org.id}`, ok: false})]);
    expect(report.counts.delete).toBe(0);
    expect(report.items.map((i) => i.action)).toEqual(['stale', 'stale', 'stale', 'stale']);
    expect(await h!.names()).toEqual(NAMES);
  });

  for (const variant of ['returned its clusters', 'returned an empty list'] as const) {
    it(`an account missing from the walk whose early listing ${variant} is kept once, deregistered at the second walk without it`, async () => {
      if (variant === 'returned an empty list') for (const name of ['b1', 'b2']) fake.world.removeCluster(B, REGION, name);
      org.removeAccount(B);
      const first = await cycleAfterEarly(h!, () => answered(A) && answered(B));
      // B's early listing was answered well (200), and its answer reached no cycle.
      expect(fake.stats.find({operation: 'ListClusters', account: B}).map((c) => c.status)).toEqual([200]);
      expect(first.counts.delete).toBe(0);
      expect(first.sources).toContainEqual(expect.objectContaining({id: `eks:*:${B}`, ok: true, skipped: expect.stringContaining('missing from this organization walk') as unknown}));
      expect(first.sources.some((s) => s.id === `eks:${REGION}:${B}`)).toBe(false);
      expect(await h!.names()).toEqual(NAMES);

      const second = await h!.cycle();
      expect(second.items.filter((i) => i.action === 'delete').map((i) => i.name).sort()).toEqual(NAMES.filter((n) => n.endsWith(B)));
      expect(await h!.names()).toEqual(NAMES.filter((n) => n.endsWith(A)));
    });
  }

  const spoiled: {name: string; fault: FaultAction; reason: string}[] = [
    {name: 'malformed (broken JSON)', fault: {malformed: 'invalid-json'}, reason: 'invalid_response'},
    {name: 'malformed (no clusters array)', fault: {malformed: 'missing-fields'}, reason: 'invalid_response'},
    {name: 'hung', fault: {hang: true}, reason: 'timeout'},
  ];
  for (const row of spoiled) {
    it(`an early listing that is ${row.name} fails its own source; nothing is deleted`, async () => {
      // Without the fault, A's missing cluster would go.
      fake.world.removeCluster(A, REGION, 'a2');
      const hook: FaultHook = (c) => (c.operation === 'ListClusters' && c.account === A ? row.fault : undefined);
      const report = await cycleAfterEarly(h!, () => fake.stats.count({operation: 'ListClusters', account: A}) > 0 && answered(B), hook, () => (fake.fault = undefined));
      expect(report.sources.find((s) => s.id === `eks:${REGION}:${A}`)).toMatchObject({ok: false, error: {reason: row.reason}});
      expect(report.sources.find((s) => s.id === `eks:${REGION}:${B}`)).toMatchObject({ok: true});
      expect(report.counts.delete).toBe(0);
      expect(await h!.names()).toEqual(NAMES);
      // A's listing was not made again after the walk: the early one was the cycle's.
      expect(fake.stats.count({operation: 'ListClusters', account: A})).toBe(1);
    });
  }

  it('the cycle is aborted (shutdown) while the early listings hang: they are abandoned, nothing is published', async () => {
    fake.world.removeCluster(A, REGION, 'a2');
    const shutdown = new AbortController();
    h!.gate.hold();
    fake.fault = (c) => (c.operation === 'ListClusters' ? {hang: true} : undefined);
    const cycle = h!.cycle(shutdown.signal);
    await until('both early listings in flight', () => fake.stats.inFlight({operation: 'ListClusters'}) === 2);
    shutdown.abort(new Error('shutdown'));
    h!.gate.release();
    await expect(cycle).rejects.toThrow();
    // The abort reached the early listings: their requests were closed.
    await until('the early listings abandoned', () => fake.stats.inFlight({operation: 'ListClusters'}) === 0);
    expect(await h!.names()).toEqual(NAMES);
  });

  for (const change of [
    {name: 'external id', options: {externalId: 'another-external-id'}},
    {name: 'role', options: {role: 'another-role'}},
  ]) {
    it(`the matcher's ${change.name} changed in the config: no listing made with the old one is used; the accounts fail (AssumeRole denied), nothing is deleted`, async () => {
      fake.world.removeCluster(A, REGION, 'a2');
      h!.reconfigure(matcher(change.options));
      const report = await h!.cycle();
      expect(report.sources.filter((s) => s.id.startsWith('eks:')).map((s) => [s.id, s.ok, s.error?.operation]).sort()).toEqual([
        [`eks:*:${A}`, false, 'AssumeRole'],
        [`eks:*:${B}`, false, 'AssumeRole'],
      ]);
      expect(report.counts.delete).toBe(0);
      expect(await h!.names()).toEqual(NAMES);
    });
  }
});
