/**
 * Organization-wide discovery against the wire-level AWS fake: the real Organizations, STS and
 * EKS clients walk a fake organization from the management account, assume the member role in
 * each account and list its clusters, cycle after cycle through the real Discovery and Heartbeat.
 */
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {logSourceResult} from '../../src/observability/log-events.ts';
import {Metrics} from '../../src/observability/metrics.ts';
import {StatusTracker} from '../../src/status/status.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws, type FaultHook} from '../fakes/aws-fakes.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

const MGMT = '111111111111';
const KEY = {accessKeyId: 'AKIAORGTEST000000001', secretAccessKey: 'org-secret-key'};
const ROLE = 'kube-discovery';
const EXTERNAL_ID = 'ext-17';
const REGIONS = ['us-east-1', 'eu-west-1'];

let fake: FakeAws;
let clock: FakeClock;
let restoreEnv: () => void;
let org: FakeOrganization;
const ou = {prod: '', prodEu: '', dev: '', sandbox: ''};

function addMember(world: FakeAwsWorld, account: string, parent: string, options: {trusted?: boolean} = {}): void {
  org.addAccount(account, {parent});
  world.addAccount(account, {
    roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: options.trusted === false ? ['999999999999'] : [MGMT], externalId: EXTERNAL_ID}],
  });
  for (const region of REGIONS) {
    world.addCluster(account, region, {name: `c-${account.slice(0, 3)}-a`, tags: {env: 'prod'}});
    world.addCluster(account, region, {name: `c-${account.slice(0, 3)}-b`, tags: {env: 'prod'}});
  }
}

beforeAll(async () => {
  clock = new FakeClock(Date.now());
  const world = new FakeAwsWorld({clock});
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  ou['prod'] = org.addUnit('prod');
  ou['prodEu'] = org.addUnit('prod-eu', ou['prod']); // nested: included through its parent
  ou['dev'] = org.addUnit('dev');
  ou['sandbox'] = org.addUnit('sandbox', ou['dev']);
  addMember(world, '222222222222', ou['prod']);
  addMember(world, '333333333333', ou['prodEu']);
  addMember(world, '444444444444', ou['dev']);
  addMember(world, '555555555555', ou['sandbox']);
  addMember(world, '666666666666', ou['prod'], {trusted: false});
  addMember(world, '888888888888', ou['prod']);
  org.setStatus('888888888888', 'SUSPENDED');
  // The management account's own cluster: in the root, so in scope of include ["*"] only.
  world.addRole({arn: `arn:aws:iam::${MGMT}:role/${ROLE}`, trust: [MGMT], externalId: EXTERNAL_ID});
  world.addCluster(MGMT, 'us-east-1', {name: 'mgmt-cluster'});
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
});

interface Harness {
  cycle(): Promise<CycleReport>;
  names(): Promise<string[]>;
  close(): Promise<void>;
}

