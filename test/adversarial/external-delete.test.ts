/**
 * Adversarial: an entry deleted behind the writer's back — `kubectl delete kubeserver` (or a GitOps
 * prune) on `storage: kubernetes`, `etcdctl del` on etcd, another replica's reaper judging a Lease
 * by its own clock — while its cluster is still listed. The next cycle reads the registry without
 * it and reports `create`, but the heartbeat still believed its own copy was stored (same document,
 * same lease) and wrote nothing: the cluster stayed out of the inventory for good, while every
 * cycle claimed to create it.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAADVERSARIAL00004', secretAccessKey: 'adversarial-secret-4'};
const NAME = `keep-eks-us-east-1-${ACCOUNT}`;

let aws: AwsServiceWorld;
beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: KEY,
    account: ACCOUNT,
    env: {AWS_REGION: 'us-east-1'},
    populate: (world) => {
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'keep'});
    },
  });
});
afterAll(() => aws.close());

const config = parseConfig(
  `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: [us-east-1]
storage: {type: memory}
`,
  'ext.yaml',
);

/** The scenario against a registry (`writer` is the service's view, `operator` someone else's). */
async function scenario(writer: RegistryBackend, operator: RegistryBackend): Promise<void> {
  const heartbeat = new Heartbeat({backend: writer, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  try {
    const discovery = new Discovery({config, clock: systemClock});
    const registrar = createRegistrar(writer, heartbeat, 'g');
    await discovery.runCycle(registrar);
    expect(await operator.get(kubeServerKey('g', NAME))).toBeDefined();

    // Someone deletes the entry; the cluster is still there.
    expect(await operator.delete(kubeServerKey('g', NAME))).toBe(true);
    const report = await discovery.runCycle(registrar);
    expect(report.items.find((i) => i.name === NAME)?.action).toBe('create');
    expect(report.applyErrors).toEqual([]);
    expect(await operator.get(kubeServerKey('g', NAME)), 'the next cycle reported `create` but wrote nothing').toBeDefined();
    expect((await registrar.current()).map((s) => s.metadata.name)).toEqual([NAME]);
  } finally {
    await heartbeat.stop({deregister: false});
  }
}

describe('an entry deleted by someone else while its cluster is listed (kubernetes)', () => {
  let kube: KubeEnv;
  beforeAll(async () => {
    kube = await startKubeEnv();
  });
  afterAll(() => kube.close());

  it('is written again by the next cycle', async () => {
    const writer = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'leader'});
    const operator = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'kubectl'});
    try {
      await scenario(writer, operator);
    } finally {
      await operator.close();
      await writer.close();
    }
  });
});

describeOnEtcd('an entry deleted by someone else while its cluster is listed (etcd)', (etcd) => {
  it('is written again by the next cycle', async () => {
    const writer = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/ext-delete/', requestTimeoutMs: 2_000});
    const operator = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/ext-delete/', requestTimeoutMs: 2_000});
    try {
      await scenario(writer, operator);
    } finally {
      await operator.close();
      await writer.close();
    }
  });
});
