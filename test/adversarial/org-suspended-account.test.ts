/**
 * Adversarial: a member account that AWS suspends (State SUSPENDED: billing, abuse review) stays
 * in its OU; its clusters still exist and come back when the account is reinstated, but nothing
 * can list them meanwhile. No listing lacks them, so they must stay registered (stale, the state
 * named) however many walks see the account suspended — not be deregistered as if the account had
 * left. An account being closed (PENDING_CLOSURE) is on its way out of the organization: its
 * clusters go, after the two walks any account that stops being selected gets.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {startFakeAws, type FakeAws, type FakeOrganization} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';
import {organizationWorld, startOrgDiscovery} from '../helpers/org-world.ts';

const MGMT = '111111111111';
const SUSPENDED = '222222222222';
const CLOSING = '333333333333';
const STAYS = '444444444444';
const KEY = {accessKeyId: 'AKIAADVERSARIALSUSP1', secretAccessKey: 'adversarial-suspended-secret'};
const ROLE = 'kube-discovery';

let fake: FakeAws;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  const made = organizationWorld(MGMT, KEY);
  const world = made.world;
  org = made.org;
  const unit = org.addUnit('prod');
  for (const account of [SUSPENDED, CLOSING, STAYS]) {
    made.addMember(account, unit, ROLE);
    world.addCluster(account, 'us-east-1', {name: `c${account.slice(0, 1)}`});
  }
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

describe('a member account suspended by AWS', () => {
  it('keeps its clusters, stale, for as long as it is suspended; a closing account is deregistered after two walks', async () => {
    const {discovery, registrar, names, stop} = await startOrgDiscovery({orgId: org.id, role: ROLE, file: 'adv-suspended.yaml', organizations: {organizationsTimeoutMs: 5000}});
    try {
      const [suspended, closing, stays] = [SUSPENDED, CLOSING, STAYS].map((a) => `c${a.slice(0, 1)}-eks-us-east-1-${a}`) as [string, string, string];
      await discovery.runCycle(registrar);
      expect(await names()).toEqual([suspended, closing, stays]);

      org.setStatus(SUSPENDED, 'SUSPENDED');
      org.setStatus(CLOSING, 'PENDING_CLOSURE');
      const first = await discovery.runCycle(registrar);
      expect(first.items.filter((i) => i.action === 'delete')).toEqual([]);
      const second = await discovery.runCycle(registrar);
      expect(second.items.filter((i) => i.action === 'delete').map((i) => i.name)).toEqual([closing]);
      // Suspended for many walks: still there, marked stale with the account's state.
      const third = await discovery.runCycle(registrar);
      expect(third.items.filter((i) => i.action === 'delete')).toEqual([]);
      expect(third.items.find((i) => i.name === suspended)).toMatchObject({action: 'stale', reason: expect.stringContaining('SUSPENDED') as unknown});
      expect(third.sources).toContainEqual(expect.objectContaining({id: `eks:*:${SUSPENDED}`, ok: true, skipped: expect.stringContaining('SUSPENDED') as unknown}));
      expect(await names()).toEqual([suspended, stays]);
      const entry = (await registrar.current()).find((s) => s.metadata.name === suspended);
      expect(entry?.status?.stale).toBe(true);

      // Reinstated: listed again, no longer stale.
      org.setStatus(SUSPENDED, 'ACTIVE');
      const back = await discovery.runCycle(registrar);
      expect(back.items.find((i) => i.name === suspended)?.action).toBe('update');
      expect((await registrar.current()).find((s) => s.metadata.name === suspended)?.status?.stale).toBeFalsy();
    } finally {
      await stop();
    }
  });
});