/** Discovery of one organization matcher; Organizations calls end at `organizationsTimeoutMs`, short only where one is made to hang. */
async function harness(orgYaml: string, regions = `[${REGIONS.join(', ')}]`, organizationsTimeoutMs: number = ROUND_TRIP.timeout): Promise<Harness> {
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: org
  aws:
    - types: [eks]
      regions: ${regions}
      assume_role_name: ${ROLE}
      external_id: ${EXTERNAL_ID}
      organization: ${orgYaml}
storage: {type: memory}
`,
    'org.yaml',
  );
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'org', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  // Credentials follow the world's clock, so a test can let assumed-role credentials expire.
  const providers = new AwsCredentialProviders({env: process.env, clock, base: () => Promise.resolve(KEY)});
  const discovery = new Discovery({
    config,
    clock: systemClock,
    aws: {credentialProvider: (role) => providers.provider(role), organizations: {organizationsTimeoutMs, clock}},
  });
  const registrar = createRegistrar(backend, heartbeat, 'org');
  return {
    cycle: () => discovery.runCycle(registrar),
    names: async () => (await registrar.current()).map((s) => s.metadata.name).sort(),
    close: async () => {
      await heartbeat.stop({deregister: false});
      await backend.close();
    },
  };
}

function clustersOf(...accounts: string[]): string[] {
  return accounts
    .flatMap((a) => REGIONS.flatMap((r) => [`c-${a.slice(0, 3)}-a-eks-${r}-${a}`, `c-${a.slice(0, 3)}-b-eks-${r}-${a}`]))
    .sort();
}

let h: Harness | undefined;
beforeEach(() => {
  fake.fault = undefined;
  fake.stats.reset();
});
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('organization matcher against the fake', () => {
  it('finds every cluster of every ACTIVE member in the included OUs (nested too), none of the excluded; a denied account fails alone', async () => {
    h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"], exclude: []}}`);
    const report = await h.cycle();
    expect(await h.names()).toEqual(clustersOf('222222222222', '333333333333'));
    const denied = report.sources.find((s) => s.id === 'eks:*:666666666666');
    expect(denied).toMatchObject({ok: false, account: '666666666666', region: '*', error: {reason: 'access_denied', code: 'AccessDenied', operation: 'AssumeRole'}});
    expect(denied?.error?.message).toContain(`arn:aws:iam::666666666666:role/${ROLE}`);
    expect(report.result).toBe('partial');

    // What an operator sees: one log line naming account, role and error; /v1/status with the
    // account id; metrics counting it without an account label.
    const result = report.results.find((r) => r.source.id === 'eks:*:666666666666');
    expect(result).toBeDefined();
    const lines: string[] = [];
    const logger = createLogger({level: 'debug', format: 'json', destination: {write: (line: string) => void lines.push(line)}});
    logSourceResult(logger, result!, 5);
    const failures = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['event'] === 'source_failed');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({account: '666666666666', operation: 'AssumeRole', code: 'AccessDenied', reason: 'access_denied'});
    expect(failures[0]?.['msg']).toContain(`arn:aws:iam::666666666666:role/${ROLE}`);
    const status = new StatusTracker();
    status.recordSource(result!, Date.now());
    expect(JSON.stringify(status.sources())).toContain('"account":"666666666666"');
    const metrics = new Metrics({defaultMetrics: false});
    metrics.observeCycle(report);
    const body = (await metrics.render()).body;
    expect(body).toMatch(/kube_discovery_source_errors_total\{cloud="AWS",region="[^"]+",reason="access_denied"\} 1/);
    expect(body).not.toContain('666666666666');
    // The suspended account is never assumed into (one skipped source keeps whatever it had);
    // the excluded subtree is never listed.
    expect(fake.stats.count({operation: 'AssumeRole'})).toBe(3);
    expect(report.sources.filter((s) => s.account === '888888888888')).toEqual([expect.objectContaining({id: 'eks:*:888888888888', ok: true, skipped: expect.stringContaining('SUSPENDED') as unknown})]);
    expect(report.sources.some((s) => s.account === '444444444444')).toBe(false);
  });

  it('include ["*"] with an excluded OU skips that OU and everything below it', async () => {
    h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["*"], exclude: ["${ou['dev']}"]}}`);
    await h.cycle();
    const names = await h.names();
    expect(names).toEqual([...clustersOf('222222222222', '333333333333'), `mgmt-cluster-eks-us-east-1-${MGMT}`].sort());
    expect(names.some((n) => n.endsWith('444444444444') || n.endsWith('555555555555'))).toBe(false);
  });

  it('an account joining an included OU is found next cycle; one leaving is deregistered only after two good walks without it', async () => {
    h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"]}}`);
    await h.cycle();
    addMember(fake.world, '777777777777', ou['prodEu']);
    await h.cycle();
    expect(await h.names()).toEqual(clustersOf('222222222222', '333333333333', '777777777777'));

    org.removeAccount('777777777777');
    // A failing walk first: the leaver's clusters stay, stale.
    fake.fault = (ctx) => (ctx.operation === 'ListAccountsForParent' ? {code: 'ServiceException', status: 500} : undefined);
    const failedWalk = await h.cycle();
    expect(failedWalk.counts.delete).toBe(0);
    expect(failedWalk.sources).toEqual([expect.objectContaining({id: `eks:*:${org.id}`, ok: false, error: expect.objectContaining({operation: 'ListAccountsForParent'})})]);
    expect(await h.names()).toEqual(clustersOf('222222222222', '333333333333', '777777777777'));

    fake.fault = undefined;
    // One good walk without it could be a move racing the walk: kept, stale; the second deregisters.
    const firstGood = await h.cycle();
    expect(firstGood.counts.delete).toBe(0);
    expect(firstGood.sources).toContainEqual(expect.objectContaining({id: 'eks:*:777777777777', ok: true, skipped: expect.stringContaining('missing from this organization walk')}));
    const good = await h.cycle();
    expect(good.items.filter((i) => i.action === 'delete').map((i) => i.name).sort()).toEqual(clustersOf('777777777777'));
    expect(await h.names()).toEqual(clustersOf('222222222222', '333333333333'));
  });

  it('an account whose role can no longer be assumed keeps its clusters, stale; steady state makes no STS call', async () => {
    h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"]}}`);
    await h.cycle();
    const assumes = fake.stats.count({operation: 'AssumeRole'});
    await h.cycle();
    // Cached until near expiry: only the account that denied it (666…) is tried again.
    expect(fake.stats.count({operation: 'AssumeRole'})).toBe(assumes + 1);

    // The member removes its trust; once the cached credentials expire, AssumeRole is denied.
    fake.world.addRole({arn: `arn:aws:iam::222222222222:role/${ROLE}`, trust: ['999999999999'], externalId: EXTERNAL_ID});
    await clock.advance(2 * 3_600_000);
    const report = await h.cycle();
    expect(report.sources.find((s) => s.id === 'eks:*:222222222222')).toMatchObject({ok: false, error: {reason: 'access_denied', operation: 'AssumeRole'}});
    const kept = report.items.filter((i) => i.name.endsWith('-222222222222'));
    expect(kept.map((i) => i.action)).toEqual(['stale', 'stale', 'stale', 'stale']);
    expect(await h.names()).toEqual(clustersOf('222222222222', '333333333333'));
    // Other accounts still reconcile normally.
    expect(report.items.filter((i) => i.name.endsWith('-333333333333')).every((i) => i.action === 'unchanged')).toBe(true);
    fake.world.addRole({arn: `arn:aws:iam::222222222222:role/${ROLE}`, trust: [MGMT], externalId: EXTERNAL_ID});
  });

  it('a wrong organization id fails the matcher with a clear reason and deletes nothing', async () => {
    h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"]}}`);
    await h.cycle();
    const before = await h.names();
    const wrong = await harness(`{organization_id: o-zzzzzzzzzz, organizational_units: {include: ["${ou['prod']}"]}}`);
    try {
      // Same discovery group, same registry entries: the mismatching matcher must not delete them.
      const report = await wrong.cycle();
      expect(report.sources).toEqual([
        expect.objectContaining({ok: false, error: expect.objectContaining({code: 'OrganizationMismatch', message: expect.stringContaining(`belong to organization ${org.id}`)})}),
      ]);
      expect(report.counts.delete).toBe(0);
    } finally {
      await wrong.close();
    }
    expect(await h.names()).toEqual(before);
  });
});

