// The real kubectl with a kubeconfig from `kube-discovery kubeconfig`: kubectl runs our
// `token eks` exec plugin (which assumes the matcher's role at the fake STS and presigns
// against it), and the fake Kubernetes API authenticates the token by replaying it to STS.
// For AKS, `token aks` gets an Entra ID token from a managed-identity endpoint (Entra ID
// clusters) or the local account's token from the fake ARM's listClusterUserCredential.
import {execFile} from 'node:child_process';
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {promisify} from 'node:util';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {CliIo} from '../../src/cli/io.ts';
import {runKubeconfig} from '../../src/cli/kubeconfig.ts';
import {startSimIdentity, type SimIdentity} from '../../bench/sim-identity.ts';
import {AKS_SERVER_ID} from '../../src/credentials/aks-token.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {startFakeAws, type FakeAws} from '../fakes/aws-server.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {createTestCa} from '../fakes/tls-ca.ts';
import {aksKubeServer, eksAuthenticator, eksKubeServer, type EksAuthn} from '../probe/eks-fixtures.ts';
import {startKubeServersApi, type FakeKubeServersApi} from './kube-servers-api.ts';

const execFileAsync = promisify(execFile);
const ACCOUNT = '111111111111';
const REGION = 'us-west-2';
const KEY = {accessKeyId: 'AKIAKUBECTLTEST00001', secretAccessKey: 'kubectl-test-secret/DO-NOT-PRINT'};
const ROLE = `arn:aws:iam::${ACCOUNT}:role/kube-discovery`;
const EXTERNAL_ID = 'ext-kubectl';

let kubectl = false;
let aws: FakeAws;
let kube: FakeKubeApi;
let api: FakeKubeServersApi;
let authn: EksAuthn;
let dir: string;
let identity: SimIdentity;
let arm: FakeArm;
let armWorld: ArmWorld;
let armCaFile: string;

beforeAll(async () => {
  kubectl = await execFileAsync('kubectl', ['version', '--client']).then(() => true, () => false);
  if (!kubectl) return;
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY], roles: [{arn: ROLE, trust: [ACCOUNT], externalId: EXTERNAL_ID}]});
  for (const name of ['prod', 'unmapped']) world.addCluster(ACCOUNT, REGION, {name});
  world.addAccessEntry(ACCOUNT, REGION, 'prod', {principalArn: ROLE, kubernetesGroups: ['kube-discovery']});
  aws = await startFakeAws({world});
  authn = eksAuthenticator({world, clusters: ['prod', 'unmapped'].map((name) => ({account: ACCOUNT, region: REGION, name})), stsUrl: aws.url});
  const ca = await createTestCa();
  identity = await startSimIdentity();
  armWorld = new ArmWorld();
  armWorld.addSubscription({subscriptionId: 'sub-1'});
  armWorld.addCluster({subscriptionId: 'sub-1', resourceGroup: 'rg-a', name: 'aks-local', caPem: ca.caPem});
  arm = await startFakeArm({world: armWorld, acceptToken: (token) => identity.resourceOf(token) === 'https://management.azure.com'});
  kube = await startFakeKubeApi({
    tls: await ca.issueServerCert(),
    authenticate: async (token) => {
      if (token.startsWith('k8s-aws-v1.')) return authn.authenticate(token);
      if (identity.resourceOf(token) === AKS_SERVER_ID) return {user: 'aad:aks-entra', groups: ['system:authenticated']};
      const local = armWorld.localAccountIdentity(token);
      return local ? {user: local.user, groups: [...local.groups]} : undefined;
    },
  });
  const access = {region: REGION, role_arn: ROLE, external_id: EXTERNAL_ID};
  api = await startKubeServersApi([
    eksKubeServer('prod-eks-us-west-2-111111111111', {endpoint: kube.url, caPem: ca.caPem, access: {...access, cluster_name: 'prod'}}),
    eksKubeServer('unmapped-eks-us-west-2-111111111111', {endpoint: kube.url, caPem: ca.caPem, access: {...access, cluster_name: 'unmapped'}}),
    aksKubeServer('aks-entra', {endpoint: kube.url, caPem: ca.caPem, serverId: AKS_SERVER_ID}),
    aksKubeServer('aks-local', {endpoint: kube.url, caPem: ca.caPem}),
  ]);
  dir = await mkdtemp(path.join(tmpdir(), 'kd-kubectl-'));
  armCaFile = path.join(dir, 'arm-ca.pem');
  await writeFile(armCaFile, arm.caPem);
});

