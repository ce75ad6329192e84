/**
 * Adversarial, incremental path: the tag read (`GetResources`, on the short path of lean-read.ts)
 * only ever decides which clusters to describe; ListClusters stays the authority on what exists.
 * Tag pages that are wrong — a 2xx carrying `x-amzn-ErrorType`, a PaginationToken that comes
 * back, a list that is null, a tag without a value, mappings of another region, an empty but
 * well-formed read — must never drop a cluster: the cycle describes instead. The running service
 * (Discovery, registrar, heartbeat) on a real SQLite registry, against the wire-level fake behind
 * the fault proxy.
 */
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, startFaultProxy, type FaultProxy, type ProxyFault} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const KEY = {accessKeyId: 'AKIATAGREADATTACKS01', secretAccessKey: 'tag-read-attacks-secret'};
const NAMES = ['a1-eks-us-east-1-111111111111', 'b1-eks-us-east-1-111111111111', 'payments'];

let fake: FakeAws;
let proxy: FaultProxy;
let restoreEnv: () => void;
let dir: string;
let backend: SqliteBackend;
let heartbeat: Heartbeat;
let registrar: Registrar;
let discovery: Discovery;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, REGION, {name: 'a1', tags: {env: 'prod'}});
  world.addCluster(ACCOUNT, REGION, {name: 'a2', tags: {env: 'prod', TeleportKubernetesName: 'payments'}});
  world.addCluster(ACCOUNT, REGION, {name: 'b1', tags: {env: 'prod'}});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  const viaProxy = Object.fromEntries(Object.entries(fake.env).map(([k, v]) => [k, v === fake.url ? proxy.url : v]));
  restoreEnv = setEnv({...viaProxy, AWS_MAX_ATTEMPTS: '1', AWS_RETRY_MODE: 'standard', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: REGION});
  dir = mkdtempSync(path.join(tmpdir(), 'eks-tag-read-'));
  backend = await SqliteBackend.open({path: path.join(dir, 'registry.db'), clock: systemClock});
  heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  // The default refresh interval (1 h): after the first cycle, the tag read decides what is described.
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: g1
  aws:
    - types: [eks]
      regions: [${REGION}]
      tags: {env: prod}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
`,
    'eks-tag-read.yaml',
  );
  const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(KEY)});
  discovery = new Discovery({config, clock: systemClock, aws: {credentialProvider: (role) => providers.provider(role), requestTimeoutMs: 2_000}});
  registrar = createRegistrar(backend, heartbeat, 'g1');
});
afterAll(async () => {
  await heartbeat.stop({deregister: false});
  await backend.close();
  restoreEnv();
  await proxy.close();
  await fake.close();
  rmSync(dir, {recursive: true, force: true});
});

async function entries(): Promise<{name: string; stale: boolean}[]> {
  return (await registrar.current()).map((s) => ({name: s.metadata.name, stale: s.status?.stale === true})).sort((a, b) => a.name.localeCompare(b.name));
}

const isTagRead = (operation: string): boolean => operation === 'POST /';
const page = (body: object, headers: Record<string, string> = {}): ProxyFault => answer(200, JSON.stringify(body), {'content-type': 'application/x-amz-json-1.1', ...headers});
const arn = (region: string, name: string): string => `arn:aws:eks:${region}:${ACCOUNT}:cluster/${name}`;

const SPOILS: [string, () => ProxyFault][] = [
  ['a 200 carrying x-amzn-ErrorType', () => page({ResourceTagMappingList: []}, {'x-amzn-errortype': 'ThrottlingException'})],
  ['a PaginationToken that comes back', () => page({ResourceTagMappingList: [], PaginationToken: 'p1'})],
  ['a null mapping list', () => page({ResourceTagMappingList: null})],
  ['a tag without a value', () => page({ResourceTagMappingList: [{ResourceARN: arn(REGION, 'a1'), Tags: [{Key: 'env', Value: null}]}]})],
  ['mappings of another region only, with other tags', () => page({ResourceTagMappingList: ['a1', 'a2', 'b1'].map((n) => ({ResourceARN: arn('eu-west-1', n), Tags: [{Key: 'env', Value: 'dev'}]}))})],
  ['an empty, well-formed read (eventual consistency)', () => page({ResourceTagMappingList: []})],
];

describe('a tag read that is wrong drops no cluster: the cycle describes instead', () => {
  it('a clean cycle registers the three clusters, and a second one reads tags instead of describing', async () => {
    await discovery.runCycle(registrar);
    expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
    fake.stats.reset();
    await discovery.runCycle(registrar);
    expect(fake.stats.count({operation: 'GetResources'})).toBeGreaterThan(0);
    expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(0);
  });

  for (const [what, fault] of SPOILS) {
    it(`${what}: every cluster described, every entry kept and fresh`, async () => {
      fake.stats.reset();
      proxy.fault = (req) => (isTagRead(req.operation) ? fault() : undefined);
      try {
        const report = await discovery.runCycle(registrar);
        expect(report.sources.every((s) => s.ok)).toBe(true);
        expect(report.counts.delete).toBe(0);
        expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
        expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(3);
      } finally {
        proxy.fault = undefined;
      }
    });
  }

  it('a cluster gone from ListClusters is deregistered whatever the tag read says of it', async () => {
    fake.world.removeCluster(ACCOUNT, REGION, 'b1');
    proxy.fault = (req) => (isTagRead(req.operation) ? page({ResourceTagMappingList: ['a1', 'a2', 'b1'].map((n) => ({ResourceARN: arn(REGION, n), Tags: [{Key: 'env', Value: 'prod'}]}))}) : undefined);
    try {
      const report = await discovery.runCycle(registrar);
      expect(report.counts.delete).toBe(1);
      expect((await entries()).map((e) => e.name)).toEqual(['a1-eks-us-east-1-111111111111', 'payments']);
    } finally {
      proxy.fault = undefined;
    }
  });
});
