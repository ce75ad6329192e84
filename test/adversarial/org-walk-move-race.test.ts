/**
 * Adversarial: the organization walk is not a snapshot. An account moved from one OU to another
 * while the walk runs can be missed by both listings (the new OU answered before the move, the old
 * one after it): a successful, well-formed walk then lacks an account that never left. Its
 * clusters must not be deregistered on that one walk; an account that is really gone (absent
 * from two walks in a row) is. Both hold across a restart, a leader change, a rebuilt planner
 * and `once`: the previous walk is read back from the registry's stale marks, not only memory.
 */
import {OrganizationsClient} from '@aws-sdk/client-organizations';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import type {OrganizationsApi} from '../../src/clouds/aws/organization.ts';
import type {AwsCredentialProvider} from '../../src/credentials/aws-credentials.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeAws, type FakeAws, type FakeOrganization} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';
import {organizationWorld} from '../helpers/org-world.ts';

const MGMT = '111111111111';
const MOVER = '222222222222';
const STAYER = '333333333333';
const KEY = {accessKeyId: 'AKIAADVERSARIALMOVE1', secretAccessKey: 'adversarial-move-secret'};
const ROLE = 'kube-discovery';

let fake: FakeAws;
let org: FakeOrganization;
let from: string;
let to: string;
let restoreEnv: () => void;

