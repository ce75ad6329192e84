// The cluster access probe against a fake HTTPS Kubernetes API with its own CA that only
// accepts correctly signed EKS tokens for its cluster, mapped through access entries.
import net from 'node:net';
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {mintEksToken} from '../../src/credentials/eks-token.ts';
import {probeCluster, type ProbeOptions} from '../../src/probe/probe.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';
import {startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {createTestCa} from '../fakes/tls-ca.ts';
import {base64, eksAuthenticator, until, type EksAuthn} from './eks-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const CLUSTER = 'prod';
const ROLE = `arn:aws:iam::${ACCOUNT}:role/kube-discovery`;
const TIMEOUT_MS = 10_000;

const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));
const world = new FakeAwsWorld({clock});
world.addAccount(ACCOUNT, {roles: [{arn: ROLE, trust: [ACCOUNT]}]});
world.addCluster(ACCOUNT, REGION, {name: CLUSTER, authenticationMode: 'API'});
const session = world.issueRoleCredentials(ROLE, 'kube-discovery', 3600);

let kube: FakeKubeApi;
let authn: EksAuthn;
let caPem: string;
let deniedImpersonation = new Set<string>();
const minted: string[] = [];

beforeAll(async () => {
  const ca = await createTestCa();
  caPem = ca.caPem;
  authn = eksAuthenticator({world, clusters: [{account: ACCOUNT, region: REGION, name: CLUSTER}], now: () => clock.now()});
  kube = await startFakeKubeApi({
    tls: await ca.issueServerCert(),
    authenticate: authn.authenticate,
    authorize: (user, attrs) => {
      if (!user.groups.includes('kube-discovery')) return {allowed: false, reason: 'no RBAC policy matched'};
      return attrs.verb !== 'impersonate' || !deniedImpersonation.has(attrs.resource ?? '');
    },
  });
});

afterAll(async () => {
  await kube.close();
});

beforeEach(() => {
  kube.setMode('ok');
  deniedImpersonation = new Set();
});

/** Mints a real EKS token with the discovery role's session, as the token source does. */
async function token(clusterName = CLUSTER): Promise<string> {
  const t = await mintEksToken({clusterName, region: REGION, credentials: session, clock});
  minted.push(t.token);
  return t.token;
}

function probe(extra: Partial<ProbeOptions> = {}): ReturnType<typeof probeCluster> {
  return probeCluster({
    endpoint: kube.url,
    caData: base64(caPem),
    token: () => token(),
    timeoutMs: TIMEOUT_MS,
    clock,
    clusterName: CLUSTER,
    cloud: 'AWS',
    region: REGION,
    principal: ROLE,
    authMode: 'API',
    ...extra,
  });
}

function grantAccessEntry(): void {
  if (!world.cluster(ACCOUNT, REGION, CLUSTER)?.accessEntries.has(ROLE)) {
    world.addAccessEntry(ACCOUNT, REGION, CLUSTER, {principalArn: ROLE, kubernetesGroups: ['kube-discovery']});
  }
}

function expectNoToken(value: unknown): void {
  const text = JSON.stringify(value);
  expect(text).not.toContain('k8s-aws-v1');
  for (const t of minted) expect(text).not.toContain(t.slice(11, 60));
  expect(text).not.toContain(session.secretAccessKey);
}

