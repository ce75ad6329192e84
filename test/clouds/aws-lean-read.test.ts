/**
 * The short call path of the organization region clients (src/clouds/aws/lean-read.ts) keeps
 * the promise: after a clean cycle (the SDK's first call of each operation shows the short path
 * its request), every fault of a steady cycle's `ListClusters` — throttling, 5xx, broken or
 * empty JSON, a truncated or reset answer, a hang, expired credentials, a later page — fails
 * the (account, region) source and deletes nothing, while the other account's source goes on;
 * a fault of `GetResources` (the tag read) makes the source describe instead, deleting nothing.
 * The real service (Discovery, registrar, memory registry) talks to the wire-level AWS fake
 * through the fault proxy.
 */
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeAwsWorld, FakeOrganization, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, startFaultProxy, type FaultProxy, type ProxyFault, type ProxyFaultRule} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

const MGMT = '111111111111';
const KEY = {accessKeyId: 'AKIALEANREAD00000001', secretAccessKey: 'lean-read-secret'};
const ROLE = 'kube-discovery';
const REGION = 'eu-west-1';
const HIT = '222222222222';
const CALM = '333333333333';

let fake: FakeAws;
let proxy: FaultProxy;
let org: FakeOrganization;
let restoreEnv: () => void;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(MGMT, {accessKeys: [KEY]});
  org = new FakeOrganization({managementAccount: MGMT});
  world.organization = org;
  const unit = org.addUnit('members');
  for (const account of [HIT, CALM]) {
    org.addAccount(account, {parent: unit});
    world.addAccount(account, {roles: [{arn: `arn:aws:iam::${account}:role/${ROLE}`, trust: [MGMT]}]});
    for (const n of ['a', 'b', 'c', 'd']) world.addCluster(account, REGION, {name: `${n}-${account.slice(0, 3)}`, tags: {env: 'prod'}});
  }
  // Two ListClusters pages per source (also with one cluster removed), so a later page can be spoiled too.
  fake = await startFakeAws({world, pageSize: 2});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  const viaProxy = Object.fromEntries(Object.entries(fake.env).map(([k, v]) => [k, v === fake.url ? proxy.url : v]));
  // Standard retries (adaptive's rate limiter would slow the next test's calls after a throttle).
  restoreEnv = setEnv({...viaProxy, AWS_MAX_ATTEMPTS: '3', AWS_RETRY_MODE: 'standard', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: REGION});
});

afterAll(async () => {
  restoreEnv();
  await proxy.close();
  await fake.close();
});

beforeEach(() => {
  proxy.fault = undefined;
});

interface Harness {
  cycle(): Promise<CycleReport>;
  names(): Promise<string[]>;
  /** Calls that went through the SDK's serialize step, by command: the short path skips it. */
  readonly serialized: Map<string, number>;
}

/**
 * The per-call deadline of a row whose fault makes a call hang: it cuts the hang. Every other row
 * gives calls the round-trip budget, since a good call on a loaded machine can take longer than a
 * short deadline, and a timed-out good call fails or retries where the row expects neither.
 */
const HANG_DEADLINE_MS = 1_000;

async function harness(requestTimeoutMs: number = ROUND_TRIP.timeout): Promise<Harness> {
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: lean
  aws:
    - types: [eks]
      regions: [${REGION}]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["*"]}}
