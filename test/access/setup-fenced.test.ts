/**
 * Access set-up writes its registry markers through the leader's fenced view: two services share
 * one etcd; the leader is deposed while its set-up step holds a temporary cluster-admin
 * association (marker written), and the step's later registry writes are refused once another
 * replica leads. The marker stays for the new leader's repair instead of being removed by a
 * replica that no longer owns the group.
 */
import {afterEach, expect, it, vi} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {openEtcdBackend, type EtcdBackend} from '../../src/registry/etcd.ts';
import {startService, type RunningService} from '../../src/service/service.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {KubeRbacStore, startFakeKubeApi, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {rbacAuthorizer} from '../fakes/kube-rbac-authorizer.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {captureIo, setEnv} from '../helpers/env.ts';
import {base64, eksAuthenticator} from '../probe/eks-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIASETUPFENCED00001', secretAccessKey: 'setup-fenced-secret', arn: USER_ARN};
const GROUP = 'fenced';
const MARKER = `access_setup/${GROUP}/admin/${ACCOUNT}.${REGION}.c1`;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describeWithEtcd('access set-up under leader election', () => {
  it('a deposed leader cannot remove (or write) access set-up markers; the new leader owns them', async () => {
    const etcd: TestEtcd = await startEtcd();
    cleanups.push(() => etcd.stop());
    const world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
    const aws: FakeAws = await startFakeAws({world});
    cleanups.push(() => aws.close());
    // The cluster's API answers nothing while the gate is closed: the leader's step waits inside its temporary-admin window.
    let opened = (): void => undefined;
    const gate = new Promise<void>((resolve) => (opened = resolve));
    let held = (): void => undefined;
    const reached = new Promise<void>((resolve) => (held = resolve));
    const rbac = new KubeRbacStore();
    const authn = eksAuthenticator({world, clusters: [{account: ACCOUNT, region: REGION, name: 'c1'}], stsUrl: aws.url});
    const kube: FakeKubeApi = await startFakeKubeApi({
      authenticate: async (token) => {
        held();
        await gate;
        return authn.authenticate(token);
      },
      rbac,
      authorize: rbacAuthorizer(rbac),
    });
    cleanups.push(() => kube.close());
    world.addCluster(ACCOUNT, REGION, {name: 'c1', endpoint: kube.url, caData: base64(kube.caPem), authenticationMode: 'API_AND_CONFIG_MAP', tags: {env: 'prod'}});
    cleanups.push(setEnv({...aws.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1'}));
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: ${GROUP}
  poll_interval: 1h
  aws:
    - types: [eks]
      regions: [${REGION}]
      tags: {env: prod}
      setup_access_for_arn: ${USER_ARN}
probe: {timeout: 30s}
storage: {type: etcd, endpoints: ["${etcd.endpoint}"], session_ttl: 30s}
http: {listen_addr: "127.0.0.1:0"}
`,
      'fenced.yaml',
    );
    const start = (replica: string): Promise<RunningService> =>
      startService({config, io: captureIo({...process.env, KUBE_DISCOVERY_REPLICA: replica}).io, clock: systemClock, logger: silentLogger});
    const observer: EtcdBackend = await openEtcdBackend({endpoints: [etcd.endpoint]});
    cleanups.push(() => observer.close());

    const a = await start('replica-a');
    cleanups.push(() => a.stop({deregister: false, graceMs: 0}));
    expect(a.role()).toBe('leader');
    await reached;
    // A holds the temporary association and has recorded it.
    expect(await observer.get(MARKER)).toBeDefined();

    const b = await start('replica-b');
    cleanups.push(() => b.stop({deregister: false, graceMs: 0}));
    // The new leader's cycle must not reach access set-up while we look: its listing hangs.
    aws.fault = (ctx) => (ctx.operation === 'ListClusters' ? {hang: true} : undefined);
    // A's session entry goes: B's is the oldest left and B leads.
    const mine = (await observer.list(`election/${GROUP}/`)).find((item) => item.value === 'replica-a');
    expect(mine).toBeDefined();
    await observer.delete(mine?.key ?? '');
    await vi.waitFor(() => expect(b.role()).toBe('leader'), {timeout: 20_000, interval: 50});

    // A's step goes on: the RBAC is written and the association taken back, but the registry is no longer A's to write.
    opened();
    await vi.waitFor(async () => expect(await (await fetch(`${a.url}/metrics`)).text()).toMatch(/kube_discovery_access_setup_total\{cloud="AWS",outcome="(failed|configured)"\} 1/), {timeout: 20_000, interval: 50});
    expect(await observer.get(MARKER)).toBeDefined();
    const metrics = await (await fetch(`${a.url}/metrics`)).text();
    expect(metrics).toContain('kube_discovery_access_setup_total{cloud="AWS",outcome="failed"} 1');
    aws.fault = undefined;
  });
});
