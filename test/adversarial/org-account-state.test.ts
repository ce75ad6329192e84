/**
 * Adversarial: an organization walk whose account record says nothing about the account's state
 * (no `State`, no `Status`, or a value Organizations does not document) is a malformed answer. It
 * must not read as "the account is no longer ACTIVE" and deregister the account's clusters.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {startFakeAws, type FakeAws, type FakeOrganization} from '../fakes/aws-fakes.ts';
import {awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {organizationWorld, startOrgDiscovery} from '../helpers/org-world.ts';

const MGMT = '111111111111';
const MEMBER = '222222222222';
const KEY = {accessKeyId: 'AKIAADVERSARIAL00002', secretAccessKey: 'adversarial-org-secret'};
const ROLE = 'kube-discovery';

let fake: FakeAws;
let proxy: FaultProxy;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  const made = organizationWorld(MGMT, KEY);
  const world = made.world;
  org = made.org;
  made.addMember(MEMBER, org.addUnit('prod'), ROLE);
  world.addCluster(MEMBER, 'us-east-1', {name: 'member'});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  const env: Record<string, string> = {};
  for (const key of Object.keys(fake.env)) env[key] = proxy.url;
  restoreEnv = setEnv({...env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await proxy.close();
  await fake.close();
});

/** Rewrites the member's record in every ListAccountsForParent page. */
function spoilMember(edit: (account: Record<string, unknown>) => void): void {
  proxy.fault = () => ({
    kind: 'mutate',
    rewrite: (text) => {
      let body: {Accounts?: Record<string, unknown>[]};
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        return text;
      }
      if (!Array.isArray(body.Accounts)) return text;
      for (const account of body.Accounts) if (account['Id'] === MEMBER) edit(account);
      return JSON.stringify(body);
    },
  });
}

describe('an organization walk with an account record of unknown state', () => {
  const spoilers: [string, (a: Record<string, unknown>) => void][] = [
    ['no State and no Status', (a) => {
      delete a['State'];
      delete a['Status'];
    }],
    ['a State Organizations does not document', (a) => {
      a['State'] = 'active';
      a['Status'] = 'active';
    }],
  ];
  for (const [what, edit] of spoilers) {
    it(`keeps the account's clusters when its record has ${what}`, async () => {
      proxy.fault = undefined;
      const {discovery, registrar, names, stop} = await startOrgDiscovery({orgId: org.id, role: ROLE, file: 'adv-org.yaml', organizations: {organizationsTimeoutMs: ROUND_TRIP.timeout}});
      try {
        await discovery.runCycle(registrar);
        expect(await names()).toEqual([`member-eks-us-east-1-${MEMBER}`]);

        spoilMember(edit);
        const report = await discovery.runCycle(registrar);
        expect(report.items.filter((i) => i.action === 'delete')).toEqual([]);
        expect(await names()).toEqual([`member-eks-us-east-1-${MEMBER}`]);
      } finally {
        proxy.fault = undefined;
        await stop();
      }
    });
  }
});
