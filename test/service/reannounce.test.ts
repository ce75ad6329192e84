import {afterEach, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {reannounce} from '../../src/service/reannounce.ts';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerPrefix, type KubeServerDraft} from '../../heartbeats/kube-server.ts';

function draft(name: string): KubeServerDraft {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: {env: 'prod'}},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: 'EKS cluster', labels: {env: 'prod'}}, spec: {}},
      proxy_ids: [],
    },
  };
}

describe('reannounce at the start of a leadership term', () => {
  const clock = new FakeClock();
  const backend = new MemoryBackend({clock});
  const heartbeats: Heartbeat[] = [];

  function heartbeat(hostId: string): Heartbeat {
    const hb = new Heartbeat({backend, clock, group: 'mgmt', ttlMs: 60_000, hostId, hostname: hostId, version: 'test', retry: {attempts: 1, baseMs: 1}});
    heartbeats.push(hb);
    return hb;
  }

  afterEach(async () => {
    for (const hb of heartbeats.splice(0)) await hb.stop({deregister: false});
  });

  it('reads entries with the revision and expiry the registry holds', async () => {
    const hb = heartbeat('replica-a');
    await hb.start();
    const stored = await hb.announce(draft('prod-a'));
    const [read] = await createRegistrar(backend, hb, 'mgmt').current();
    expect(read?.metadata.revision).toBe(stored.metadata.revision);
    expect(read?.metadata.expires).toBe(stored.metadata.expires);
  });

  it('counts nothing as moved when this replica already holds every entry on its lease', async () => {
    const hb = heartbeat('replica-a');
    await hb.start();
    await hb.announce(draft('prod-a'));
    await hb.announce(draft('prod-b'));
    expect(await reannounce({registrar: createRegistrar(backend, hb, 'mgmt'), heartbeat: hb})).toBe(0);
  });

  it('counts the entries it moved from the previous leader onto its own lease', async () => {
    const previous = heartbeat('replica-a');
    await previous.start();
    await previous.announce(draft('prod-a'));
    await previous.announce(draft('prod-b'));
    const next = heartbeat('replica-b');
    await next.start();
    expect(await reannounce({registrar: createRegistrar(backend, next, 'mgmt'), heartbeat: next})).toBe(2);
    const items = await backend.list(kubeServerPrefix('mgmt'));
    expect(new Set(items.map((i) => i.lease))).toEqual(new Set([next.lease?.id]));
  });
});