describe('incremental discovery of an organization matcher', () => {
  it('steady cycles read tags per (account, region) and describe only what changed; a failing tag read in one account describes instead and deletes nothing', async () => {
    h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"]}}`);
    const first = await h.cycle();
    expect(first.counts.create).toBe(8);
    // Cold: every cluster of the two assumable accounts described once.
    expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(8);

    fake.stats.reset();
    const steady = await h.cycle();
    expect(steady.counts).toMatchObject({unchanged: 8, delete: 0, create: 0});
    expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(0);
    // One tag read per (account, region), signed as that account.
    expect(fake.stats.count({operation: 'GetResources', account: '222222222222'})).toBe(REGIONS.length);
    expect(fake.stats.count({operation: 'GetResources', account: '333333333333'})).toBe(REGIONS.length);

    // A tag changed in one member account: that cluster alone is described, and its entry updated.
    fake.world.retagCluster('333333333333', 'eu-west-1', 'c-333-b', {env: 'prod', team: 'payments'});
    fake.stats.reset();
    const retagged = await h.cycle();
    expect(fake.stats.find({operation: 'DescribeCluster'}).map((c) => `${c.account}/${c.region}`)).toEqual(['333333333333/eu-west-1']);
    expect(retagged.items.find((i) => i.name === 'c-333-b-eks-eu-west-1-333333333333')?.action).toBe('update');

    // The tag read is denied in one account: its clusters are described instead; nothing leaves.
    fake.fault = (ctx) => (ctx.operation === 'GetResources' && ctx.account === '222222222222' ? {code: 'AccessDeniedException'} : undefined);
    fake.stats.reset();
    const denied = await h.cycle();
    expect(denied.counts.delete).toBe(0);
    expect(denied.sources.filter((s) => s.account === '222222222222').every((s) => s.ok)).toBe(true);
    expect(fake.stats.count({operation: 'DescribeCluster', account: '222222222222'})).toBe(4);
    expect(fake.stats.count({operation: 'DescribeCluster', account: '333333333333'})).toBe(0);
    expect(await h.names()).toEqual(clustersOf('222222222222', '333333333333'));
    fake.world.retagCluster('333333333333', 'eu-west-1', 'c-333-b', {env: 'prod'});
  });
});

