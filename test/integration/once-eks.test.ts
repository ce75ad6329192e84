/**
 * `kube-discovery once` end to end: the real @aws-sdk/client-eks reaches the wire-level EKS
 * fake through AWS_ENDPOINT_URL_EKS, exactly as a user points it at a test endpoint.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {failRegion, FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {captureIo, setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAONCETEST00000001', secretAccessKey: 'once-secret-key'};

let fake: FakeAws;
let dir: string;
let restoreEnv: () => void;

function config(storage: string): string {
  return `version: v1
discovery_service:
  discovery_group: it-once
  aws:
    - types: [eks]
      regions: [us-east-1, us-west-2, eu-west-1]
      tags: {env: [prod, staging]}
storage: ${storage}
`;
}

async function once(file: string, ...flags: string[]) {
  const cap = captureIo();
  const code = await main(['once', '-c', file, '--output', 'json', ...flags], cap.io);
  return {code, json: cap.stdout() ? (JSON.parse(cap.stdout()) as OnceJson) : undefined, stderr: cap.stderr()};
}

interface OnceJson {
  result: string;
  sources: {id: string; ok: boolean; error?: {reason: string; code: string}}[];
  clusters: {name: string; action: string; reason: string; source: string; labels: Record<string, string>; match?: string}[];
}

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  for (const name of ['a', 'b', 'c']) world.addCluster(ACCOUNT, 'us-east-1', {name, tags: {env: 'prod'}});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'dev1', tags: {env: 'dev'}});
  world.addCluster(ACCOUNT, 'us-west-2', {name: 'w1', tags: {env: 'staging'}});
  world.addCluster(ACCOUNT, 'us-west-2', {name: 'w2', tags: {env: 'prod'}});
  world.addCluster(ACCOUNT, 'us-west-2', {name: 'creating', tags: {env: 'prod'}, status: 'CREATING'});
  world.addCluster(ACCOUNT, 'eu-west-1', {name: 'e1', tags: {env: 'prod'}});
  fake = await startFakeAws({world, latencyMs: 5});
  restoreEnv = setEnv({
    ...fake.env,
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
    AWS_REGION: 'us-east-1',
    AWS_MAX_ATTEMPTS: '2',
  });
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-once-'));
});

afterAll(async () => {
  restoreEnv();
  await fake.close();
  await rm(dir, {recursive: true, force: true});
});

describe('once against the EKS fake', () => {
  it('registers every matching cluster from every page of every region, and says why others are skipped', async () => {
    const file = path.join(dir, 'memory.yaml');
    await writeFile(file, config('{type: memory}'));
    const {code, json} = await once(file, '--explain');
    expect(code).toBe(0);
    const byName = Object.fromEntries(json!.clusters.map((c) => [c.name, c]));
    expect(Object.keys(byName).sort()).toEqual([
      'a-eks-us-east-1-111111111111',
      'b-eks-us-east-1-111111111111',
      'c-eks-us-east-1-111111111111',
      'creating-eks-us-west-2-111111111111',
      'dev1-eks-us-east-1-111111111111',
      'e1-eks-eu-west-1-111111111111',
      'w1-eks-us-west-2-111111111111',
      'w2-eks-us-west-2-111111111111',
    ]);
    expect(byName['a-eks-us-east-1-111111111111']).toMatchObject({action: 'create', source: 'eks:us-east-1:111111111111', labels: {'account-id': ACCOUNT, region: 'us-east-1', 'teleport.dev/cloud': 'AWS'}});
    expect(byName['a-eks-us-east-1-111111111111']?.match).toContain('env');
    expect(byName['dev1-eks-us-east-1-111111111111']).toMatchObject({action: 'skip', reason: expect.stringContaining('filtered')});
    expect(byName['creating-eks-us-west-2-111111111111']).toMatchObject({action: 'skip', reason: expect.stringContaining('CREATING')});
    // Two pages per region at least: the fake serves two names per page.
    expect(fake.stats.count({operation: 'ListClusters', region: 'us-east-1'})).toBeGreaterThanOrEqual(2);
    // Regions were listed concurrently, not one after another.
    expect(fake.stats.overlapped({operation: 'ListClusters', region: 'us-east-1'}, {operation: 'ListClusters', region: 'us-west-2'})).toBe(true);
  });

  it('keeps a failing region registered and stale while other regions reconcile; exit 1', async () => {
    const file = path.join(dir, 'sqlite.yaml');
    await writeFile(file, config(`{type: sqlite, path: ${path.join(dir, 'registry.db')}}`));
    const first = await once(file);
    expect(first.code).toBe(0);
    expect(first.json!.clusters.filter((c) => c.action === 'create')).toHaveLength(6);

    fake.world.removeCluster(ACCOUNT, 'us-west-2', 'w2');
    fake.world.removeCluster(ACCOUNT, 'eu-west-1', 'e1');
    fake.fault = failRegion('eu-west-1', 'AccessDeniedException');
    try {
      const second = await once(file);
      expect(second.code).toBe(1);
      expect(second.json!.result).toBe('partial');
      const actions = Object.fromEntries(second.json!.clusters.map((c) => [c.name, c.action]));
      expect(actions['w2-eks-us-west-2-111111111111']).toBe('delete');
      expect(actions['e1-eks-eu-west-1-111111111111']).toBe('stale');
      expect(actions['a-eks-us-east-1-111111111111']).toBe('unchanged');
      expect(second.json!.sources.find((s) => s.id === 'eks:eu-west-1:111111111111')).toMatchObject({ok: false, error: {reason: 'access_denied', code: 'AccessDeniedException'}});
    } finally {
      fake.fault = undefined;
    }
  });

  it('exits 2 with the key path and line for a bad config', async () => {
    const file = path.join(dir, 'bad.yaml');
    await writeFile(file, 'version: v1\ndiscovery_service:\n  discovery_group: g\n  aws:\n    - types: [eks]\n      regions: us-east-1\n');
    const {code, stderr} = await once(file);
    expect(code).toBe(2);
    expect(stderr).toContain(`${file}:6:`);
    expect(stderr).toContain('discovery_service.aws[0].regions');
  });
});