afterAll(async () => {
  await Promise.all([aws?.close(), kube?.close(), api?.close(), arm?.close(), identity?.close()]);
  if (dir) await rm(dir, {recursive: true, force: true});
});

/** kubectl with a minimal environment: a fake account's keys and the fake STS, nothing else. */
function runKubectl(file: string, context: string): Promise<{stdout: string; stderr: string}> {
  const env = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: dir,
    KUBECACHEDIR: path.join(dir, 'cache'),
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
    AWS_ENDPOINT_URL_STS: aws.url,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    // Azure: the managed-identity endpoint, the fake Resource Manager and the CA of its certificate.
    ...identity.env,
    KUBE_DISCOVERY_ARM_ENDPOINT: arm.url,
    NODE_EXTRA_CA_CERTS: armCaFile,
  };
  return execFileAsync('kubectl', ['--kubeconfig', file, '--context', context, 'get', '--raw', '/version'], {env, timeout: 60_000});
}

describe('kubectl with a generated kubeconfig', () => {
  it('runs the token exec plugin and reaches the cluster with a valid EKS token', async (ctx) => {
    if (!kubectl) {
      if (process.env['CI']) throw new Error('kubectl is required in CI (expected it on PATH, e.g. /usr/bin/kubectl)');
      ctx.skip('kubectl is not installed; install it to run this test');
    }
    const file = path.join(dir, 'kubeconfig');
    const out = {stdout: '', stderr: ''};
    const io: CliIo = {stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), env: {}, isTty: false};
    expect(await runKubeconfig(['--server', api.url, '-o', file], io)).toBe(0);

    const {stdout} = await runKubectl(file, 'prod-eks-us-west-2-111111111111');

    expect(JSON.parse(stdout)).toMatchObject({gitVersion: 'v1.31.2'});
    const request = kube.requests.find((r) => r.path === '/version' && r.status === 200);
    expect(request?.authorization).toMatch(/^Bearer k8s-aws-v1\.[A-Za-z0-9_-]+$/);
    expect(authn.accepted).toContainEqual(expect.objectContaining({cluster: 'prod', principalArn: ROLE}));
    expect(aws.stats.find({service: 'sts', operation: 'AssumeRole'}).map((c) => c.status)).toContain(200);
  });

  it('is refused for a cluster where the role has no access entry', async (ctx) => {
    if (!kubectl) ctx.skip('kubectl is not installed');
    const file = path.join(dir, 'kubeconfig');

    const failure = await runKubectl(file, 'unmapped-eks-us-west-2-111111111111').then(
      () => undefined,
      (error: unknown) => error as {stderr: string},
    );

    expect(failure?.stderr).toMatch(/Unauthorized|must be logged in/);
    expect(failure?.stderr).not.toContain(KEY.secretAccessKey);
    expect(authn.refused).toContain(`${ROLE} has no access entry in unmapped`);
  });

  it.for([
    ['aks-entra', 'an Entra ID token for the AKS server application'],
    ['aks-local', "the local account's token from listClusterUserCredential"],
  ] as const)('reaches the AKS cluster %s with %s', async ([context], ctx) => {
    if (!kubectl) ctx.skip('kubectl is not installed');
    const file = path.join(dir, 'kubeconfig');

    const {stdout} = await runKubectl(file, context);

    expect(JSON.parse(stdout)).toMatchObject({gitVersion: 'v1.31.2'});
    const authorization = kube.requests.filter((r) => r.path === '/version' && r.status === 200).at(-1)?.authorization ?? '';
    const token = authorization.replace(/^Bearer /, '');
    if (context === 'aks-entra') expect(identity.resourceOf(token)).toBe(AKS_SERVER_ID);
    else expect(armWorld.localAccountIdentity(token)?.cluster.name).toBe('aks-local');
  });
});
