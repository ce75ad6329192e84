/**
 * At 10,000 entries re-listing and re-parsing the whole registry every cycle was the largest
 * allocation of a cycle: with a local backend (memory, SQLite) the cycle reads the group's
 * entries from the inventory the HTTP API already holds. A counting view over a real
 * MemoryBackend shows the backend is not listed again per cycle, and that the result is right.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startService} from '../../src/service/service.ts';
import type {FakeAwsWorld} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIACYCLEREADS000001', secretAccessKey: 'cycle-reads-secret'};
let aws: AwsServiceWorld;
let world: FakeAwsWorld;

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: KEY,
    account: ACCOUNT,
    populate: (w) => {
      for (const name of ['a', 'b', 'c']) w.addCluster(ACCOUNT, 'us-east-1', {name, tags: {env: 'prod'}});
    },
  });
  world = aws.world;
});

afterAll(() => aws.close());

/** The backend, counting list() calls under the kube_servers prefix. */
function counting(backend: MemoryBackend): {view: RegistryBackend; lists: () => number} {
  let lists = 0;
  const view = new Proxy(backend, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'list') return (prefix: string) => (prefix.startsWith('kube_servers/') && lists++, target.list(prefix));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {view, lists: () => lists};
}

describe('a cycle on a local backend', () => {
  it('reads the current entries from the inventory instead of listing the registry again', async () => {
    const backend = new MemoryBackend({clock: systemClock});
    const {view, lists} = counting(backend);
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: reads
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: memory}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
      'reads.yaml',
    );
    const svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger, backend: view});
    try {
      const first = await svc.nextCycle();
      expect(first.counts.create).toBe(3);
      const before = lists();
      world.removeCluster(ACCOUNT, 'us-east-1', 'b');
      world.retagCluster(ACCOUNT, 'us-east-1', 'c', {env: 'dev'});
      svc.trigger();
      const second = await svc.nextCycle();
      expect(second.counts).toMatchObject({delete: 1, update: 1, unchanged: 1});
      expect(lists()).toBe(before);
      const names = ((await (await fetch(`${svc.url}/v1/kube_servers`)).json()) as {items: {metadata: {name: string}}[]}).items.map((s) => s.metadata.name);
      expect(names).toEqual(['a-eks-us-east-1-111111111111', 'c-eks-us-east-1-111111111111']);
    } finally {
      await svc.stop({deregister: false});
      await backend.close();
    }
  });
});