describe('probeCluster', () => {
  it('is healthy when the mapped identity may impersonate users, groups and serviceaccounts', async () => {
    grantAccessEntry();
    const seen = kube.requests.length;

    const health = await probe();

    expect(health).toEqual({
      status: 'healthy',
      message: expect.stringContaining('v1.31.2') as unknown,
      transition_timestamp: '2026-01-01T12:00:00.000Z',
    });
    const requests = kube.requests.slice(seen);
    expect(requests.map((r) => `${r.method} ${r.path} ${r.status}`).sort()).toEqual([
      'GET /version 200',
      ...Array(3).fill('POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews 201'),
    ]);
    for (const r of requests) expect(r.authorization).toMatch(/^Bearer k8s-aws-v1\.[A-Za-z0-9_-]+$/);
    expect(authn.accepted.at(-1)).toMatchObject({cluster: CLUSTER, principalArn: ROLE});
    expectNoToken(health);
  });

  it('reports unauthorized with the access-entry command for an unmapped identity (API mode)', async () => {
    const other = `arn:aws:iam::${ACCOUNT}:role/not-mapped`;
    world.addRole({arn: other, trust: [ACCOUNT]});
    const creds = world.issueRoleCredentials(other, 'kube-discovery', 3600);

    const health = await probe({
      principal: other,
      token: async () => (await mintEksToken({clusterName: CLUSTER, region: REGION, credentials: creds, clock})).token,
    });

    expect(health).toMatchObject({status: 'unhealthy', reason: 'unauthorized'});
    expect(health.message).toContain(`the identity ${other} is not mapped in EKS cluster ${CLUSTER}`);
    expect(health.message).toContain(`aws eks create-access-entry --cluster-name ${CLUSTER} --principal-arn ${other} --kubernetes-groups kube-discovery`);
    expect(health.message).not.toContain('aws-auth');
    expect(authn.accepted.at(-1)).toMatchObject({principalArn: other});
    expectNoToken(health);
  });

  it('suggests an aws-auth mapRoles entry for a CONFIG_MAP cluster', async () => {
    const other = `arn:aws:iam::${ACCOUNT}:role/legacy`;
    world.addRole({arn: other, trust: [ACCOUNT]});
    const creds = world.issueRoleCredentials(other, 'kube-discovery', 3600);

    const health = await probe({
      principal: other,
      authMode: 'CONFIG_MAP',
      token: async () => (await mintEksToken({clusterName: CLUSTER, region: REGION, credentials: creds, clock})).token,
    });

    expect(health).toMatchObject({status: 'unhealthy', reason: 'unauthorized'});
    expect(health.message).toContain('aws-auth mapRoles entry');
    expect(health.message).toContain(`rolearn: ${other}, username: kube-discovery, groups: [kube-discovery]`);
    expect(health.message).toContain('access entries are not read');
  });

  it('refuses a correctly signed token minted for another cluster', async () => {
    grantAccessEntry();
    const health = await probe({token: () => token('staging')});

    expect(health).toMatchObject({status: 'unhealthy', reason: 'unauthorized'});
    expect(authn.refused.at(-1)).toMatch(/signature/);
  });

  it('reports forbidden naming the impersonation it lacks and the ClusterRole to add', async () => {
    grantAccessEntry();
    deniedImpersonation = new Set(['groups', 'serviceaccounts']);

    const health = await probe();

    expect(health).toMatchObject({status: 'unhealthy', reason: 'forbidden'});
    expect(health.message).toContain('lacks impersonate on groups, serviceaccounts');
    expect(health.message).toContain('kubectl create clusterrole kube-discovery --verb=impersonate --resource=users,groups,serviceaccounts');
    expect(health.message).toContain('kubectl create clusterrolebinding kube-discovery --clusterrole=kube-discovery --group=kube-discovery');
  });

  it('reports tls when the server certificate is not from the cluster CA, without sending the token', async () => {
    const other = await createTestCa();
    const seen = kube.requests.length;

    const health = await probe({caData: base64(other.caPem)});

    expect(health).toMatchObject({status: 'unhealthy', reason: 'tls'});
    expect(health.message).toContain('cluster CA reported by the EKS API does not verify the server certificate');
    expect(kube.requests.length).toBe(seen);
  });

  it('reports unreachable when the API server does not answer within the timeout', async () => {
    grantAccessEntry();
    kube.setMode('hang');
    const seen = kube.requests.length;

    const pending = probe();
    await until(() => kube.requests.length > seen, 'the probe request to reach the fake');
    await clock.advance(TIMEOUT_MS);

    const health = await pending;
    expect(health).toMatchObject({status: 'unhealthy', reason: 'unreachable'});
    expect(health.message).toContain(`no answer within ${TIMEOUT_MS} ms`);
    expect(health.message).toContain('security group');
  });

  it('reports unreachable for a closed port', async () => {
    const port = await closedPort();

    const health = await probe({endpoint: `https://127.0.0.1:${port}`});

    expect(health).toMatchObject({status: 'unhealthy', reason: 'unreachable'});
    expect(health.message).toContain('connection refused (ECONNREFUSED)');
  });

  it('reports no_credentials when no token can be minted, and no_endpoint before minting one', async () => {
    const failed = await probe({token: () => Promise.reject(new Error(`cannot assume role ${ROLE}: AccessDenied: not authorized`))});
    expect(failed).toMatchObject({status: 'unhealthy', reason: 'no_credentials'});
    expect(failed.message).toContain(`cannot assume role ${ROLE}: AccessDenied`);

    let minted = 0;
    const noEndpoint = await probe({endpoint: undefined, token: () => Promise.resolve(String(++minted))});
    expect(noEndpoint).toMatchObject({status: 'unknown', reason: 'no_endpoint'});
    expect(minted).toBe(0);
  });
});

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const {port} = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
