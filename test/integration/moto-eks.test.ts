/**
 * The EKS path against an AWS emulator we did not write: moto (`moto_server`). Clusters are
 * created with the real @aws-sdk/client-eks CreateCluster; `once` and `start` (in-process)
 * must register every matching cluster. moto's `certificateAuthority.data` is random text,
 * not base64 PEM, so every entry is registered unhealthy with reason `invalid_ca`.
 */
import {CreateClusterCommand, DeleteClusterCommand, DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {main} from '../../src/cli/main.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {describeWithMoto, startMoto, type Moto} from '../helpers/moto.ts';

const MOTO_ACCOUNT = '123456789012';
let moto: Moto;
let dir: string;
let restoreEnv: () => void;

function eks(region: string): EKSClient {
  return new EKSClient({region, endpoint: moto.endpoint, credentials: {accessKeyId: moto.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: moto.env['AWS_SECRET_ACCESS_KEY'] ?? ''}});
}

async function createCluster(region: string, name: string, tags: Record<string, string>): Promise<void> {
  await eks(region).send(
    new CreateClusterCommand({
      name,
      roleArn: `arn:aws:iam::${MOTO_ACCOUNT}:role/eks-cluster`,
      resourcesVpcConfig: {subnetIds: ['subnet-0a1b2c3d', 'subnet-0e4f5a6b']},
      tags,
    }),
  );
}

const name = (cluster: string, region: string): string => `${cluster}-eks-${region}-${MOTO_ACCOUNT}`;

describeWithMoto('EKS discovery against moto', () => {
  beforeAll(async () => {
    moto = await startMoto();
    restoreEnv = setEnv({...moto.env, AWS_MAX_ATTEMPTS: '2'});
    await createCluster('us-east-1', 'prod-1', {env: 'prod'});
    await createCluster('us-east-1', 'prod-2', {env: 'prod', team: 'payments'});
    await createCluster('us-east-1', 'dev-1', {env: 'dev'});
    await createCluster('eu-west-1', 'prod-eu', {env: 'prod'});
    dir = await mkdtemp(path.join(os.tmpdir(), 'kd-moto-'));
    await writeFile(
      path.join(dir, 'moto.yaml'),
      `version: v1
discovery_service:
  discovery_group: moto
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [us-east-1, eu-west-1]
      tags: {env: prod}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
http: {listen_addr: "127.0.0.1:0"}
`,
    );
  }, 60_000);

  afterAll(async () => {
    restoreEnv();
    await moto.stop();
    await rm(dir, {recursive: true, force: true});
  });

  it('once registers every matching cluster of every region, unhealthy because moto\'s CA is not a certificate', async () => {
    const cap = captureIo();
    const code = await main(['once', '-c', path.join(dir, 'moto.yaml'), '--output', 'json'], cap.io);
    const json = JSON.parse(cap.stdout()) as {result: string; sources: {id: string; ok: boolean}[]; clusters: {name: string; action: string; reason: string}[]};
    expect(code, cap.stderr()).toBe(0);
    expect(json.result).toBe('success');
    expect(json.sources.map((s) => [s.id, s.ok])).toEqual([[`eks:eu-west-1:${MOTO_ACCOUNT}`, true], [`eks:us-east-1:${MOTO_ACCOUNT}`, true]]);
    const actions = Object.fromEntries(json.clusters.map((c) => [c.name, c.action]));
    expect(actions).toEqual({
      [name('dev-1', 'us-east-1')]: 'skip',
      [name('prod-1', 'us-east-1')]: 'create',
      [name('prod-2', 'us-east-1')]: 'create',
      [name('prod-eu', 'eu-west-1')]: 'create',
    });
  });

  it('start serves them with the reason, follows a deletion and a creation, and never probes what it cannot reach', async () => {
    const file = path.join(dir, 'moto.yaml');
    const svc = await startService({config: parseConfig(await readFile(file, 'utf8'), file), io: captureIo().io, clock: systemClock, logger: silentLogger});
    const servers = async (): Promise<KubeServer[]> => ((await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: KubeServer[]}).items;
    const cycle = async (): Promise<void> => {
      const done = svc.nextCycle();
      svc.trigger();
      await done;
    };
    try {
      await cycle();
      const first = await servers();
      expect(first.map((s) => s.metadata.name).sort()).toEqual([name('prod-1', 'us-east-1'), name('prod-2', 'us-east-1'), name('prod-eu', 'eu-west-1')].sort());
      for (const server of first) {
        expect(server.status?.target_health).toMatchObject({status: 'unhealthy', reason: 'invalid_ca', message: expect.stringContaining('certificateAuthority.data')});
        expect(server.status?.endpoint).toMatch(/^https:\/\/.*\.eks\.amazonaws\.com\/$/);
        expect(server.spec.cluster.metadata.labels).toMatchObject({env: 'prod', 'account-id': MOTO_ACCOUNT});
      }
      expect(first.find((s) => s.metadata.name === name('prod-2', 'us-east-1'))?.spec.cluster.metadata.labels['team']).toBe('payments');
      // Each entry records the issuer of its cluster's service-account tokens as moto's DescribeCluster
      // gives it: a workload's token is then reviewed only by the cluster that issued it.
      for (const [cluster, region] of [['prod-1', 'us-east-1'], ['prod-2', 'us-east-1'], ['prod-eu', 'eu-west-1']] as const) {
        const issuer = (await eks(region).send(new DescribeClusterCommand({name: cluster}))).cluster?.identity?.oidc?.issuer;
        expect(issuer).toMatch(/^https:\/\/oidc\.eks\./);
        expect(first.find((s) => s.metadata.name === name(cluster, region))?.status?.oidc_issuer).toBe(issuer);
      }

      await eks('us-east-1').send(new DeleteClusterCommand({name: 'prod-2'}));
      await createCluster('eu-west-1', 'prod-eu-2', {env: 'prod'});
      await cycle();
      expect((await servers()).map((s) => s.metadata.name).sort()).toEqual([name('prod-1', 'us-east-1'), name('prod-eu', 'eu-west-1'), name('prod-eu-2', 'eu-west-1')].sort());
    } finally {
      await svc.stop({deregister: false});
    }
  });
});
