/**
 * One AWS and one Azure matcher → `once` (a real process) → both clouds' clusters registered;
 * one subscription failing → its clusters kept and marked stale. Azure credentials come from
 * the Azure CLI credential (a stub `az` on PATH prints a token), ARM is reached through
 * `resource_manager_endpoint`, its CA trusted through NODE_EXTRA_CA_CERTS.
 */
import {chmod, mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {ArmWorld} from '../fakes/arm-world.ts';
import {FAKE_ARM_TOKEN, startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {spawnCli} from '../helpers/process.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAMULTICLOUD000001', secretAccessKey: 'multicloud-secret'};
const SUB_OK = '00000000-0000-0000-0000-00000000000a';
const SUB_BAD = '00000000-0000-0000-0000-00000000000b';
let aws: FakeAws;
let arm: FakeArm;
let dir: string;
let env: Record<string, string | undefined>;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'eks1', tags: {env: 'prod'}});
  aws = await startFakeAws({world});

  const azure = new ArmWorld();
  azure.addSubscription({subscriptionId: SUB_OK});
  azure.addSubscription({subscriptionId: SUB_BAD});
  azure.addCluster({subscriptionId: SUB_OK, resourceGroup: 'rg-a', name: 'aks1', location: 'eastus', tags: {env: 'prod'}});
  azure.addCluster({subscriptionId: SUB_OK, resourceGroup: 'rg-b', name: 'aks2', location: 'westeurope', tags: {env: 'prod'}});
  azure.addCluster({subscriptionId: SUB_OK, resourceGroup: 'rg-a', name: 'stopped', location: 'eastus', tags: {env: 'prod'}, powerState: 'Stopped'});
  azure.addCluster({subscriptionId: SUB_BAD, resourceGroup: 'rg-c', name: 'aks3', location: 'eastus', tags: {env: 'prod'}});
  arm = await startFakeArm({world: azure});

  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-multi-'));
  const bin = path.join(dir, 'bin');
  await import('node:fs/promises').then((fs) => fs.mkdir(bin));
  // A stand-in for the Azure CLI: what `az account get-access-token --output json` prints.
  await writeFile(path.join(bin, 'az'), `#!/bin/sh\necho '{"accessToken":"${FAKE_ARM_TOKEN}","expires_on":${Math.floor(Date.now() / 1000) + 3600},"tokenType":"Bearer"}'\n`);
  await chmod(path.join(bin, 'az'), 0o755);
  await writeFile(path.join(dir, 'arm-ca.pem'), arm.caPem);
  await writeFile(
    path.join(dir, 'cfg.yaml'),
    `version: v1
discovery_service:
  discovery_group: multi
  aws:
    - types: [eks]
      regions: [us-east-1]
  azure:
    - types: [aks]
      subscriptions: ["*"]
      resource_manager_endpoint: ${arm.url}
storage: {type: sqlite, path: ${path.join(dir, 'r.db')}}
probe: {enabled: false}
`,
  );
  env = {
    PATH: `${bin}:${process.env['PATH']}`,
    ...aws.env,
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_MAX_ATTEMPTS: '1',
    AZURE_TOKEN_CREDENTIALS: 'AzureCliCredential',
    NODE_EXTRA_CA_CERTS: path.join(dir, 'arm-ca.pem'),
  };
});

afterAll(async () => {
  await aws.close();
  await arm.close();
  await rm(dir, {recursive: true, force: true});
});

async function once(): Promise<{code: number | string; json: {result: string; clusters: {name: string; action: string}[]; sources: {id: string; ok: boolean}[]}}> {
  const proc = spawnCli(['once', '-c', path.join(dir, 'cfg.yaml'), '--output', 'json'], env);
  const code = await proc.exited;
  try {
    return {code, json: JSON.parse(proc.stdout())};
  } catch {
    throw new Error(`once printed no JSON (exit ${code}):\n${proc.stdout()}\n${proc.stderr()}`);
  }
}

describe('once with AWS and Azure', () => {
  it('registers both clouds, then keeps a failing subscription’s clusters stale', async () => {
    const first = await once();
    expect(first.code).toBe(0);
    const created = first.json.clusters.filter((c) => c.action === 'create').map((c) => c.name).sort();
    // Teleport's names: "aks1" already says "aks", "eks1" already says "eks".
    expect(created).toEqual([
      `aks1-eastus-rg-a-${SUB_OK}`,
      `aks2-westeurope-rg-b-${SUB_OK}`,
      `aks3-eastus-rg-c-${SUB_BAD}`,
      'eks1-us-east-1-111111111111',
    ]);
    expect(first.json.clusters.find((c) => c.name.startsWith('stopped'))?.action).toBe('skip');

    arm.setFault((ctx) => (ctx.subscription === SUB_BAD && ctx.operation !== 'subscriptions.list' ? {status: 403, code: 'AuthorizationFailed'} : undefined));
    arm.world.removeCluster({subscriptionId: SUB_OK, resourceGroup: 'rg-b', name: 'aks2'});
    const second = await once();
    expect(second.code).toBe(1);
    const actions = Object.fromEntries(second.json.clusters.map((c) => [c.name, c.action]));
    expect(actions[`aks3-eastus-rg-c-${SUB_BAD}`]).toBe('stale');
    expect(actions[`aks2-westeurope-rg-b-${SUB_OK}`]).toBe('delete');
    expect(actions[`aks1-eastus-rg-a-${SUB_OK}`]).toBe('unchanged');
    expect(second.json.sources.find((s) => s.id === `aks:${SUB_BAD}`)).toMatchObject({ok: false});
  });
});