beforeAll(async () => {
  const made = organizationWorld(MGMT, KEY);
  const world = made.world;
  org = made.org;
  to = org.addUnit('a-new-home');
  from = org.addUnit('b-old-home');
  for (const [account, parent] of [[MOVER, from], [STAYER, to]] as const) {
    made.addMember(account, parent, ROLE);
    world.addCluster(account, 'us-east-1', {name: `c${account.slice(0, 1)}`});
  }
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

/**
 * A real Organizations client whose next walk races a move: the old OU's account list is held
 * until the new OU's has answered, then the account moves, then the old OU's list is sent.
 */
function racingClient(credentials: AwsCredentialProvider, race: {armed: boolean}): OrganizationsApi & {arm(): void} {
  const client = new OrganizationsClient({region: 'us-east-1', credentials, maxAttempts: 1});
  const send = client.send.bind(client) as (command: unknown, options?: unknown) => Promise<unknown>;
  let newHomeListed = (): void => undefined;
  let newHomeAnswered = Promise.resolve();
  const racing = async (command: {constructor: {name: string}; input: {ParentId?: string}}, options?: unknown): Promise<unknown> => {
    const listing = command.constructor.name === 'ListAccountsForParentCommand' && race.armed;
    if (listing && command.input.ParentId === from) await newHomeAnswered;
    const out = await send(command, options);
    if (listing && command.input.ParentId === to) {
      org.moveAccount(MOVER, to);
      race.armed = false;
      newHomeListed();
    }
    return out;
  };
  return {
    send: racing as unknown as OrganizationsApi['send'],
    arm() {
      race.armed = true;
      newHomeAnswered = new Promise<void>((resolve) => (newHomeListed = resolve));
    },
  };
}

describe('an account that moves between OUs while the walk runs', () => {
  it('keeps its clusters on the walk that missed it, and deregisters an account gone from two walks', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: [us-east-1]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["*"], exclude: []}}
storage: {type: memory}
`,
      'adv-move.yaml',
    );
    const race = {armed: false};
    let client: (OrganizationsApi & {arm(): void}) | undefined;
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    try {
      const discovery = new Discovery({
        config,
        clock: systemClock,
        aws: {organizations: {organizationsTimeoutMs: 5000, makeOrganizationsClient: (credentials) => (client = racingClient(credentials, race))}},
      });
      const registrar = createRegistrar(backend, heartbeat, 'g');
      const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
      const both = [`c2-eks-us-east-1-${MOVER}`, `c3-eks-us-east-1-${STAYER}`];
      await discovery.runCycle(registrar);
      expect(await names()).toEqual(both);

      // The walk that misses the moving account: both of its listings answered, neither had it.
      client?.arm();
      const raced = await discovery.runCycle(registrar);
      expect(race.armed).toBe(false);
      expect(raced.items.filter((i) => i.action === 'delete')).toEqual([]);
      expect(raced.items.find((i) => i.name === both[0])?.action).toBe('stale');
      expect(await names()).toEqual(both);

      // The next walk finds it in its new OU: registered as before, no longer stale.
      const settled = await discovery.runCycle(registrar);
      expect(settled.items.find((i) => i.name === both[0])?.action).toBe('update');
      expect(await names()).toEqual(both);

      // An account that really left is gone from every walk from then on: deregistered on the second.
      org.removeAccount(MOVER);
      const first = await discovery.runCycle(registrar);
      expect(first.items.filter((i) => i.action === 'delete')).toEqual([]);
      const second = await discovery.runCycle(registrar);
      expect(second.items.filter((i) => i.action === 'delete').map((i) => i.name)).toEqual([both[0]]);
      expect(await names()).toEqual([both[1]]);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});

describe('the two-walk rule across a restart (leader change, rebuilt planner, `once`)', () => {
  it('a new discovery keeps an account its first walk missed, and deregisters only after two walks without it, whichever process made them', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: [us-east-1]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["*"], exclude: []}}
storage: {type: memory}
`,
      'adv-restart.yaml',
    );
    // The first test took MOVER out of the organization: back in its old OU.
    org.addAccount(MOVER, {parent: from});
    const race = {armed: false};
    let client: (OrganizationsApi & {arm(): void}) | undefined;
    // One Discovery per process: a restart, another replica taking the lead, a DiscoveryConfig change or a `once` run.
    const replica = (): Discovery =>
      new Discovery({config, clock: systemClock, aws: {organizations: {organizationsTimeoutMs: 5000, makeOrganizationsClient: (credentials) => (client = racingClient(credentials, race))}}});
    const backend = new MemoryBackend({clock: systemClock});
    const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    try {
      const registrar = createRegistrar(backend, heartbeat, 'g');
      const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
      const deletes = (report: Awaited<ReturnType<Discovery['runCycle']>>): string[] => report.items.filter((i) => i.action === 'delete').map((i) => i.name);
      const both = [`c2-eks-us-east-1-${MOVER}`, `c3-eks-us-east-1-${STAYER}`];
      await replica().runCycle(registrar);
      expect(await names()).toEqual(both);

      // Restarted: the new process's first walk races the move and misses the account.
      const restarted = replica();
      client?.arm();
      const raced = await restarted.runCycle(registrar);
      expect(race.armed).toBe(false);
      expect(deletes(raced)).toEqual([]);
      expect(raced.items.find((i) => i.name === both[0])).toMatchObject({action: 'stale', reason: expect.stringContaining('missing from this organization walk only') as unknown});
      const settled = await restarted.runCycle(registrar);
      expect(settled.items.find((i) => i.name === both[0])?.action).toBe('update');
      expect(await names()).toEqual(both);

      // Gone for real; a restart between the two walks that miss it: the second still deregisters it.
      org.removeAccount(MOVER);
      expect(deletes(await restarted.runCycle(registrar))).toEqual([]);
      expect(deletes(await replica().runCycle(registrar))).toEqual([both[0]]);
      expect(await names()).toEqual([both[1]]);

      // `once` after `once` (a new process every walk): the first keeps, the second deregisters.
      org.addAccount(MOVER, {parent: from});
      await replica().runCycle(registrar);
      expect(await names()).toEqual(both);
      org.removeAccount(MOVER);
      expect(deletes(await replica().runCycle(registrar))).toEqual([]);
      expect(await names()).toEqual(both);
      expect(deletes(await replica().runCycle(registrar))).toEqual([both[0]]);
    } finally {
      await heartbeat.stop({deregister: false});
      await backend.close();
    }
  });
});
