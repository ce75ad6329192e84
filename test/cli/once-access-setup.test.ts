/**
 * `once` is one cycle of `start`, access set-up included: with `setup_access_for_arn` it gives the
 * principal its access entry and the discovery RBAC on a cluster it registers, says so in its
 * output, and deletes the entry it created when a later `once` deregisters the cluster.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {MANAGED_GROUP_KEY} from '../../src/access/setup-step.ts';
import {main} from '../../src/cli/main.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {KubeRbacStore, startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {rbacAuthorizer} from '../fakes/kube-rbac-authorizer.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {base64, eksAuthenticator} from '../probe/eks-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIAONCESETUP0000001', secretAccessKey: 'once-setup-secret', arn: USER_ARN};

let world: FakeAwsWorld;
let aws: FakeAws;
let kube: FakeKubeApi;
let rbac: KubeRbacStore;
let dir: string;
let restoreEnv: () => void;

beforeAll(async () => {
  world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  aws = await startFakeAws({world});
  rbac = new KubeRbacStore();
  const authn = eksAuthenticator({world, clusters: [{account: ACCOUNT, region: REGION, name: 'fresh'}], stsUrl: aws.url});
  kube = await startFakeKubeApi({authenticate: authn.authenticate, rbac, authorize: rbacAuthorizer(rbac)});
  world.addCluster(ACCOUNT, REGION, {name: 'fresh', endpoint: kube.url, caData: base64(kube.caPem), authenticationMode: 'API_AND_CONFIG_MAP', tags: {env: 'prod'}});
  restoreEnv = setEnv({...aws.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1', AWS_EC2_METADATA_DISABLED: 'true'});
  dir = await mkdtemp(path.join(os.tmpdir(), 'kd-once-setup-'));
});

afterAll(async () => {
  restoreEnv();
  await kube.close();
  await aws.close();
  await rm(dir, {recursive: true, force: true});
});

describe('once with setup_access_for_arn', () => {
  it('sets up access like a cycle of start, reports it, and cleans up after a deregistration', async () => {
    const file = path.join(dir, 'once.yaml');
    await writeFile(
      file,
      `version: v1
discovery_service:
  discovery_group: once-setup
  aws:
    - types: [eks]
      regions: [${REGION}]
      tags: {env: prod}
      setup_access_for_arn: ${USER_ARN}
probe: {timeout: 5s}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
`,
    );
    const first = captureIo();
    expect(await main(['once', '-c', file, '--output', 'json'], first.io)).toBe(0);
    const report = JSON.parse(first.stdout()) as {clusters: {name: string; action: string}[]; access_setup?: Record<string, number>};
    expect(report.clusters.map((c) => [c.name, c.action])).toEqual([['fresh-eks-us-east-1-111111111111', 'create']]);
    expect(report.access_setup).toEqual({configured: 1});
    const entry = world.cluster(ACCOUNT, REGION, 'fresh')?.accessEntries.get(USER_ARN);
    expect(entry?.kubernetesGroups).toEqual(['kube-discovery']);
    expect(entry?.tags[MANAGED_GROUP_KEY]).toBe('once-setup');
    expect(rbac.get('clusterrolebindings', 'kube-discovery')).toBeDefined();
    // The temporary cluster-admin association is taken back before `once` exits.
    expect([...(entry?.accessPolicies.keys() ?? [])]).toEqual([]);

    world.retagCluster(ACCOUNT, REGION, 'fresh', {env: 'dev'});
    const second = captureIo();
    expect(await main(['once', '-c', file, '--output', 'table'], second.io)).toBe(0);
    expect(second.stdout()).toContain('access set-up: 1 removed');
    expect(world.cluster(ACCOUNT, REGION, 'fresh')?.accessEntries.get(USER_ARN)).toBeUndefined();
  });
});
