/**
 * setup_access_for_arn end to end: the service against the wire-level EKS/STS fakes and one
 * fake Kubernetes API per cluster whose RBAC authorizer enforces the ClusterRoles and bindings
 * it holds (an associated AmazonEKSClusterAdminPolicy counts as cluster-admin, as on EKS).
 */
import {mkdtemp, rm} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {afterEach, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {MANAGED_GROUP_KEY} from '../../src/access/setup-step.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {Config} from '../../src/config/schema.ts';
import {createBackend} from '../../src/registry/index.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {FakeAwsWorld, startFakeAws, type EksAuthenticationMode, type FakeAws, type FaultHook} from '../fakes/aws-fakes.ts';
import {startFakeKubeApi, KubeRbacStore, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {rbacAuthorizer} from '../fakes/kube-rbac-authorizer.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {runCycle, servedBy} from '../helpers/service-cycles.ts';
import {base64, eksAuthenticator} from '../probe/eks-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIASETUPACCESS00001', secretAccessKey: 'setup-access-secret', arn: USER_ARN};
const ADMIN_POLICY = 'arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy';
const WRITES = ['CreateAccessEntry', 'DeleteAccessEntry', 'AssociateAccessPolicy', 'DisassociateAccessPolicy'];

interface ClusterSpec {
  readonly name: string;
  readonly mode?: EksAuthenticationMode;
  readonly tags?: Record<string, string>;
}

interface Harness {
  readonly world: FakeAwsWorld;
  readonly aws: FakeAws;
  readonly kube: Map<string, FakeKubeApi>;
  readonly dir: string;
  readonly config: Config;
  svc: RunningService;
  start(): Promise<RunningService>;
  cycle(): Promise<void>;
  servers(): Promise<Record<string, KubeServer>>;
  writes(): number;
  close(): Promise<void>;
}

let open: Harness | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

async function harness(clusters: readonly ClusterSpec[], options: {fault?: FaultHook; timeout?: string; principal?: string} = {}): Promise<Harness> {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  const aws = await startFakeAws({world, ...(options.fault ? {fault: options.fault} : {})});
  const kube = new Map<string, FakeKubeApi>();
  for (const c of clusters) {
    const rbac = new KubeRbacStore();
    const authn = eksAuthenticator({world, clusters: [{account: ACCOUNT, region: REGION, name: c.name}], stsUrl: aws.url});
    const api = await startFakeKubeApi({authenticate: authn.authenticate, rbac, authorize: rbacAuthorizer(rbac)});
    kube.set(c.name, api);
    world.addCluster(ACCOUNT, REGION, {name: c.name, endpoint: api.url, caData: base64(api.caPem), authenticationMode: c.mode ?? 'API_AND_CONFIG_MAP', tags: c.tags ?? {env: 'prod'}});
  }
  const restoreEnv = setEnv({...aws.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1'});
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-setup-'));
  const config = parseConfig(
    `version: v1
discovery_service:
  discovery_group: setup
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [${REGION}]
      tags: {env: prod}
      setup_access_for_arn: ${options.principal ?? USER_ARN}
probe: {timeout: ${options.timeout ?? '5s'}}
storage: {type: sqlite, path: ${path.join(dir, 'registry.db')}}
http: {listen_addr: "127.0.0.1:0"}
`,
    'setup.yaml',
  );
  const h: Harness = {
    world,
    aws,
    kube,
    dir,
    config,
    svc: undefined as unknown as RunningService,
    async start() {
      h.svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger});
      // The first cycle starts on its own and needs network round trips: subscribing now cannot miss it.
      await h.svc.nextCycle();
      return h.svc;
    },
    cycle: () => runCycle(h.svc),
    servers: () => servedBy(h.svc, (s) => s.spec.cluster.spec.aws?.name ?? s.metadata.name),
    writes() {
      const kubeWrites = [...kube.values()].reduce((n, k) => n + k.requests.filter((r) => r.method === 'POST' && !r.path.includes('accessreviews') || r.method === 'PUT').length, 0);
      return WRITES.reduce((n, operation) => n + aws.stats.count({operation}), 0) + kubeWrites;
    },
    async close() {
      await h.svc?.stop({deregister: false});
      restoreEnv();
      for (const k of kube.values()) await k.close();
      await aws.close();
      await rm(dir, {recursive: true, force: true});
    },
  };
  open = h;
  return h;
}

const entryOf = (h: Harness, cluster: string) => h.world.cluster(ACCOUNT, REGION, cluster)?.accessEntries.get(USER_ARN);

describe('setup_access_for_arn', () => {
  it('turns a cluster created without access healthy within one cycle, and a second cycle writes nothing', async () => {
    const h = await harness([{name: 'fresh'}]);
    await h.start();

    const entry = entryOf(h, 'fresh');
    expect(entry?.kubernetesGroups).toEqual(['kube-discovery']);
    expect(entry?.tags[MANAGED_GROUP_KEY]).toBe('setup');
    // The temporary cluster-admin association is gone again.
    expect([...(entry?.accessPolicies.keys() ?? [])]).toEqual([]);
    expect(h.aws.stats.count({operation: 'AssociateAccessPolicy', status: 200})).toBe(1);
    expect(h.aws.stats.count({operation: 'DisassociateAccessPolicy', status: 200})).toBe(1);
    const rbac = h.kube.get('fresh')?.rbac;
    expect(rbac?.get('clusterroles', 'kube-discovery')?.metadata['labels']).toMatchObject({[MANAGED_GROUP_KEY]: 'setup'});
    expect(rbac?.get('clusterrolebindings', 'kube-discovery')?.['subjects']).toEqual([{kind: 'Group', name: 'kube-discovery', apiGroup: 'rbac.authorization.k8s.io'}]);
    expect((await h.servers())['fresh']?.status?.target_health).toMatchObject({status: 'healthy'});

    const writes = h.writes();
    const reads = h.aws.stats.count({operation: 'DescribeAccessEntry'});
    await h.cycle();
    expect(h.writes()).toBe(writes);
    // Cached: not even a read until the periodic full refresh.
    expect(h.aws.stats.count({operation: 'DescribeAccessEntry'})).toBe(reads);
    expect((await h.servers())['fresh']?.status?.target_health).toMatchObject({status: 'healthy'});
    const metrics = await (await fetch(`${h.svc.url}/metrics`)).text();
    expect(metrics).toContain('kube_discovery_access_setup_total{cloud="AWS",outcome="configured"} 1');
    expect(metrics).toContain('kube_discovery_access_setup_total{cloud="AWS",outcome="cached"} 1');
  });

  it('deletes the entry it created when the cluster stops matching, and never one someone else created', async () => {
    const h = await harness([{name: 'ours'}, {name: 'theirs'}]);
    h.world.addAccessEntry(ACCOUNT, REGION, 'theirs', {principalArn: USER_ARN, kubernetesGroups: ['kube-discovery'], tags: {owner: 'platform'}});
    await h.start();
    const servers = await h.servers();
    expect(servers['ours']?.status?.target_health?.status).toBe('healthy');
    expect(servers['theirs']?.status?.target_health?.status).toBe('healthy');
    expect(h.aws.stats.count({operation: 'CreateAccessEntry'})).toBe(1);

    h.world.retagCluster(ACCOUNT, REGION, 'ours', {env: 'dev'});
    h.world.retagCluster(ACCOUNT, REGION, 'theirs', {env: 'dev'});
    await h.cycle();
    expect(Object.keys(await h.servers())).toEqual([]);
    expect(entryOf(h, 'ours')).toBeUndefined();
    expect(entryOf(h, 'theirs')?.tags).toEqual({owner: 'platform'});
    expect(h.aws.stats.count({operation: 'DeleteAccessEntry'})).toBe(1);
  });

  it('cleans up after a cluster deleted in AWS without failing, and keeps everything when the listing fails', async () => {
    const h = await harness([{name: 'gone'}, {name: 'kept'}]);
    await h.start();
    let failList = false;
    h.aws.fault = (ctx) => (failList && ctx.operation === 'ListClusters' ? {code: 'ServiceUnavailableException'} : undefined);

    failList = true;
    h.world.removeCluster(ACCOUNT, REGION, 'gone');
    await h.cycle();
    // A failed listing deregisters nothing, so nothing is cleaned up either.
    expect(Object.keys(await h.servers()).sort()).toEqual(['gone', 'kept']);
    expect(h.aws.stats.count({operation: 'DeleteAccessEntry'})).toBe(0);

    failList = false;
    await h.cycle();
    expect(Object.keys(await h.servers())).toEqual(['kept']);
    // The cluster took its entries with it: the delete finds nothing and that is fine.
    expect(h.aws.stats.count({operation: 'DescribeAccessEntry', code: 'ResourceNotFoundException'})).toBeGreaterThan(0);
    expect(entryOf(h, 'kept')?.kubernetesGroups).toEqual(['kube-discovery']);
  });

  it('leaves an entry someone else made without the group as it is, and says how its owner can add the group', async () => {
    const h = await harness([{name: 'ops'}]);
    h.world.addAccessEntry(ACCOUNT, REGION, 'ops', {principalArn: USER_ARN, kubernetesGroups: ['ops-team'], username: 'ops'});
    await h.start();
    expect(entryOf(h, 'ops')?.kubernetesGroups).toEqual(['ops-team']);
    expect(h.writes()).toBe(0);
    const message = (await h.servers())['ops']?.status?.target_health?.message;
    expect(message).toContain('was not created by discovery group setup');
    expect(message).toContain(`aws eks update-access-entry --region us-east-1 --cluster-name ops --principal-arn ${USER_ARN} --kubernetes-groups ops-team kube-discovery`);
  });

  it('does not edit a CONFIG_MAP cluster and says how to switch it or map the identity', async () => {
    const h = await harness([{name: 'legacy', mode: 'CONFIG_MAP'}]);
    await h.start();
    expect(entryOf(h, 'legacy')).toBeUndefined();
    expect(h.writes()).toBe(0);
    const health = (await h.servers())['legacy']?.status?.target_health;
    expect(health).toMatchObject({status: 'unhealthy', reason: 'unauthorized'});
    expect(health?.message).toContain('does not edit clusters in authentication mode CONFIG_MAP');
    expect(health?.message).toContain('aws eks update-cluster-config --region us-east-1 --name legacy --access-config authenticationMode=API_AND_CONFIG_MAP');
    expect(health?.message).toContain('aws-auth');
  });

  it('repairs, at the next start, a cluster-admin association a run could not take back', async () => {
    let failDisassociate = true;
    const h = await harness([{name: 'crash'}], {fault: (ctx) => (failDisassociate && ctx.operation === 'DisassociateAccessPolicy' ? {code: 'ServerException'} : undefined)});
    await h.start();
    // The RBAC was written, but the association stayed behind.
    expect([...(entryOf(h, 'crash')?.accessPolicies.keys() ?? [])]).toEqual([ADMIN_POLICY]);
    expect((await h.servers())['crash']?.status?.target_health?.message).toContain('eks:DisassociateAccessPolicy');
    await h.svc.stop({deregister: false});

    failDisassociate = false;
    await h.start();
    expect([...(entryOf(h, 'crash')?.accessPolicies.keys() ?? [])]).toEqual([]);
    expect(await (await fetch(`${h.svc.url}/metrics`)).text()).toContain('kube_discovery_access_setup_total{cloud="AWS",outcome="repaired"} 1');
    expect((await h.servers())['crash']?.status?.target_health?.status).toBe('healthy');
  });
});

describe('setup_access_for_arn with a principal other than the discovery identity', () => {
  it('gives the identity a temporary entry with cluster-admin for the RBAC step and removes both again', async () => {
    const agent = `arn:aws:iam::${ACCOUNT}:role/teleport-kube-agent`;
    const h = await harness([{name: 'shared'}], {principal: agent});
    await h.start();
    const entries = h.world.cluster(ACCOUNT, REGION, 'shared')?.accessEntries;
    expect([...(entries?.keys() ?? [])]).toEqual([agent]);
    expect(entries?.get(agent)?.kubernetesGroups).toEqual(['kube-discovery']);
    expect(h.kube.get('shared')?.rbac.get('clusterrolebindings', 'kube-discovery')).toBeDefined();
    expect(h.aws.stats.count({operation: 'CreateAccessEntry', status: 200})).toBe(2);
    expect(h.aws.stats.count({operation: 'DeleteAccessEntry', status: 200})).toBe(1);

    // The identity cannot ask on the principal's behalf, so only the hourly refresh looks again.
    const writes = h.writes();
    await h.cycle();
    expect(h.writes()).toBe(writes);
  });
});

describe('setup_access_for_arn after a crash', () => {
  it('takes back, at start, the cluster-admin association a killed run left between associate and disassociate', async () => {
    const h = await harness([{name: 'killed'}]);
    // What a run killed right after AssociateAccessPolicy leaves: its entry, the association, the marker.
    h.world.addAccessEntry(ACCOUNT, REGION, 'killed', {principalArn: USER_ARN, kubernetesGroups: ['kube-discovery'], tags: {[MANAGED_GROUP_KEY]: 'setup', 'kube-discovery.io/purpose': 'access'}});
    h.world.associateAccessPolicy(ACCOUNT, REGION, 'killed', USER_ARN, {policyArn: ADMIN_POLICY});
    const backend = await createBackend(h.config.storage, {clock: systemClock});
    await backend.put(
      `access_setup/setup/admin/${ACCOUNT}.${REGION}.killed`,
      JSON.stringify({clusterName: 'killed', region: REGION, account: ACCOUNT, identity: USER_ARN, policyArn: ADMIN_POLICY, createdIdentityEntry: false, at: new Date().toISOString()}),
    );
    await backend.close();

    await h.start();
    expect([...(entryOf(h, 'killed')?.accessPolicies.keys() ?? [])]).toEqual([]);
    expect(entryOf(h, 'killed')?.kubernetesGroups).toEqual(['kube-discovery']);
    expect(h.aws.stats.count({operation: 'DisassociateAccessPolicy', status: 200})).toBeGreaterThanOrEqual(1);
    const check = await createBackend(h.config.storage, {clock: systemClock});
    try {
      expect(await check.list('access_setup/setup/admin/')).toEqual([]);
    } finally {
      await check.close();
    }
  });
});

describe('setup_access_for_arn failures leave the cluster registered and delete nothing', () => {
  it('names the denied call and the IAM action to grant', async () => {
    const h = await harness([{name: 'denied'}], {fault: (ctx) => (ctx.operation === 'CreateAccessEntry' ? {code: 'AccessDeniedException'} : undefined)});
    await h.start();
    const health = (await h.servers())['denied']?.status?.target_health;
    expect(health).toMatchObject({status: 'unhealthy', reason: 'access_setup_failed'});
    expect(health?.message).toContain('failed at eks:CreateAccessEntry: AccessDeniedException');
    expect(health?.message).toContain('lacks the IAM action eks:CreateAccessEntry');
    expect(health?.message).toContain('deploy/aws/access-setup-policy.json');
    expect(await (await fetch(`${h.svc.url}/metrics`)).text()).toContain('kube_discovery_access_setup_total{cloud="AWS",outcome="failed"} 1');
  });

  it('reads a malformed DescribeAccessEntry answer as a failure, not as "no entry"', async () => {
    const h = await harness([{name: 'odd'}], {fault: (ctx) => (ctx.operation === 'DescribeAccessEntry' ? {malformed: 'missing-fields'} : undefined)});
    await h.start();
    expect(h.aws.stats.count({operation: 'CreateAccessEntry'})).toBe(0);
    const health = (await h.servers())['odd']?.status?.target_health;
    expect(health).toMatchObject({reason: 'access_setup_failed'});
    expect(health?.message).toContain('InvalidResponse');
  });

  it('gives up on a hung call at the deadline, keeps the cluster, deletes nothing and recovers next cycle', async () => {
    let hang = true;
    const h = await harness([{name: 'slow'}], {timeout: '1s', fault: (ctx) => (hang && ctx.operation === 'ListAssociatedAccessPolicies' ? {hang: true} : undefined)});
    await h.start();
    expect(Object.keys(await h.servers())).toEqual(['slow']);
    expect((await h.servers())['slow']?.status?.target_health?.message).toContain('eks:ListAssociatedAccessPolicies');
    expect(entryOf(h, 'slow')?.kubernetesGroups).toEqual(['kube-discovery']);
    expect(h.aws.stats.count({operation: 'DeleteAccessEntry'})).toBe(0);
    expect(h.aws.stats.count({operation: 'AssociateAccessPolicy'})).toBe(0);

    hang = false;
    await h.cycle();
    expect((await h.servers())['slow']?.status?.target_health?.status).toBe('healthy');
  });
});
