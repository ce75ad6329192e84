/**
 * DiscoveryConfig resources driving a running `kube-discovery start` on `storage: kubernetes`,
 * with the real kubectl: a valid one adds its clusters without a restart and reports Ready; an
 * invalid one reports the config parser's message by key path and changes nothing; deleting the
 * valid one deregisters only the clusters it alone discovered, then the finalizer lets it go.
 */
import {execFile} from 'node:child_process';
import {existsSync} from 'node:fs';
import {writeFile} from 'node:fs/promises';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {validateDiscoveryConfig} from '../../src/service/discovery-configs.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {servingPort, spawnCli, type CliProcess} from '../helpers/process.ts';
import {until} from '../helpers/replica.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {startKubeEnv} from '../kubernetes/kube-env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIADISCOVERYCONFIG1', secretAccessKey: 'discovery-config-secret'};
const KUBECTL = existsSync('/usr/bin/kubectl') ? '/usr/bin/kubectl' : 'kubectl';
const run = promisify(execFile);
const kubectlFound = await run(KUBECTL, ['version', '--client']).then(() => true, () => false);

describe('validateDiscoveryConfig', () => {
  it('accepts the config file syntax and names problems by their path under spec', () => {
    expect(validateDiscoveryConfig('dc', {discovery_group: 'g', aws: [{types: ['eks'], regions: ['eu-west-1']}]})).toMatchObject({valid: true, discovery: {discovery_group: 'g', aws: [{regions: ['eu-west-1'], tags: {'*': '*'}}]}});
    const bad = validateDiscoveryConfig('dc', {discovery_group: 'g', aws: [{types: ['eks'], regions: 5}]});
    expect(bad).toMatchObject({valid: false, message: expect.stringMatching(/^spec\.aws\[0\]\.regions: expected .*found/)});
    expect(validateDiscoveryConfig('dc', {discovery_group: 'g', poll_interval: '1m'})).toMatchObject({valid: false, message: expect.stringContaining('spec.poll_interval')});
  });
});

describe.skipIf(!kubectlFound)('DiscoveryConfig resources on a running service', () => {
  let kube: KubeEnv;
  let fake: FakeAws;
  let proc: CliProcess;
  let port: number;

  const names = async (): Promise<string[] | undefined> => {
    try {
      const body = (await (await fetch(`http://127.0.0.1:${port}/v1/kube_servers?limit=1000`)).json()) as {items: {metadata: {name: string}}[]};
      return body.items.map((s) => s.metadata.name).sort();
    } catch {
      return undefined;
    }
  };
  const kubectl = async (...args: string[]) => (await run(KUBECTL, ['--kubeconfig', kube.kubeconfigPath, '-n', 'kd', ...args])).stdout;
  const apply = async (file: string, body: string) => {
    await writeFile(path.join(kube.dir, file), body);
    return kubectl('apply', '-f', path.join(kube.dir, file));
  };

  beforeAll(async () => {
    kube = await startKubeEnv();
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
    world.addCluster(ACCOUNT, 'us-east-1', {name: 'base-1'});
    world.addCluster(ACCOUNT, 'eu-west-1', {name: 'eu-1'});
    world.addCluster(ACCOUNT, 'eu-west-1', {name: 'eu-2'});
    fake = await startFakeAws({world});
    await writeFile(path.join(kube.dir, 'svc.yaml'), `version: v1
discovery_service:
  discovery_group: dyn
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: kubernetes, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", session_ttl: 3s}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`);
    proc = spawnCli(['start', '-c', path.join(kube.dir, 'svc.yaml')], {
      PATH: process.env['PATH'],
      ...fake.env,
      AWS_ACCESS_KEY_ID: KEY.accessKeyId,
      AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: '/nonexistent',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
      KUBE_DISCOVERY_REPLICA: 'pod-1',
    });
    // Port 0: the process says where it serves, so no other process can take its port first.
    port = await servingPort(proc);
  });

  afterAll(async () => {
    proc?.child.kill('SIGKILL');
    await proc?.exited;
    await fake.close();
    await kube.close();
  });

  it('applies, reports and releases DiscoveryConfigs without a restart', async () => {
    const base = await until('the base cluster is registered', async () => ((await names())?.length === 1 ? names() : false));
    expect(base?.[0]).toMatch(/^base-1/);

    expect(await apply('eu.yaml', [
      'apiVersion: kube-discovery.io/v1', 'kind: DiscoveryConfig', 'metadata: {name: eu}',
      'spec:', '  discovery_group: dyn', '  aws:', '    - types: [eks]', '      regions: [eu-west-1]', '',
    ].join('\n'))).toMatch(/discoveryconfig.kube-discovery.io\/eu created/);
    await until('the eu clusters are registered', async () => (await names())?.length === 3);
    await until('eu reports Ready', async () => (await kubectl('get', 'dc', 'eu', '-o', 'jsonpath={.status.conditions[0].status}')) === 'True');
    expect(await kubectl('get', 'dc', 'eu', '-o', 'jsonpath={.metadata.finalizers}')).toContain('kube-discovery.io/deregister');

    await apply('bad.yaml', [
      'apiVersion: kube-discovery.io/v1', 'kind: DiscoveryConfig', 'metadata: {name: bad}',
      'spec:', '  discovery_group: dyn', '  aws:', '    - types: [eks]', '      regions: 5', '',
    ].join('\n'));
    const message = await until('bad reports its problem', async () => {
      const m = await kubectl('get', 'dc', 'bad', '-o', 'jsonpath={.status.conditions[0].message}');
      return m === '' ? false : m;
    });
    expect(message).toMatch(/^spec\.aws\[0\]\.regions: expected /);
    expect(await kubectl('get', 'dc', 'bad', '-o', 'jsonpath={.status.conditions[0].status}')).toBe('False');
    expect((await names())?.length).toBe(3);

    await kubectl('delete', 'dc', 'eu', '--wait=false');
    await until('eu is released after its clusters were deregistered', async () => {
      const {stdout} = await run(KUBECTL, ['--kubeconfig', kube.kubeconfigPath, '-n', 'kd', 'get', 'dc', '-o', 'name']);
      return !stdout.includes('discoveryconfig.kube-discovery.io/eu');
    });
    const after = await names();
    expect(after).toHaveLength(1);
    expect(after?.[0]).toMatch(/^base-1/);
  }, 120_000);
});
