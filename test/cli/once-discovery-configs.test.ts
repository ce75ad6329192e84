/**
 * `once` on `storage: kubernetes` is one cycle of `start`, DiscoveryConfig matchers included: it
 * must not deregister the clusters only a DiscoveryConfig finds (it used to run the config file's
 * matchers alone). When it cannot list DiscoveryConfigs, it deletes nothing and says so.
 */
import {writeFile} from 'node:fs/promises';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {createDiscoveryConfig, DISCOVERY_CONFIGS_PATH} from '../kubernetes/discovery-configs.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAONCEDCONFIG00001', secretAccessKey: 'once-dc-secret'};
const DC_PATH = DISCOVERY_CONFIGS_PATH;

let kube: KubeEnv;
let fake: FakeAws;
let restoreEnv: () => void;
let denyList = false;

beforeAll(async () => {
  kube = await startKubeEnv();
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  world.addCluster(ACCOUNT, 'us-east-1', {name: 'base-1'});
  world.addCluster(ACCOUNT, 'eu-west-1', {name: 'eu-1'});
  fake = await startFakeAws({world});
  restoreEnv = setEnv({...fake.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1', AWS_EC2_METADATA_DISABLED: 'true'});
  const client = await kube.client();
  await createDiscoveryConfig(client, 'eu', 'dyn', ['eu-west-1']);
  kube.server.setFault((call) =>
    denyList && call.method === 'GET' && !call.watch && call.path === DC_PATH ? {status: 403, body: '{"kind":"Status","status":"Failure","reason":"Forbidden","code":403}'} : undefined,
  );
});

afterAll(async () => {
  kube.server.setFault(undefined);
  restoreEnv();
  await fake.close();
  await kube.close();
});

describe('once with DiscoveryConfigs', () => {
  it('keeps the clusters DiscoveryConfigs find, and deletes nothing while it cannot list them', async () => {
    const file = path.join(kube.dir, 'once.yaml');
    await writeFile(
      file,
      `version: v1
discovery_service:
  discovery_group: dyn
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: kubernetes, namespace: kd, kubeconfig: "${kube.kubeconfigPath}", session_ttl: 3s}
`,
    );
    const run = async (): Promise<{code: number; report: {result: string; clusters: {name: string; action: string}[]}}> => {
      const io = captureIo({...process.env, KUBE_DISCOVERY_REPLICA: 'once-test'});
      const code = await main(['once', '-c', file, '--output', 'json'], io.io);
      return {code, report: JSON.parse(io.stdout()) as {result: string; clusters: {name: string; action: string}[]}};
    };
    const actions = (report: {clusters: {name: string; action: string}[]}) => Object.fromEntries(report.clusters.map((c) => [c.name.split('-eks-')[0], c.action]));

    const first = await run();
    expect(first.code).toBe(0);
    expect(actions(first.report)).toEqual({'base-1': 'create', 'eu-1': 'create'});

    const second = await run();
    expect(actions(second.report)).toEqual({'base-1': 'unchanged', 'eu-1': 'unchanged'});

    denyList = true;
    const denied = await run();
    expect(denied.code).toBe(1);
    expect(denied.report.result).toBe('partial');
    expect(actions(denied.report)).toEqual({'base-1': 'unchanged', 'eu-1': 'stale'});
    denyList = false;
  }, 60_000);
});
