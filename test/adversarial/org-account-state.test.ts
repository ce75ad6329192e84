/**
 * Adversarial: an organization walk whose account record says nothing about the account's state
 * (no `State`, no `Status`, or a value Organizations does not document) is a malformed answer. It
 * must not read as "the account is no longer ACTIVE" and deregister the account's clusters.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

const MGMT = '111111111111';
const MEMBER = '222222222222';
const KEY = {accessKeyId: 'AKIAADVERSARIAL00002', secretAccessKey: 'adversarial-org-secret'};
const ROLE = 'kube-discovery';

let fake: FakeAws;
let proxy: FaultProxy;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  const unit = org.addUnit('prod');
  org.addAccount(MEMBER, {parent: unit});
  world.addAccount(MEMBER, {roles: [{arn: `arn:aws:iam::${MEMBER}:role/${ROLE}`, trust: [MGMT]}]});
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
        'adv-org.yaml',
      );
      const backend = new MemoryBackend({clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      try {
        const discovery = new Discovery({config, clock: systemClock, aws: {organizations: {organizationsTimeoutMs: 2000}}});
        const registrar = createRegistrar(backend, heartbeat, 'g');
        const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
        await discovery.runCycle(registrar);
        expect(await names()).toEqual([`member-eks-us-east-1-${MEMBER}`]);

        spoilMember(edit);
        const report = await discovery.runCycle(registrar);
        expect(report.items.filter((i) => i.action === 'delete')).toEqual([]);
        expect(await names()).toEqual([`member-eks-us-east-1-${MEMBER}`]);
      } finally {
        proxy.fault = undefined;
        await heartbeat.stop({deregister: false});
        await backend.close();
      }
    });
  }
});
