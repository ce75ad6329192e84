/**
 * Adversarial: an entry changed behind the writer's back while its cluster is still listed.
 *
 * - Deleted: `kubectl delete kubeserver` (or a GitOps prune) on `storage: kubernetes`, `etcdctl del`
 *   on etcd, another replica's reaper judging a Lease by its own clock. The next cycle reads the
 *   registry without it and reports `create`, but the heartbeat still believed its own copy was
 *   stored (same document, same lease) and wrote nothing: the cluster stayed out of the inventory
 *   for good, while every cycle claimed to create it.
 * - Edited on the writer's own lease (adv13): `kubectl edit kubeserver` keeps the lease annotation,
 *   `etcdctl put --lease` keeps the lease. An edit that leaves the document unreadable is planned
 *   as a `create`, which carries a new discovered_at and is written (held). A readable edit (a label
 *   changed by hand) is planned as an `update`, but the heartbeat wrote nothing for the same reason:
 *   the hand edit stayed until a restart, and a watcher filtering on that label lost the cluster.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
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
const KEY_OF_NAME = kubeServerKey('g', NAME);

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

/** What someone else does to the registered entry (`operator`), and what the next cycles must do about it. */
interface Change {
  readonly id: string;
  readonly what: string;
  run(operator: RegistryBackend, discovery: Discovery, registrar: Registrar): Promise<void>;
}

const DELETED: Change = {
  id: 'delete',
  what: 'deleted by someone else',
  async run(operator, discovery, registrar) {
    expect(await operator.delete(KEY_OF_NAME)).toBe(true);
    const report = await discovery.runCycle(registrar);
    expect(report.items.find((i) => i.name === NAME)?.action).toBe('create');
    expect(report.applyErrors).toEqual([]);
    expect(await operator.get(KEY_OF_NAME), 'the next cycle reported `create` but wrote nothing').toBeDefined();
    expect((await registrar.current()).map((s) => s.metadata.name)).toEqual([NAME]);
  },
};

const EDITED: Change = {
  id: 'edit',
  what: 'edited by hand on the writer\'s lease',
  async run(operator, discovery, registrar) {
    const stored = await operator.get(KEY_OF_NAME);
    expect(stored?.lease).toBeDefined();
    // Someone cuts the entry's name; the lease stays the writer's.
    const edited = JSON.parse(stored?.value ?? '{}') as {metadata: Record<string, unknown>};
    delete edited.metadata['name'];
    await operator.put(KEY_OF_NAME, JSON.stringify(edited), {lease: {id: stored?.lease ?? '', ttlMs: 600_000}});
    expect((await registrar.current()).map((s) => s.metadata.name)).toEqual([]);

    const report = await discovery.runCycle(registrar);
    expect(report.items.find((i) => i.name === NAME)?.action).toBe('create');
    expect(report.applyErrors).toEqual([]);
    expect((await registrar.current()).map((s) => s.metadata.name), 'the next cycle reported `create` but wrote nothing').toEqual([NAME]);

    // A readable edit: a label a watcher may filter on, changed by hand; the listing still says otherwise.
    const again = await operator.get(KEY_OF_NAME);
    const relabelled = JSON.parse(again?.value ?? '{}') as {spec: {cluster: {metadata: {labels: Record<string, string>}}}};
    relabelled.spec.cluster.metadata.labels['region'] = 'hand-edited';
    await operator.put(KEY_OF_NAME, JSON.stringify(relabelled), {lease: {id: again?.lease ?? '', ttlMs: 600_000}});
    const relabelReport = await discovery.runCycle(registrar);
    expect(relabelReport.items.find((i) => i.name === NAME)?.action).toBe('update');
    const [restored] = await registrar.current();
    expect(restored?.spec.cluster.metadata.labels['region'], 'the hand-edited label stays although the listing says otherwise').toBe('us-east-1');
  },
};

/** One cycle registers the cluster through `writer`; then `change` is made through `operator` (someone else's view). */
async function scenario(writer: RegistryBackend, operator: RegistryBackend, change: Change): Promise<void> {
  const heartbeat = new Heartbeat({backend: writer, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
  await heartbeat.start();
  try {
    const discovery = new Discovery({config, clock: systemClock});
    const registrar = createRegistrar(writer, heartbeat, 'g');
    await discovery.runCycle(registrar);
    expect(await operator.get(KEY_OF_NAME)).toBeDefined();
    await change.run(operator, discovery, registrar);
  } finally {
    await heartbeat.stop({deregister: false});
  }
}

for (const change of [DELETED, EDITED]) {
  describe(`an entry ${change.what} while its cluster is listed (kubernetes)`, () => {
    let kube: KubeEnv;
    beforeAll(async () => {
      kube = await startKubeEnv();
    });
    afterAll(() => kube.close());

    it('is written again by the next cycle', async () => {
      const writer = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'leader'});
      const operator = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'kubectl'});
      try {
        await scenario(writer, operator, change);
      } finally {
        await operator.close();
        await writer.close();
      }
    });
  });

  describeOnEtcd(`an entry ${change.what} while its cluster is listed (etcd)`, (etcd) => {
    it('is written again by the next cycle', async () => {
      const writer = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: `/ext-${change.id}/`, requestTimeoutMs: 2_000});
      const operator = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: `/ext-${change.id}/`, requestTimeoutMs: 2_000});
      try {
        await scenario(writer, operator, change);
      } finally {
        await operator.close();
        await writer.close();
      }
    });
  });
}
