/**
 * Adversarial, end to end: the three EKS answers this review found read as good ones — a tag of
 * the wrong JSON type, a ListClusters name EKS cannot give a cluster, a 2xx carrying
 * `x-amzn-ErrorType` — met by the running service (Discovery, registrar, heartbeat) on a real
 * SQLite registry, through the real EKS client on the short path of a single-account matcher,
 * against the wire-level fake behind the fault proxy. After a clean cycle, each spoiled cycle
 * keeps every entry (stale where its source failed or its record was unusable), renames nothing,
 * and the next clean cycle is as the first.
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
import type {Registrar} from '../../src/discovery/cycle.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {SqliteBackend} from '../../src/registry/sqlite.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, mutateJson, startFaultProxy, type FaultProxy, type ProxyFaultRule} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const KEY = {accessKeyId: 'AKIAMALFORMEDSVC0001', secretAccessKey: 'malformed-service-secret'};
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
  dir = mkdtempSync(path.join(tmpdir(), 'eks-malformed-'));
  backend = await SqliteBackend.open({path: path.join(dir, 'registry.db'), clock: systemClock});
  heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: g1
  refresh_interval: 0s
  aws:
    - types: [eks]
      regions: [${REGION}]
      tags: {env: prod}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
`,
    'eks-malformed.yaml',
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

const retag = (edit: (tags: Record<string, unknown>, name: string) => unknown): ProxyFaultRule => (req) =>
  req.operation === 'DescribeCluster'
    ? mutateJson((body) => {
        const cluster = body['cluster'] as Record<string, unknown>;
        return {cluster: {...cluster, tags: edit(cluster['tags'] as Record<string, unknown>, String(cluster['name']))}};
      })
    : undefined;

const SPOILS: [string, ProxyFaultRule, string[]][] = [
  ['a tag value that is not a string (env of a1, the name tag of a2)', retag((tags, name) => (name === 'a1' ? {...tags, env: 7} : name === 'a2' ? {...tags, TeleportKubernetesName: null} : tags)), ['a1-eks-us-east-1-111111111111', 'payments']],
  ['tags that are a string', retag((tags, name) => (name === 'b1' ? 'env=prod' : tags)), ['b1-eks-us-east-1-111111111111']],
  ['a ListClusters name that is not UTF-8 where b1 was', (req) => (req.operation === 'ListClusters' ? answer(200, '{"clusters":["a1","a2","b\uFFFD"]}') : undefined), NAMES],
  ['a ListClusters 200 that carries x-amzn-ErrorType', (req) => (req.operation === 'ListClusters' ? answer(200, '{"clusters":[]}', {'x-amzn-errortype': 'InternalFailure'}) : undefined), NAMES],
];

describe('the service on SQLite meets answers that look good but are not', () => {
  it('a clean cycle registers the three clusters', async () => {
    const report = await discovery.runCycle(registrar);
    expect(report.sources.every((s) => s.ok)).toBe(true);
    expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
  });

  for (const [what, rule, stale] of SPOILS) {
    it(`${what}: nothing deleted or renamed; ${stale.length === NAMES.length ? 'every entry' : stale.join(', ')} stale; the next clean cycle heals`, async () => {
      proxy.fault = rule;
      try {
        const report = await discovery.runCycle(registrar);
        expect(report.counts.delete).toBe(0);
        expect(report.counts.create).toBe(0);
        expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: stale.includes(name)})));
      } finally {
        proxy.fault = undefined;
      }
      await discovery.runCycle(registrar);
      expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
    });
  }
});
