// `configure eks|aks` against the wire-level AWS fake and a fake Kubernetes API that
// authenticates EKS tokens and authorizes with the RBAC objects configure writes.
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it} from 'vitest';
import type {CliIo} from '../../src/cli/io.ts';
import {runConfigure} from '../../src/cli/configure.ts';
import {mintEksToken} from '../../src/credentials/eks-token.ts';
import {FakeAwsWorld, startFakeAws, verifyEksToken, type EksAuthenticationMode, type FakeAws} from '../fakes/aws-fakes.ts';
import {httpsRequest} from '../fakes/http-client.ts';
import {startFakeKubeApi, type AccessAttributes, type FakeKubeApi, type KubeUser} from '../fakes/kube-api-server.ts';

const MGMT = '111111111111';
const REGION = 'us-east-1';
const ADMIN = {accessKeyId: 'AKIACONFIGUREADMIN01', secretAccessKey: 'configure-admin-secret/DO-NOT-PRINT', arn: `arn:aws:iam::${MGMT}:user/platform-admin`};
const DISCOVERY_ROLE = `arn:aws:iam::${MGMT}:role/kube-discovery`;

let world: FakeAwsWorld;
let aws: FakeAws;
const kubes: FakeKubeApi[] = [];
const savedEnv = {id: process.env['AWS_ACCESS_KEY_ID'], secret: process.env['AWS_SECRET_ACCESS_KEY']};

/** A cluster on the fake EKS whose endpoint is a fake API server authenticating like EKS (access entries) and authorizing with its RBAC store. */
async function addCluster(name: string, authenticationMode: EksAuthenticationMode): Promise<FakeKubeApi> {
  const authenticate = async (token: string): Promise<KubeUser | undefined> => {
    const verdict = await verifyEksToken(world, token, {clusterName: name});
    if (!verdict.ok) return undefined;
    // The cluster creator is an admin, as with bootstrapClusterCreatorAdminPermissions.
    if (verdict.principalArn === ADMIN.arn) return {user: 'platform-admin', groups: ['system:masters']};
    const entry = world.cluster(MGMT, REGION, name)?.accessEntries.get(verdict.principalArn);
    return entry ? {user: entry.username, groups: entry.kubernetesGroups} : undefined;
  };
  // Called only once the server below answers requests, so `kube` is set by then.
  const authorize = (user: KubeUser, attrs: AccessAttributes): boolean => user.groups.includes('system:masters') || rbacAllows(kube, user, attrs);
  const kube = await startFakeKubeApi({authenticate, authorize});
  kubes.push(kube);
  world.addCluster(MGMT, REGION, {name, endpoint: kube.url, caData: Buffer.from(kube.caPem).toString('base64'), authenticationMode});
  return kube;
}

/** Kubernetes RBAC evaluation over the fake's stored ClusterRoleBindings and ClusterRoles. */
function rbacAllows(kube: FakeKubeApi, user: KubeUser, attrs: AccessAttributes): boolean {
  return kube.rbac.list('clusterrolebindings').some((binding) => {
    const subjects = (binding['subjects'] ?? []) as {kind: string; name: string}[];
    if (!subjects.some((s) => (s.kind === 'Group' && user.groups.includes(s.name)) || (s.kind === 'User' && s.name === user.user))) return false;
    const role = kube.rbac.get('clusterroles', (binding['roleRef'] as {name: string}).name);
    const rules = (role?.['rules'] ?? []) as {apiGroups: string[]; resources: string[]; verbs: string[]}[];
    return rules.some((r) => r.verbs.includes(attrs.verb) && r.apiGroups.includes(attrs.group ?? '') && r.resources.includes(attrs.resource ?? ''));
  });
}

