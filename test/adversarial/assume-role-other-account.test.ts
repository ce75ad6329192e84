/**
 * Adversarial: an AssumeRole answer that hands out another account's credentials — a proxy or
 * cache that answers one role's AssumeRole with another's (its `AssumedRoleUser` names the other
 * account's role). Signed with those keys, `ListClusters` lists the other account's clusters, so
 * a source of the asked-for account saw a well-formed listing without its own clusters and
 * deregistered them. The running discovery (Discovery, registrar, heartbeat, SQLite registry)
 * against the wire-level fake behind the fault proxy, for an `assume_role_arn` matcher and an
 * organization matcher: such an answer must fail the account's sources and delete nothing.
 */
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, startFaultProxy, type FaultProxy} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

const MGMT = '111111111111';
const MINE = '222222222222';
const OTHER = '333333333333';
const ROLE = 'kube-discovery';
const KEY = {accessKeyId: 'AKIAOTHERACCOUNT0001', secretAccessKey: 'other-account-base-secret'};
const roleArn = (account: string): string => `arn:aws:iam::${account}:role/${ROLE}`;

let world: FakeAwsWorld;
let org: FakeOrganization;
let fake: FakeAws;
let proxy: FaultProxy;
let dir: string;
let restoreEnv: () => void;

beforeAll(async () => {
  world = new FakeAwsWorld();
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  const unit = org.addUnit('prod');
  org.addAccount(MINE, {parent: unit});
  // Another account the same base identity may assume into, outside the organization.
  for (const account of [MINE, OTHER]) world.addAccount(account, {roles: [{arn: roleArn(account), trust: [MGMT]}]});
  world.addCluster(MINE, 'us-east-1', {name: 'mine'});
  world.addCluster(OTHER, 'us-east-1', {name: 'theirs'});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  const viaProxy = Object.fromEntries(Object.entries(fake.env).map(([k, v]) => [k, v === fake.url ? proxy.url : v]));
  restoreEnv = setEnv({...viaProxy, AWS_MAX_ATTEMPTS: '1', AWS_RETRY_MODE: 'standard', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
  dir = mkdtempSync(path.join(tmpdir(), 'assume-other-'));
});

afterAll(async () => {
  restoreEnv();
  await proxy.close();
  await fake.close();
  rmSync(dir, {recursive: true, force: true});
});

/** STS's AssumeRole answer for `account`'s role: real credentials of that account, as STS writes them. */
function assumeRoleAnswer(account: string): string {
  const creds = world.issueRoleCredentials(roleArn(account), 'kube-discovery', 3600);
  return (
    `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>` +
    `<AssumedRoleUser><AssumedRoleId>${creds.userId}</AssumedRoleId><Arn>${creds.arn}</Arn></AssumedRoleUser>` +
    `<Credentials><AccessKeyId>${creds.accessKeyId}</AccessKeyId><SecretAccessKey>${creds.secretAccessKey}</SecretAccessKey>` +
    `<SessionToken>${creds.sessionToken ?? ''}</SessionToken><Expiration>${new Date(creds.expiresAt ?? 0).toISOString().replace(/\.\d{3}Z$/, 'Z')}</Expiration></Credentials>` +
    `</AssumeRoleResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>`
  );
}

const MATCHERS = {
  'an assume_role_arn matcher': `    - types: [eks]
      regions: [us-east-1]
      assume_role_arn: ${roleArn(MINE)}`,
  'an organization matcher': `    - types: [eks]
      regions: [us-east-1]
      assume_role_name: ${ROLE}
      organization: {organization_id: ORG, organizational_units: {include: ["*"], exclude: []}}`,
};

describe('an AssumeRole answer carrying another account’s credentials', () => {
  for (const [what, matcher] of Object.entries(MATCHERS)) {
    it(`${what}: the account's source fails and its cluster stays (stale); the next good answer heals it`, async () => {
      const file = path.join(dir, `${what.replaceAll(' ', '-')}.db`);
      const config = parseConfig(
        `version: v1
discovery_service:
  discovery_group: g
  aws:
${matcher.replace('ORG', org.id)}
storage: {type: sqlite, path: ${file}}
`,
        'assume-other.yaml',
      );
      const backend = await SqliteBackend.open({path: file, clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      const registrar = createRegistrar(backend, heartbeat, 'g');
      const entries = async (): Promise<{name: string; stale: boolean}[]> =>
        (await registrar.current()).map((s) => ({name: s.metadata.name, stale: s.status?.stale === true})).sort((a, b) => a.name.localeCompare(b.name));
      // Each "process" has its own credential cache (a restart, or the hour after which STS is asked again).
      const discovery = (): Discovery => {
        const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(KEY)});
        return new Discovery({config, clock: systemClock, aws: {credentialProvider: (role) => providers.provider(role), requestTimeoutMs: 2_000}});
      };
      try {
        await discovery().runCycle(registrar);
        expect(await entries()).toEqual([{name: `mine-eks-us-east-1-${MINE}`, stale: false}]);

        proxy.fault = (req) => (req.operation === 'AssumeRole' ? answer(200, assumeRoleAnswer(OTHER), {'content-type': 'text/xml'}) : undefined);
        const spoiled = await discovery().runCycle(registrar);
        proxy.fault = undefined;
        expect(spoiled.items.filter((i) => i.action === 'delete' || i.action === 'create')).toEqual([]);
        expect(spoiled.sources.find((s) => s.account === MINE)?.error).toMatchObject({code: 'InvalidResponse', reason: 'invalid_response', message: expect.stringMatching(/AssumeRole for arn:aws:iam::222222222222:role\/kube-discovery with credentials of arn:aws:sts::333333333333:/)});
        expect(await entries()).toEqual([{name: `mine-eks-us-east-1-${MINE}`, stale: true}]);

        await discovery().runCycle(registrar);
        expect(await entries()).toEqual([{name: `mine-eks-us-east-1-${MINE}`, stale: false}]);
      } finally {
        proxy.fault = undefined;
        await heartbeat.stop({deregister: false});
        await backend.close();
      }
    });
  }
});