storage: {type: memory}
`,
    'lean.yaml',
  );
  const backend = new MemoryBackend({clock: systemClock});
  const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'lean', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(KEY)});
  const serialized = new Map<string, number>();
  const discovery = new Discovery({
    config,
    clock: systemClock,
    aws: {
      credentialProvider: (role) => providers.provider(role),
      requestTimeoutMs,
      onClient: (client) =>
        (client.middlewareStack as unknown as {add(mw: unknown, o: object): void}).add(
          (next: (a: unknown) => Promise<unknown>, context: {commandName?: string}) => (args: unknown) => {
            serialized.set(context.commandName ?? '', (serialized.get(context.commandName ?? '') ?? 0) + 1);
            return next(args);
          },
          {step: 'serialize', name: 'testSerializeCounter', override: true},
        ),
    },
  });
  const registrar = createRegistrar(backend, heartbeat, 'lean');
  afterCleanup.push(async () => {
    await heartbeat.stop({deregister: false});
    await backend.close();
  });
  return {
    cycle: () => discovery.runCycle(registrar),
    names: async () => (await registrar.current()).map((s) => s.metadata.name).sort(),
    serialized,
  };
}

const afterCleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of afterCleanup) await close();
});

/** The member accounts' sources (the management account, in the root, has no role to assume). */
function members(report: CycleReport): CycleReport['sources'] {
  return report.sources.filter((s) => s.account === HIT || s.account === CALM);
}

/** A fault for the steady cycle's ListClusters of one account, on the given page. */
function listFault(fault: ProxyFault | (() => ProxyFault | undefined), page?: 'first' | 'later'): ProxyFaultRule {
  return (req) => (req.operation === 'ListClusters' && req.account === HIT && (page === undefined || req.page === page) ? (typeof fault === 'function' ? fault() : fault) : undefined);
}

const eksError = (status: number, code: string): ProxyFault => answer(status, JSON.stringify({message: `${code} injected`}), {'x-amzn-errortype': code});

const LIST_FAULTS: {name: string; rule: ProxyFaultRule; reason: string; attempts: number; requestTimeoutMs?: number}[] = [
  {name: '503 on every attempt', rule: listFault(eksError(503, 'ServiceUnavailableException')), reason: 'other', attempts: 3},
  {name: '200 with broken JSON', rule: listFault(answer(200, '{"clusters": ["a-222"')), reason: 'invalid_response', attempts: 1},
  {name: '200 {}', rule: listFault(answer(200, '{}')), reason: 'invalid_response', attempts: 1},
  {name: '200 {"clusters":null}', rule: listFault(answer(200, '{"clusters":null}')), reason: 'invalid_response', attempts: 1},
  {name: '200 []', rule: listFault(answer(200, '[]')), reason: 'invalid_response', attempts: 1},
  {name: '200 with an empty body', rule: listFault(answer(200, '')), reason: 'invalid_response', attempts: 1},
  {name: '200 {"clusters":[1,2]}', rule: listFault(answer(200, '{"clusters":[1,2]}')), reason: 'invalid_response', attempts: 1},
  {name: 'a later page with broken JSON', rule: listFault(answer(200, '{"clusters":'), 'later'), reason: 'invalid_response', attempts: 1},
  {name: '403 ExpiredTokenException', rule: listFault(eksError(403, 'ExpiredTokenException')), reason: 'access_denied', attempts: 1},
  {name: 'a hang past the request timeout', rule: listFault({kind: 'hang'}), reason: 'timeout', attempts: 3, requestTimeoutMs: HANG_DEADLINE_MS},
];

describe('ListClusters on the short path: a fault fails the source and deletes nothing', () => {
  for (const fault of LIST_FAULTS) {
    it(`${fault.name}: ${fault.reason}, ${fault.attempts} attempt(s), every entry stays`, async () => {
      const h = await harness(fault.requestTimeoutMs);
      await h.cycle();
      const before = await h.names();
      expect(before).toHaveLength(8);
      // The world changes too: read as a good listing, the fault would deregister both.
      fake.world.removeCluster(HIT, REGION, 'a-222');
      fake.world.removeCluster(CALM, REGION, 'a-333');
      try {
        const seenBefore = proxy.seen.length;
        const sdkCalls = h.serialized.get('ListClustersCommand');
        proxy.fault = fault.rule;
        const report = await h.cycle();
        const hit = report.sources.find((s) => s.account === HIT);
        expect(hit).toMatchObject({ok: false, error: expect.objectContaining({reason: fault.reason, operation: 'ListClusters'})});
        // The other account's good listing is applied: only its removed cluster goes.
        expect(report.counts.delete).toBe(1);
        expect(await h.names()).toEqual(before.filter((n) => !n.startsWith('a-333')));
        const faulted = proxy.seen.slice(seenBefore).filter((s) => s.fault !== undefined);
        expect(faulted).toHaveLength(fault.attempts);
        // The steady calls took the short path: none went through the SDK's serializer.
        expect(h.serialized.get('ListClustersCommand')).toBe(sdkCalls);
      } finally {
        proxy.fault = undefined;
        fake.world.addCluster(HIT, REGION, {name: 'a-222', tags: {env: 'prod'}});
        fake.world.addCluster(CALM, REGION, {name: 'a-333', tags: {env: 'prod'}});
      }
    });
  }

  for (const kind of ['truncate', 'reset'] as const) {
    it(`an answer ${kind === 'truncate' ? 'cut halfway through its body' : 'reset before any byte'} on every attempt fails the source; nothing is deleted`, async () => {
      const h = await harness();
      await h.cycle();
      const before = await h.names();
      fake.world.removeCluster(HIT, REGION, 'a-222');
      try {
        proxy.fault = listFault({kind});
        const report = await h.cycle();
        expect(report.sources.find((s) => s.account === HIT)).toMatchObject({ok: false});
        expect(report.counts.delete).toBe(0);
        expect(await h.names()).toEqual(before);
      } finally {
        proxy.fault = undefined;
        fake.world.addCluster(HIT, REGION, {name: 'a-222', tags: {env: 'prod'}});
      }
    });
  }

  it('throttling is retried by the SDK strategy: the third attempt lists, and a removed cluster is deregistered', async () => {
    const h = await harness();
    await h.cycle();
    fake.world.removeCluster(HIT, REGION, 'b-222');
    try {
      let throttled = 0;
      proxy.fault = listFault(() => (throttled++ < 2 ? eksError(429, 'ThrottlingException') : undefined), 'first');
      const report = await h.cycle();
      expect(throttled).toBe(3);
      expect(members(report).every((s) => s.ok)).toBe(true);
      expect(report.counts.delete).toBe(1);
      expect((await h.names()).some((n) => n.startsWith('b-222'))).toBe(false);
    } finally {
      proxy.fault = undefined;
      fake.world.addCluster(HIT, REGION, {name: 'b-222', tags: {env: 'prod'}});
    }
  });
});

describe('GetResources on the short path: a failed tag read describes instead', () => {
  const TAG_FAULTS: [string, ProxyFault][] = [
    ['500', answer(500, JSON.stringify({__type: 'InternalServiceException', Message: 'injected'}))],
    ['broken JSON', answer(200, '{"ResourceTagMappingList": [')],
    ['no ResourceTagMappingList', answer(200, '{}')],
    ['a mapping without ResourceARN', answer(200, '{"ResourceTagMappingList": [{"Tags": []}]}')],
    ['a truncated answer', {kind: 'truncate'}],
    ['a hang', {kind: 'hang'}],
  ];
  for (const [name, fault] of TAG_FAULTS) {
    it(`${name}: the source describes its clusters and stays whole; nothing is deleted`, async () => {
      const h = await harness(fault.kind === 'hang' ? HANG_DEADLINE_MS : undefined);
      await h.cycle();
      const before = await h.names();
      const clean = await h.cycle();
      expect(clean.counts.delete).toBe(0);
      // Tag reads are POSTs to / in the member region (Organizations and STS are classified apart).
      proxy.fault = (req) => (req.operation === 'POST /' && req.region === REGION && req.account === HIT ? fault : undefined);
      fake.stats.reset();
      const sdkCalls = h.serialized.get('GetResourcesCommand');
      const report = await h.cycle();
      expect(members(report).every((s) => s.ok)).toBe(true);
      expect(report.counts.delete).toBe(0);
      expect(await h.names()).toEqual(before);
      expect(fake.stats.count({operation: 'DescribeCluster', account: HIT})).toBe(4);
      expect(fake.stats.count({operation: 'DescribeCluster', account: CALM})).toBe(0);
      expect(sdkCalls).toBeGreaterThan(0);
      expect(h.serialized.get('GetResourcesCommand')).toBe(sdkCalls);
    });
  }
});