/** What the discovery identity itself is allowed, as the probe asks it: a SelfSubjectAccessReview with its own EKS token. */
async function discoveryMayImpersonate(kube: FakeKubeApi, clusterName: string): Promise<boolean | 'unauthenticated'> {
  const credentials = world.issueRoleCredentials(DISCOVERY_ROLE, 'kube-discovery', 3600);
  const {token} = await mintEksToken({clusterName, region: REGION, credentials: {...credentials, expiration: new Date(credentials.expiresAt ?? 0)}});
  const res = await httpsRequest(`${kube.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, {
    ca: kube.caPem,
    method: 'POST',
    headers: {authorization: `Bearer ${token}`, 'content-type': 'application/json'},
    body: JSON.stringify({apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: {resourceAttributes: {verb: 'impersonate', resource: 'groups'}}}),
  });
  if (res.status === 401) return 'unauthenticated';
  return (JSON.parse(res.body) as {status: {allowed: boolean}}).status.allowed;
}

async function run(argv: readonly string[]): Promise<{code: number; stdout: string; stderr: string}> {
  const out = {stdout: '', stderr: ''};
  const io: CliIo = {stdout: (t) => (out.stdout += t), stderr: (t) => (out.stderr += t), env: {AWS_ENDPOINT_URL_EKS: aws.url}, isTty: false};
  const code = await runConfigure(argv, io);
  expect(out.stdout + out.stderr).not.toContain(ADMIN.secretAccessKey);
  return {code, ...out};
}

const eks = (cluster: string, ...extra: string[]): string[] => ['eks', '--cluster-name', cluster, '--region', REGION, '--principal-arn', DISCOVERY_ROLE, ...extra];
const writes = (kube: FakeKubeApi): number => kube.requests.filter((r) => r.method !== 'GET').length;

beforeAll(() => {
  process.env['AWS_ACCESS_KEY_ID'] = ADMIN.accessKeyId;
  process.env['AWS_SECRET_ACCESS_KEY'] = ADMIN.secretAccessKey;
});

afterAll(() => {
  for (const [name, value] of [['AWS_ACCESS_KEY_ID', savedEnv.id], ['AWS_SECRET_ACCESS_KEY', savedEnv.secret]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

beforeEach(async () => {
  world = new FakeAwsWorld();
  world.addAccount(MGMT, {accessKeys: [ADMIN], roles: [{arn: DISCOVERY_ROLE, trust: [MGMT]}]});
  aws = await startFakeAws({world});
});

afterEach(async () => {
  await Promise.all([aws.close(), ...kubes.splice(0).map((k) => k.close())]);
});

describe('configure eks --apply', () => {
  it('creates the access entry and the RBAC, after which the discovery identity may impersonate', async () => {
    const kube = await addCluster('prod', 'API_AND_CONFIG_MAP');
    expect(await discoveryMayImpersonate(kube, 'prod')).toBe('unauthenticated');

    const {code, stdout, stderr} = await run(eks('prod', '--apply'));

    expect({code, stderr}).toEqual({code: 0, stderr: ''});
    expect(stdout).toContain(`access entry ${DISCOVERY_ROLE}: created (kubernetes groups: kube-discovery)`);
    expect(stdout).toContain('clusterrole kube-discovery: created');
    expect(stdout).toContain('clusterrolebinding kube-discovery: created');
    expect(stdout).toMatch(/Applied 3 changes\.\n$/);
    expect(world.cluster(MGMT, REGION, 'prod')?.accessEntries.get(DISCOVERY_ROLE)?.kubernetesGroups).toEqual(['kube-discovery']);
    expect(kube.rbac.get('clusterrolebindings', 'kube-discovery')?.['subjects']).toEqual([{kind: 'Group', name: 'kube-discovery', apiGroup: 'rbac.authorization.k8s.io'}]);
    expect(await discoveryMayImpersonate(kube, 'prod')).toBe(true);
  });

  it('changes nothing on a second run, and says so', async () => {
    const kube = await addCluster('prod', 'API');
    expect((await run(eks('prod', '--apply'))).code).toBe(0);
    const writesAfterFirst = writes(kube);
    const rbacBefore = JSON.stringify(kube.rbac.list('clusterroles'));

    const second = await run(eks('prod', '--apply'));

    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`access entry ${DISCOVERY_ROLE}: unchanged`);
    expect(second.stdout).toContain('clusterrole kube-discovery: unchanged');
    expect(second.stdout).toContain('clusterrolebinding kube-discovery: unchanged');
    expect(second.stdout).toMatch(/Nothing changed: cluster prod is already configured\.\n$/);
    expect(writes(kube)).toBe(writesAfterFirst);
    expect(JSON.stringify(kube.rbac.list('clusterroles'))).toBe(rbacBefore);
    expect(aws.stats.count({operation: 'CreateAccessEntry'})).toBe(1);
  });

  it('repairs a ClusterRole someone narrowed, and reports the update', async () => {
    const kube = await addCluster('prod', 'API');
    await run(eks('prod', '--apply'));
    const stored = kube.rbac.get('clusterroles', 'kube-discovery');
    kube.rbac.handleUpdate('clusterroles', 'kube-discovery', {...stored, rules: [{apiGroups: [''], resources: ['pods'], verbs: ['get']}]}, false);
    expect(await discoveryMayImpersonate(kube, 'prod')).toBe(false);

    const again = await run(eks('prod', '--apply'));

    expect(again.stdout).toContain('clusterrole kube-discovery: updated');
    expect(again.stdout).toMatch(/Applied 1 change\.\n$/);
    expect(await discoveryMayImpersonate(kube, 'prod')).toBe(true);
  });

  it('on an aws-auth-only cluster prints the mapping and the eksctl command and creates no access entry', async () => {
    const kube = await addCluster('legacy', 'CONFIG_MAP');

    const {code, stdout} = await run(eks('legacy', '--apply'));

    expect(code).toBe(0);
    expect(stdout).toContain('skipped, the cluster has no access entries (mode CONFIG_MAP)');
    expect(stdout).toContain(`- rolearn: ${DISCOVERY_ROLE}\n  username: kube-discovery\n  groups:\n    - kube-discovery`);
    expect(stdout).toContain(`eksctl create iamidentitymapping --cluster legacy --region ${REGION} --arn ${DISCOVERY_ROLE} --username kube-discovery --group kube-discovery`);
    expect(stdout).toMatch(/Applied 2 changes; the aws-auth mapping above is left to you\.\n$/);
    expect(world.cluster(MGMT, REGION, 'legacy')?.accessEntries.size).toBe(0);
    expect(aws.stats.count({operation: 'CreateAccessEntry'})).toBe(0);
    expect(kube.rbac.get('clusterroles', 'kube-discovery')).toBeDefined();
  });

  it('leaves an access entry with other groups alone, prints the update command and exits 1', async () => {
    const kube = await addCluster('prod', 'API');
    world.addAccessEntry(MGMT, REGION, 'prod', {principalArn: DISCOVERY_ROLE, kubernetesGroups: ['viewers']});

    const {code, stdout} = await run(eks('prod', '--apply'));

    expect(code).toBe(1);
    expect(stdout).toContain('exists without the group kube-discovery (kubernetes groups: viewers); not changed');
    expect(stdout).toContain(`aws eks update-access-entry --region ${REGION} --cluster-name prod --principal-arn ${DISCOVERY_ROLE} --kubernetes-groups viewers kube-discovery`);
    expect(world.cluster(MGMT, REGION, 'prod')?.accessEntries.get(DISCOVERY_ROLE)?.kubernetesGroups).toEqual(['viewers']);
    expect(kube.rbac.get('clusterrolebindings', 'kube-discovery')).toBeDefined();
  });
});

describe('configure eks without --apply', () => {
  it('prints the access entry command and the RBAC YAML and writes nothing', async () => {
    const kube = await addCluster('prod', 'API_AND_CONFIG_MAP');

    const {code, stdout} = await run(eks('prod'));

    expect(code).toBe(0);
    expect(stdout).toContain('Nothing was changed. Run again with --apply');
    expect(stdout).toContain(`aws eks create-access-entry --region ${REGION} --cluster-name prod --principal-arn ${DISCOVERY_ROLE} --kubernetes-groups kube-discovery --type STANDARD`);
    expect(stdout).toContain('kind: ClusterRole\n');
    expect(stdout).toContain('kind: ClusterRoleBinding\n');
    expect(stdout).toMatch(/resources:\n\s+- users\n\s+- groups\n\s+- serviceaccounts\n\s+verbs:\n\s+- impersonate/);
    expect(world.cluster(MGMT, REGION, 'prod')?.accessEntries.size).toBe(0);
    expect(aws.stats.count({operation: 'CreateAccessEntry'})).toBe(0);
    expect(kube.requests).toHaveLength(0);
  });

  it('maps an assumed-role session ARN to its role and says so', async () => {
    await addCluster('prod', 'API');
    const {code, stdout, stderr} = await run(['eks', '--cluster-name', 'prod', '--region', REGION, '--principal-arn', `arn:aws:sts::${MGMT}:assumed-role/kube-discovery/pod-1`]);
    expect(code).toBe(0);
    expect(stderr).toContain(`using the role ARN ${DISCOVERY_ROLE}`);
    expect(stdout).toContain(`--principal-arn ${DISCOVERY_ROLE} `);
  });

  it.each([
    [['eks', '--cluster-name', 'prod', '--region', REGION], /expected --principal-arn ARN, got none/],
    [['eks', '--cluster-name', 'prod', '--region', REGION, '--principal-arn', 'kube-discovery'], /expected --principal-arn to be an IAM role or user ARN/],
    [eks('prod', '--group', 'system:masters'), /expected --group to be a Kubernetes group name not starting with system:/],
    [['gke'], /expected one of eks, aks, got "gke"/],
  ])('usage error %j: exit 2 and one line', async (argv, message) => {
    const {code, stdout, stderr} = await run(argv);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(message);
  });

  it('names the cluster and region when the cluster does not exist: exit 1', async () => {
    const {code, stderr} = await run(eks('missing'));
    expect(code).toBe(1);
    expect(stderr).toMatch(/^kube-discovery configure eks: EKS DescribeCluster failed: ResourceNotFoundException: .*check --cluster-name and --region/);
  });
});

describe('configure aks', () => {
  const SUB = '0b1f6471-1bf0-4dda-aec3-cb9272f09590';
  const OID = 'f2b3c4d5-6e7f-4a8b-9c0d-1e2f3a4b5c6d';

  it('prints the role assignments and a ClusterRoleBinding for the identity object id', async () => {
    const {code, stdout} = await run(['aks', '--subscription', SUB, '--resource-group', 'rg-prod', '--name', 'aks-prod', '--principal-id', OID]);
    expect(code).toBe(0);
    const scope = `/subscriptions/${SUB}/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/aks-prod`;
    expect(stdout).toContain(`az role assignment create --assignee-object-id ${OID} --assignee-principal-type ServicePrincipal --role 'Azure Kubernetes Service Cluster User Role' --scope ${scope}`);
    expect(stdout).toContain(`--role 'Azure Kubernetes Service RBAC Reader' --scope ${scope}`);
    expect(stdout).toMatch(new RegExp(`subjects:\\n\\s+- kind: User\\n\\s+name: ${OID}`));
  });

  it('refuses a principal id that is not a GUID', async () => {
    const {code, stderr} = await run(['aks', '--subscription', SUB, '--resource-group', 'rg', '--name', 'n', '--principal-id', 'kube-discovery']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/expected --principal-id to be a GUID/);
  });
});