describe('regions ["*"] of an organization matcher', () => {
  it('lists only the regions each account enabled, asks again only after the refresh interval, and falls back to every region when it cannot ask', async () => {
    fake.world.enabledRegions.set('222222222222', ['eu-west-1', 'me-south-1', 'us-east-1']);
    fake.world.enabledRegions.set('333333333333', ['us-east-1']);
    fake.world.addCluster('222222222222', 'me-south-1', {name: 'opt-in-cluster'});
    try {
      h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"]}}`, '["*"]');
      const first = await h.cycle();
      const names = await h.names();
      expect(names).toContain('opt-in-cluster-eks-me-south-1-222222222222');
      expect(names.filter((n) => n.endsWith('-333333333333'))).toEqual([`c-333-a-eks-us-east-1-333333333333`, `c-333-b-eks-us-east-1-333333333333`]);
      // One source per enabled region: 3 + 1 (666 refuses its role and is one failed source).
      expect(first.sources.filter((s) => s.ok && !s.skipped).map((s) => s.id).sort()).toEqual([
        'eks:eu-west-1:222222222222', 'eks:me-south-1:222222222222', 'eks:us-east-1:222222222222', 'eks:us-east-1:333333333333',
      ]);
      expect(fake.stats.count({operation: 'ListRegions'})).toBeGreaterThanOrEqual(2);

      fake.stats.reset();
      await h.cycle();
      expect(fake.stats.count({operation: 'ListRegions'})).toBe(0);

      // Past the refresh interval it asks again; an account that cannot answer gets every region.
      await clock.advance(2 * 3_600_000);
      fake.stats.reset();
      fake.fault = (ctx) => (ctx.operation === 'ListRegions' && ctx.account === '333333333333' ? {code: 'AccessDeniedException'} : undefined);
      const third = await h.cycle();
      expect(fake.stats.count({operation: 'ListRegions'})).toBeGreaterThanOrEqual(2);
      expect(third.counts.delete).toBe(0);
      expect(third.sources.filter((s) => s.account === '333333333333').length).toBe(1);
    } finally {
      fake.fault = undefined;
      fake.world.enabledRegions.clear();
      fake.world.removeCluster('222222222222', 'me-south-1', 'opt-in-cluster');
    }
  });
});

// Only the hang row has a short Organizations deadline (its good calls share the client with the hung one).
const faults: {name: string; hook: FaultHook; reason: string; organizationsTimeoutMs?: number}[] = [
  {name: 'ListRoots AccessDenied', hook: (c) => (c.operation === 'ListRoots' ? {code: 'AccessDeniedException', status: 400} : undefined), reason: 'access_denied'},
  {name: 'ListOrganizationalUnitsForParent throttled', hook: (c) => (c.operation === 'ListOrganizationalUnitsForParent' ? {code: 'TooManyRequestsException', status: 400} : undefined), reason: 'throttled'},
  {name: 'ListAccountsForParent broken JSON', hook: (c) => (c.operation === 'ListAccountsForParent' ? {malformed: 'invalid-json'} : undefined), reason: 'invalid_response'},
  {name: 'ListAccountsForParent empty 2xx body', hook: (c) => (c.operation === 'ListAccountsForParent' ? {malformed: 'missing-fields'} : undefined), reason: 'invalid_response'},
  {name: 'ListOrganizationalUnitsForParent empty 2xx body', hook: (c) => (c.operation === 'ListOrganizationalUnitsForParent' ? {malformed: 'missing-fields'} : undefined), reason: 'invalid_response'},
  {name: 'DescribeOrganization hangs', hook: (c) => (c.operation === 'DescribeOrganization' ? {hang: true} : undefined), reason: 'timeout', organizationsTimeoutMs: 1000},
];

describe('organization walk faults delete nothing', () => {
  for (const fault of faults) {
    it(`${fault.name}: the matcher fails (${fault.reason}), every entry stays`, async () => {
      h = await harness(`{organization_id: ${org.id}, organizational_units: {include: ["${ou['prod']}"]}}`, undefined, fault.organizationsTimeoutMs);
      await h.cycle();
      const before = await h.names();
      expect(before.length).toBeGreaterThan(0);
      // The world changes too: without the fault these would be deregistered.
      org.moveAccount('333333333333', ou['dev']);
      fake.fault = fault.hook;
      try {
        const report = await h.cycle();
        expect(report.counts.delete).toBe(0);
        expect(report.sources).toEqual([expect.objectContaining({ok: false, region: '*', error: expect.objectContaining({reason: fault.reason})})]);
        expect(await h.names()).toEqual(before);
      } finally {
        fake.fault = undefined;
        org.moveAccount('333333333333', ou['prodEu']);
      }
    });
  }
});
