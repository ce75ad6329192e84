/**
 * Fault matrix of an organization matcher's listings that carry a key twice. JSON.parse keeps the
 * last of two equal keys: `{"Accounts":[...],"Accounts":[]}` read as an organization without its
 * accounts, `{"clusters":[...],"clusters":[]}` as an empty region, and a second `"NextToken":null`
 * as the last page — each would deregister clusters that exist. Such an answer is malformed
 * (src/core/json-keys.ts): it fails its source, nothing is deleted, and the failure names the key.
 * The running discovery (Discovery, registrar, heartbeat) with the real Organizations and EKS
 * clients, against the wire-level fake behind the fault proxy.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeAws, type FakeAws, type FakeOrganization} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, startFaultProxy, type FaultProxy, type FaultRequest, type ProxyFaultRule} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {organizationWorld} from '../helpers/org-world.ts';

const MGMT = '111111111111';
const MEMBER = '222222222222';
const KEY = {accessKeyId: 'AKIAORGDUPLICATEKEY1', secretAccessKey: 'org-duplicate-keys-secret'};
const ROLE = 'kube-discovery';
// Three clusters: the fake answers two a page, so the member's listing has a later page.
const NAMES = ['c1', 'c2', 'c3'].map((c) => `${c}-eks-us-east-1-${MEMBER}`);

let fake: FakeAws;
let proxy: FaultProxy;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  const made = organizationWorld(MGMT, KEY);
  org = made.org;
  const prod = org.addUnit('prod');
  made.addMember(MEMBER, org.addUnit('team', prod), ROLE);
  for (const name of ['c1', 'c2', 'c3']) made.world.addCluster(MEMBER, 'us-east-1', {name});
  fake = await startFakeAws({world: made.world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => made.world.lookupAccessKey(id)?.account)});
  const viaProxy = Object.fromEntries(Object.entries(fake.env).map(([k, v]) => [k, v === fake.url ? proxy.url : v]));
  restoreEnv = setEnv({...viaProxy, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await proxy.close();
  await fake.close();
});

/** The answers to `operation` (its first page, or any) with `members` written after their last member. */
function appended(filter: Partial<FaultRequest>, members: string | (() => string)): ProxyFaultRule {
  return (req) =>
    Object.entries(filter).every(([k, v]) => req[k as keyof FaultRequest] === v)
      ? {kind: 'mutate', rewrite: (text) => text.replace(/\}\s*$/, `,${typeof members === 'string' ? members : members()}}`)}
      : undefined;
}

/** The answers to `operation` (its first page, or any) replaced by `body`, with status 200. */
function replaced(filter: Partial<FaultRequest>, body: string): ProxyFaultRule {
  return (req) => (Object.entries(filter).every(([k, v]) => req[k as keyof FaultRequest] === v) ? {kind: 'mutate', rewrite: () => body} : undefined);
}

/** The answers to `operation` (its first page, or any) replaced by `body`, with `status`. */
function answered(filter: Partial<FaultRequest>, status: number, body: string): ProxyFaultRule {
  return (req) => (Object.entries(filter).every(([k, v]) => req[k as keyof FaultRequest] === v) ? answer(status, body) : undefined);
}

// The walk's own source (the management account's, which has no role to assume, fails every cycle: it is not looked at).
const WALK = `eks:*:o-`;
const LISTING = `eks:us-east-1:${MEMBER}`;

interface Row {
  readonly fault: string;
  readonly rule: ProxyFaultRule;
  /** The source that fails (by id prefix). */
  readonly source: string;
  /** The duplicate key the failure names, or the words it holds. */
  readonly key: string | {readonly says: string};
  /** The spoiled answer is the client's first of its operation (the SDK's way) or a later one (the short, direct way of lean-read.ts). */
  readonly way: 'sdk' | 'direct';
}

