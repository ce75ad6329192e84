/** Early listings of two organization matchers in one cycle (src/clouds/early-listings.ts, aws/sources.ts). */
import {afterAll, afterEach, beforeAll, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {setEnv} from '../helpers/env.ts';
import {earlyHarness, orgMatcherYaml, type EarlyHarness} from '../helpers/org-early.ts';

const [MGMT, DEV, REGION, ROLE] = ['111111111111', '666666666666', 'us-east-1', 'kube-discovery'];
const PROD = ['222222222222', '333333333333', '444444444444', '555555555555'];
const KEY = {accessKeyId: 'AKIAORGEARLYTWOMATCH', secretAccessKey: 'org-early-two-secret'};
let fake: FakeAws, org: FakeOrganization, prod: string, dev: string, restoreEnv: () => void, h: EarlyHarness | undefined;

beforeAll(async () => {
  // The world on the real clock: the fake's latencies are real delays.
  const world = new FakeAwsWorld({clock: systemClock});
  world.addAccount(MGMT, {accessKeys: [KEY]});
  world.organization = org = new FakeOrganization({managementAccount: MGMT});
  [prod, dev] = [org.addUnit('prod'), org.addUnit('dev')];
  for (const account of [...PROD, DEV]) {
    org.addAccount(account, {parent: account === DEV ? dev : prod});
    world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: [MGMT]}]});
    world.addCluster(account, REGION, {name: `c${account.slice(0, 1)}`});
  }
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: REGION});
});
afterAll(async () => (restoreEnv(), await fake.close()));
afterEach(async () => ((fake.fault = undefined), (fake.latencyMs = undefined), await h?.close(), (h = undefined)));

/** Two matchers (OUs in this order), `sources` in flight; cycle 2 with listings of 100–300 ms and the second walk's account page slow. */
async function secondCycle(first: string, second: string, sources: number, failFirstWalk: boolean): Promise<{prodAfter: (order: number) => string[]; nextWalkAt: number; walkEnd: number}> {
  const yaml = [first, second].map((ou) => orgMatcherYaml({orgId: org.id, role: ROLE, regions: [REGION], include: [ou]})).join('') + `  concurrency: {sources: ${sources}}\n`;
  h = await earlyHarness(new FakeClock(Date.now()), yaml, KEY);
  expect((await h.cycle()).counts.create).toBe(5);
  fake.stats.reset();
  let pages = 0;
  fake.fault = (c) => (c.operation === 'ListAccountsForParent' && pages++ === 0 && failFirstWalk ? {code: 'AccessDeniedException'} : undefined);
  fake.latencyMs = (c) => (c.operation === 'ListClusters' ? (failFirstWalk ? 100 : 300) : c.operation === 'ListAccountsForParent' && pages > 0 ? 1500 : 0);
  expect((await h.cycle()).counts.delete).toBe(0);
  const pageCalls = fake.stats.find({operation: 'ListAccountsForParent'});
  const prodCalls = fake.stats.find({operation: 'ListClusters'}).filter((c) => PROD.includes(c.account));
  return {
    prodAfter: (order) => prodCalls.filter((c) => c.startOrder > order).map((c) => c.account).sort(),
    // When the next matcher's walk asked for its first page. Plans are awaited one after the other,
    // so the client had handled the failed page by then. The failed page's own end (as the fake saw
    // it) is no such mark: on a loaded machine the client may read a prod listing's answer, and start
    // the next listing, before it reads the failure sent earlier on another socket.
    nextWalkAt: Math.min(...pageCalls.filter((c) => c.status === 200).map((c) => c.startOrder)),
    walkEnd: Math.max(...pageCalls.map((c) => c.endOrder ?? Infinity)),
  };
}

it('a matcher whose walk failed starts no more early listings while the next matcher walks (their answers reach no cycle)', async () => {
  const {prodAfter, nextWalkAt} = await secondCycle(prod, dev, 1, true);
  expect(nextWalkAt).toBeLessThan(Infinity);
  expect(prodAfter(nextWalkAt)).toEqual([]); // fails: the three prod accounts not yet started are still listed, then dropped
});

it("the second matcher's last plan is still listed early while its slow walk runs, once the first matcher was planned", async () => {
  const {prodAfter, walkEnd} = await secondCycle(dev, prod, 2, false);
  expect(prodAfter(walkEnd)).toEqual([]); // fails: three of the four prod sources start only after their walk
});
