// Adversarial: an entry that another
// writer re-put with the same content on its own lease is never moved back onto this heartbeat's
// lease, because the heartbeat compares the draft with its own remembered copy (same content, same
// lease id as far as it knows) instead of what the registry holds. When the foreign lease lapses the
// cluster leaves the inventory although every listing still has it (until the next cycle's create).
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerKey} from '../../heartbeats/kube-server.ts';
import {compileTagMatcher} from '../../matchers/index.ts';
import {builtInClouds} from '../../src/clouds/index.ts';
import type {DiscoveredCluster, SourceRef, SourceResult} from '../../src/core/types.ts';
import {runCycle, type Registrar, type SourcePlanner} from '../../src/discovery/cycle.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {startAwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const GROUP = 'rv';
const ACCOUNT = '111111111111';
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
const src: SourceRef = {id: `eks:us-east-1:${ACCOUNT}`, cloud: 'AWS', type: 'eks', region: 'us-east-1', account: ACCOUNT, matcherIndex: 0};
const cluster: DiscoveredCluster = {
  cloud: 'AWS', type: 'eks', name: 'a', region: 'us-east-1', account: ACCOUNT, tags: {env: 'prod'}, status: 'ACTIVE', statusOk: true,
  endpoint: 'https://a.eks.amazonaws.com', caData: CA, access: {kind: 'eks', clusterName: 'a', region: 'us-east-1'}, sourceId: src.id,
};
const KEY = kubeServerKey(GROUP, `a-eks-us-east-1-${ACCOUNT}`);

describe('an entry re-put by another writer on its own lease (same content)', () => {
  let clock: FakeClock;
  let backend: MemoryBackend;
  let inventory: Inventory;
  let heartbeat: Heartbeat;
  let registrar: Registrar;
  const planner: SourcePlanner = {plan: async () => ({failed: [], fetchers: [{source: src, fetch: async (): Promise<SourceResult> => ({source: src, ok: true, clusters: [cluster], malformed: []})}]})};
  const matcher = compileTagMatcher({'*': '*'});
  const run = async (): Promise<void> => {
    await clock.advance(1000);
    await runCycle({planners: [planner], registrar, clock, discoveryGroup: GROUP, evaluateContext: {staticLabels: {}, clouds: builtInClouds}, matcherFor: () => matcher, sourceConcurrency: 1});
  };

  beforeEach(async () => {
    clock = new FakeClock();
    backend = new MemoryBackend({clock});
    inventory = new Inventory({backend, group: GROUP, clock, resyncMs: 3_600_000});
    await inventory.start();
    heartbeat = new Heartbeat({backend, clock, group: GROUP, ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't', stored: (name, revision) => inventory.stored(name, revision), storedOnLease: (name, lease) => inventory.storedOnLease(name, lease)});
    await heartbeat.start();
    // As the service wires it (src/service/service.ts cycleRegistrar): the inventory's stored copies.
    registrar = {...createRegistrar(backend, heartbeat, GROUP), current: async () => Array.from(inventory.storedEntries(), ([, s]) => s)};
  });
  afterEach(async () => {
    await heartbeat.stop({deregister: false});
    await inventory.stop();
    await backend.close();
  });

  it('is moved back onto our lease by the next cycles, so it does not lapse with the other lease', async () => {
    await run();
    await run();
    const foreign = await backend.grantLease(60_000);
    const item = await backend.get(KEY);
    await backend.put(KEY, item?.value ?? '', {lease: foreign});
    await run();
    await run();
    expect((await backend.get(KEY))?.lease).toBe(heartbeat.lease?.id);
    await backend.revokeLease(foreign);
    expect(await backend.get(KEY), 'the listed cluster left the registry with the foreign lease').toBeDefined();
  });
});

describe('the service, when another writer re-puts its entry on a lease of its own', () => {
  it('moves it back onto its own lease next cycle, so the entry outlives the other lease', async () => {
    const key = {accessKeyId: 'AKIAFOREIGNLEASE0001', secretAccessKey: 'foreign-lease-secret'};
    const aws = await startAwsServiceWorld({key, account: ACCOUNT, populate: (w) => w.addCluster(ACCOUNT, 'us-east-1', {name: 'a', tags: {env: 'prod'}})});
    const backend = new MemoryBackend({clock: systemClock});
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: ${GROUP}
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: memory}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
      'foreign.yaml',
    );
    const svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger, backend});
    try {
      expect((await svc.nextCycle()).counts.create).toBe(1);
      const ours = (await backend.get(KEY))?.lease;
      expect(ours).toBeDefined();
      const foreign = await backend.grantLease(60_000);
      await backend.put(KEY, (await backend.get(KEY))?.value ?? '', {lease: foreign});
      svc.trigger();
      await svc.nextCycle();
      expect((await backend.get(KEY))?.lease).toBe(ours);
      await backend.revokeLease(foreign);
      expect(await backend.get(KEY), 'the listed cluster left the registry with the other lease').toBeDefined();
    } finally {
      await svc.stop({deregister: false});
      await backend.close();
      await aws.close();
    }
  });
});
