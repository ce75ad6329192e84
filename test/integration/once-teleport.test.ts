/**
 * A Teleport user pastes the teleport.yaml of Teleport's EKS / AKS guides (plus where the
 * registry lives) and runs `once`: the matching clusters are registered under the names and
 * labels Teleport gives its kube_clusters. The real SDK clients reach the wire-level fakes.
 */
import {chmod, mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {spawnCli} from '../helpers/process.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIATELEPORTDROPIN01', secretAccessKey: 'teleport-drop-in-secret'};
const SUB = '00000000-0000-0000-0000-0000000000c1';
const fixture = (name: string): Promise<string> => readFile(new URL(`../config/teleport/${name}`, import.meta.url), 'utf8');

interface OnceJson {
  result: string;
  clusters: {name: string; action: string; reason: string; labels: Record<string, string>}[];
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-teleport-once-'));
});
afterAll(async () => {
  await rm(dir, {recursive: true, force: true});
});

describe("once with Teleport's EKS guide config, against the EKS fake", () => {
  let fake: FakeAws;
  let restoreEnv: () => void;

  beforeAll(async () => {
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
    world.addCluster(ACCOUNT, 'us-west-2', {name: 'myeks', tags: {env: 'prod'}});
    world.addCluster(ACCOUNT, 'us-west-2', {name: 'prod-us-west-2', tags: {env: 'prod'}});
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'payments', tags: {env: 'prod', 'teleport.dev/kubernetes-name': 'pay'}});
    world.addCluster(ACCOUNT, 'eu-west-1', {name: 'dev1', tags: {env: 'dev'}});
    fake = await startFakeAws({world});
    restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_REGION: 'us-east-1', AWS_MAX_ATTEMPTS: '1'});
  });
  afterAll(async () => {
    restoreEnv();
    await fake.close();
  });

  it("registers the matching clusters under Teleport's names and labels", async () => {
    const file = path.join(dir, 'eks.yaml');
    await writeFile(file, `${await fixture('eks-teleport.yaml')}storage: {type: memory}\nprobe: {enabled: false}\n`);
    const cap = captureIo();
    const code = await main(['once', '-c', file, '--output', 'json'], cap.io);
    expect(code, cap.stderr()).toBe(0);
    const json = JSON.parse(cap.stdout()) as OnceJson;
    const created = Object.fromEntries(json.clusters.filter((c) => c.action === 'create').map((c) => [c.name, c.labels]));
    expect(Object.keys(created).sort()).toEqual(['myeks-us-west-2-111111111111', 'pay', 'prod-us-west-2-eks-111111111111']);
    expect(created['myeks-us-west-2-111111111111']).toEqual({
      env: 'prod',
      'teleport.dev/cloud': 'AWS',
      region: 'us-west-2',
      'account-id': ACCOUNT,
      'teleport.dev/origin': 'cloud',
      'teleport.dev/discovery-type': 'eks',
      'teleport.internal/discovery-group-name': 'aws-prod',
      'teleport.internal/discovered-name': 'myeks',
    });
    // An override names the cluster whole, and Teleport records no discovered-name then.
    expect(created['pay']?.['teleport.internal/discovered-name']).toBeUndefined();
    expect(json.clusters.find((c) => c.name === 'dev1-eks-eu-west-1-111111111111')).toMatchObject({action: 'skip', reason: expect.stringContaining('filtered')});
    expect(cap.stderr()).toContain(`${file}: warning: Teleport settings this service does not use are ignored: teleport (the Teleport agent's own settings`);
  });
});

describe("once with Teleport's AKS guide config, against the ARM fake", () => {
  let arm: FakeArm;
  let env: Record<string, string | undefined>;

  beforeAll(async () => {
    const world = new ArmWorld();
    world.addSubscription({subscriptionId: SUB});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'Prod-RG', name: 'aks-eastus', location: 'eastus', tags: {env: 'prod'}});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'Prod-RG', name: 'web', location: 'westeurope', tags: {env: 'prod'}});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'Prod-RG', name: 'renamed', location: 'westeurope', tags: {env: 'prod', TeleportKubernetesName: 'billing'}});
    world.addCluster({subscriptionId: SUB, resourceGroup: 'dev', name: 'sandbox', location: 'eastus', tags: {env: 'dev'}});
    arm = await startFakeArm({world});
    const bin = path.join(dir, 'bin');
    await mkdir(bin, {recursive: true});
    // A stand-in for the Azure CLI: what `az account get-access-token --output json` prints.
    await writeFile(path.join(bin, 'az'), `#!/bin/sh\necho '{"accessToken":"${FAKE_ARM_TOKEN}","expires_on":${Math.floor(Date.now() / 1000) + 3600},"tokenType":"Bearer"}'\n`);
    await chmod(path.join(bin, 'az'), 0o755);
    await writeFile(path.join(dir, 'arm-ca.pem'), arm.caPem);
    env = {PATH: `${bin}:${process.env['PATH']}`, AZURE_TOKEN_CREDENTIALS: 'AzureCliCredential', NODE_EXTRA_CA_CERTS: path.join(dir, 'arm-ca.pem'), AWS_EC2_METADATA_DISABLED: 'true'};
  });
  afterAll(async () => {
    await arm.close();
  });

  it("registers the matching clusters under Teleport's names, keeping the resource group's case", async () => {
    const pasted = (await fixture('aks-teleport.yaml')).replace('      "env": "prod"\nkubernetes_service:', `      "env": "prod"\n    resource_manager_endpoint: ${arm.url}\nkubernetes_service:`);
    expect(pasted).toContain('resource_manager_endpoint');
    const file = path.join(dir, 'aks.yaml');
    await writeFile(file, `${pasted}storage: {type: sqlite, path: ${path.join(dir, 'aks.db')}}\nprobe: {enabled: false}\n`);
    const proc = spawnCli(['once', '-c', file, '--output', 'json'], env);
    const code = await proc.exited;
    expect(code, proc.stderr()).toBe(0);
    const json = JSON.parse(proc.stdout()) as OnceJson;
    const created = Object.fromEntries(json.clusters.filter((c) => c.action === 'create').map((c) => [c.name, c.labels]));
    expect(Object.keys(created).sort()).toEqual([`aks-eastus-Prod-RG-${SUB}`, 'billing', `web-aks-westeurope-Prod-RG-${SUB}`]);
    expect(created[`web-aks-westeurope-Prod-RG-${SUB}`]).toMatchObject({
      'teleport.dev/cloud': 'Azure',
      region: 'westeurope',
      'resource-group': 'Prod-RG',
      'subscription-id': SUB,
      'teleport.dev/origin': 'cloud',
      'teleport.dev/discovery-type': 'aks',
      'teleport.internal/discovery-group-name': 'aks-prod',
      'teleport.internal/discovered-name': 'web',
    });
  });
});
