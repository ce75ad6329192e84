/**
 * Adversarial: two clusters of different clouds claim one kube_server name (both carry the
 * `TeleportKubernetesName` tag with the same value). The cluster registered first keeps the name
 * while both are listed — but when the owner is not listed this cycle only because its source
 * failed (or its record was unusable), the other cluster must not take the name over: that would
 * replace the owner's entry (it leaves the inventory without a listing lacking it), and from then
 * on the newcomer, now "registered", would keep the name for good.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeArm, type FakeArm} from '../fakes/arm-server.ts';
import {ArmWorld} from '../fakes/arm-world.ts';
import {fakeTokenCredential} from '../fakes/arm-token-credential.ts';
import type {FaultHook} from '../fakes/aws-faults.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';

const ACCOUNT = '111111111111';
const SUB = '00000000-0000-0000-0000-0000000000aa';
const KEY = {accessKeyId: 'AKIAADVERSARIAL00003', secretAccessKey: 'adversarial-secret-3'};
const NAME = 'payments';

let aws: AwsServiceWorld;
let arm: FakeArm;
const azure = new ArmWorld();

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: KEY,
    account: ACCOUNT,
    env: {AWS_REGION: 'us-east-1'},
    populate: (world) => {
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'payments-eks', tags: {TeleportKubernetesName: NAME}});
    },
  });
  azure.addSubscription({subscriptionId: SUB});
  arm = await startFakeArm({world: azure});
});

afterAll(async () => {
  await arm.close();
  await aws.close();
});

const config = (): ReturnType<typeof parseConfig> =>
  parseConfig(
    `version: v1
discovery_service:
  discovery_group: g
  refresh_interval: 0s
  aws:
    - types: [eks]
      regions: [us-east-1]
  azure:
    - types: [aks]
      subscriptions: ["${SUB}"]
      resource_manager_endpoint: ${arm.url}
storage: {type: memory}
`,
    'squat.yaml',
  );

/** Whose cluster the entry describes: `AWS` or `Azure`. */
const cloudOf = (server: KubeServer | undefined): string | undefined => server?.spec.cluster.metadata.labels['teleport.dev/cloud'];

describe('a name claimed by a cluster of another cloud', () => {
  const faults: [string, FaultHook][] = [
    ['its EKS source fails (ListClusters 500)', (ctx) => (ctx.operation === 'ListClusters' ? {code: 'InternalFailure'} : undefined)],
    ['its DescribeCluster says ResourceNotFoundException (a record kept, not a listing)', (ctx) => (ctx.operation === 'DescribeCluster' ? {code: 'ResourceNotFoundException'} : undefined)],
    ['its EKS source is denied', (ctx) => (ctx.service === 'eks' ? {code: 'AccessDeniedException'} : undefined)],
  ];
  for (const [what, fault] of faults) {
    it(`stays with the registered owner when ${what}`, async () => {
      aws.fake.fault = undefined;
      const backend = new MemoryBackend({clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      const ref = {subscriptionId: SUB, resourceGroup: 'rg', name: 'payments-aks'};
      try {
        const discovery = new Discovery({
          config: config(),
          clock: systemClock,
          azure: {credential: fakeTokenCredential(), clientOptions: {tlsOptions: {ca: arm.caPem}, retryOptions: {maxRetries: 0}}},
        });
        const registrar = createRegistrar(backend, heartbeat, 'g');
        const entry = async (): Promise<KubeServer | undefined> => (await registrar.current()).find((s) => s.metadata.name === NAME);

        // The EKS cluster is registered under the name first.
        await discovery.runCycle(registrar);
        expect(cloudOf(await entry())).toBe('AWS');

        // An AKS cluster claims the same name: while both are listed the owner keeps it.
        azure.addCluster({...ref, location: 'eastus', tags: {TeleportKubernetesName: NAME}});
        const both = await discovery.runCycle(registrar);
        expect(both.items.find((i) => i.name === NAME && i.action === 'skip')?.reason).toMatch(/collision/);
        expect(cloudOf(await entry())).toBe('AWS');

        // The owner's source fails (or its record is unusable): it is not listed, but nothing said it is gone.
        aws.fake.fault = fault;
        const failing = await discovery.runCycle(registrar);
        const owner = await entry();
        expect(cloudOf(owner), `the EKS cluster's entry was replaced: ${JSON.stringify(failing.items.filter((i) => i.name === NAME).map((i) => [i.action, i.source, i.reason]))}`).toBe('AWS');
        expect(owner?.spec.cluster.spec.aws?.name).toBe('payments-eks');

        // Its source answers again: the owner is listed and keeps its name; the AKS cluster is still the one skipped.
        aws.fake.fault = undefined;
        const recovered = await discovery.runCycle(registrar);
        expect(cloudOf(await entry())).toBe('AWS');
        expect((await entry())?.status?.stale ?? false).toBe(false);
        expect(recovered.items.find((i) => i.name === NAME && i.action === 'skip')?.source).toMatch(/^aks:/);
      } finally {
        aws.fake.fault = undefined;
        azure.removeCluster(ref);
        await heartbeat.stop({deregister: false});
        await backend.close();
      }
    });
  }
});
