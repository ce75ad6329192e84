/**
 * The Teleport drop-in against moto, an AWS emulator we did not write: clusters created with the
 * real EKS CreateCluster, then `once` with the pasted teleport.yaml of Teleport's EKS guide
 * registers them under Teleport's names.
 *
 * moto answers DescribeCluster with a random string as the cluster CA: the clusters are still
 * registered, unhealthy with reason `invalid_ca`, under Teleport's names.
 */
import {CreateClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {describeWithMoto, startMoto, type Moto} from '../helpers/moto.ts';

/** moto's default account. */
const ACCOUNT = '123456789012';

describeWithMoto("once with Teleport's EKS guide config, against moto", () => {
  let moto: Moto;
  let dir: string;
  let restoreEnv: () => void;

  beforeAll(async () => {
    moto = await startMoto();
    dir = await mkdtemp(path.join(os.tmpdir(), 'kd-teleport-moto-'));
    const create = async (region: string, name: string, tags: Record<string, string>): Promise<void> => {
      const eks = new EKSClient({region, endpoint: moto.endpoint, credentials: {accessKeyId: moto.env['AWS_ACCESS_KEY_ID'] ?? '', secretAccessKey: moto.env['AWS_SECRET_ACCESS_KEY'] ?? ''}});
      await eks.send(
        new CreateClusterCommand({name, roleArn: `arn:aws:iam::${ACCOUNT}:role/eks`, resourcesVpcConfig: {subnetIds: ['subnet-1']}, tags}),
      );
      eks.destroy();
    };
    await create('us-west-2', 'myeks', {env: 'prod'});
    await create('us-west-2', 'prod-us-west-2', {env: 'prod'});
    await create('us-east-1', 'payments', {env: 'prod', 'teleport.dev/kubernetes-name': 'pay'});
    await create('eu-west-1', 'dev1', {env: 'dev'});
    restoreEnv = setEnv({...moto.env, AWS_MAX_ATTEMPTS: '2'});
  }, 60_000);

  afterAll(async () => {
    restoreEnv();
    await moto.stop();
    await rm(dir, {recursive: true, force: true});
  });

  it("registers moto's matching clusters under Teleport's names", async () => {
    const guide = await readFile(new URL('../config/teleport/eks-teleport.yaml', import.meta.url), 'utf8');
    const file = path.join(dir, 'teleport.yaml');
    await writeFile(file, `${guide}storage: {type: memory}\nprobe: {enabled: false}\n`);
    const cap = captureIo();
    const code = await main(['once', '-c', file, '--output', 'json'], cap.io);
    expect(code, cap.stderr()).toBe(0);
    const json = JSON.parse(cap.stdout()) as {clusters: {name: string; action: string; reason: string; labels: Record<string, string>}[]};
    const created = json.clusters.filter((c) => c.action === 'create');
    expect(created.map((c) => c.name).sort()).toEqual([`myeks-us-west-2-${ACCOUNT}`, 'pay', `prod-us-west-2-eks-${ACCOUNT}`]);
    expect(created.find((c) => c.name === `myeks-us-west-2-${ACCOUNT}`)?.labels).toMatchObject({
      'teleport.dev/cloud': 'AWS',
      'account-id': ACCOUNT,
      region: 'us-west-2',
      'teleport.internal/discovered-name': 'myeks',
    });
    expect(json.clusters.find((c) => c.name === `dev1-eks-eu-west-1-${ACCOUNT}`)).toMatchObject({action: 'skip', reason: expect.stringContaining('filtered')});
  }, 60_000);
});