const ROWS: Row[] = [
  {fault: 'DescribeOrganization: "Organization" given twice', rule: appended({operation: 'DescribeOrganization'}, () => `"Organization":{"Id":"${org.id}"}`), source: WALK, key: 'Organization', way: 'sdk'},
  {fault: 'ListRoots: a second "Roots":[]', rule: appended({operation: 'ListRoots'}, '"Roots":[]'), source: WALK, key: 'Roots', way: 'sdk'},
  {fault: 'ListOrganizationalUnitsForParent: a second "OrganizationalUnits":[]', rule: appended({operation: 'ListOrganizationalUnitsForParent'}, '"OrganizationalUnits":[]'), source: WALK, key: 'OrganizationalUnits', way: 'sdk'},
  {fault: 'ListAccountsForParent: a second "Accounts":[]', rule: appended({operation: 'ListAccountsForParent'}, '"Accounts":[]'), source: WALK, key: 'Accounts', way: 'sdk'},
  {fault: 'ListAccountsForParent: "NextToken" given twice', rule: appended({operation: 'ListAccountsForParent'}, '"NextToken":"n1","NextToken":null'), source: WALK, key: 'NextToken', way: 'sdk'},
  {fault: 'member ListClusters first page (SDK way): a second "clusters":[]', rule: appended({operation: 'ListClusters', page: 'first'}, '"clusters":[]'), source: LISTING, key: 'clusters', way: 'sdk'},
  {fault: 'member ListClusters first page (SDK way): a second "nextToken":null', rule: appended({operation: 'ListClusters', page: 'first'}, '"nextToken":null'), source: LISTING, key: 'nextToken', way: 'sdk'},
  {fault: 'member ListClusters first page (direct way): a second "clusters":[]', rule: appended({operation: 'ListClusters', page: 'first'}, '"clusters":[]'), source: LISTING, key: 'clusters', way: 'direct'},
  {fault: 'member ListClusters first page (direct way): a second "nextToken":null', rule: appended({operation: 'ListClusters', page: 'first'}, '"nextToken":null'), source: LISTING, key: 'nextToken', way: 'direct'},
  // A 200 naming an error type in the body (`__type`, as the JSON protocols name errors) is no listing either.
  {fault: 'ListAccountsForParent: a 200 {"__type":"TooManyRequestsException","Accounts":[]}', rule: replaced({operation: 'ListAccountsForParent'}, '{"__type":"TooManyRequestsException","Accounts":[]}'), source: WALK, key: {says: 'names the error type "TooManyRequestsException"'}, way: 'sdk'},
  {fault: 'ListOrganizationalUnitsForParent: a 200 {"OrganizationalUnits":[],"__type":"ServiceException"}', rule: replaced({operation: 'ListOrganizationalUnitsForParent'}, '{"OrganizationalUnits":[],"__type":"ServiceException"}'), source: WALK, key: {says: 'names the error type "ServiceException"'}, way: 'sdk'},
  {fault: 'member ListClusters first page (direct way): a 200 {"__type":"InternalFailure","clusters":[]}', rule: replaced({operation: 'ListClusters', page: 'first'}, '{"__type":"InternalFailure","clusters":[]}'), source: LISTING, key: {says: 'names the error type "InternalFailure"'}, way: 'direct'},
  // Organizations and EKS answer a listing 200: a 206 (part of an answer) or a 203 (one a proxy rewrote) is not that answer.
  {fault: 'ListAccountsForParent: a 206 Partial Content {"Accounts":[]}', rule: answered({operation: 'ListAccountsForParent'}, 206, '{"Accounts":[]}'), source: WALK, key: {says: 'status 206'}, way: 'sdk'},
  {fault: 'ListOrganizationalUnitsForParent: a 203 {"OrganizationalUnits":[]}', rule: answered({operation: 'ListOrganizationalUnitsForParent'}, 203, '{"OrganizationalUnits":[]}'), source: WALK, key: {says: 'status 203'}, way: 'sdk'},
  {fault: 'member ListClusters first page (direct way): a 206 {"clusters":[]}', rule: answered({operation: 'ListClusters', page: 'first'}, 206, '{"clusters":[]}'), source: LISTING, key: {says: 'status 206'}, way: 'direct'},
];

/** A discovery of the organization matcher: its clients are its own, so its first calls go the SDK's way. */
function discoveryOf(): Discovery {
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
    'org-duplicate-keys.yaml',
  );
  const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(KEY)});
  // No call hangs here: the deadlines only bound a stuck test, and a good call on a loaded machine stays within them.
  return new Discovery({config, clock: systemClock, aws: {requestTimeoutMs: ROUND_TRIP.timeout, credentialProvider: (role) => providers.provider(role), organizations: {organizationsTimeoutMs: ROUND_TRIP.timeout}}});
}

describe('an organization listing with a key given twice', () => {
  for (const row of ROWS) {
    it(`${row.fault}: the source fails naming the fault, nothing is deleted`, async () => {
      const backend = new MemoryBackend({clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      const registrar = createRegistrar(backend, heartbeat, 'g');
      const names = async (): Promise<{name: string; stale: boolean | undefined}[]> =>
        (await registrar.current()).map((s) => ({name: s.metadata.name, stale: s.status?.stale})).sort((a, b) => a.name.localeCompare(b.name));
      try {
        const clean = discoveryOf();
        await clean.runCycle(registrar);
        expect(await names()).toEqual(NAMES.map((name) => ({name, stale: undefined})));

        // SDK way: a discovery whose clients make their first calls now; direct way: the clean one, whose clients made theirs.
        const discovery = row.way === 'sdk' ? discoveryOf() : clean;
        proxy.fault = row.rule;
        const spoiled = await discovery.runCycle(registrar);
        proxy.fault = undefined;
        expect(spoiled.items.filter((i) => i.action === 'delete')).toEqual([]);
        const failed = spoiled.sources.find((s) => s.id.startsWith(row.source));
        expect(failed, JSON.stringify(spoiled.sources)).toMatchObject({ok: false, error: {reason: 'invalid_response'}});
        expect(failed?.error?.message).toContain(typeof row.key === 'string' ? `malformed answer: duplicate key "${row.key}"` : row.key.says);
        expect(JSON.stringify(spoiled)).not.toContain(KEY.secretAccessKey);
        expect(await names()).toEqual(NAMES.map((name) => ({name, stale: true})));

        const recovered = await discovery.runCycle(registrar);
        expect(recovered.sources.filter((s) => s.id.startsWith(row.source)).every((s) => s.ok), JSON.stringify(recovered.sources)).toBe(true);
        expect(await names()).toEqual(NAMES.map((name) => ({name, stale: undefined})));
      } finally {
        proxy.fault = undefined;
        await heartbeat.stop({deregister: false});
        await backend.close();
      }
    });
  }
});
