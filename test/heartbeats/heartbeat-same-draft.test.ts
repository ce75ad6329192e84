// The heartbeat skips comparing a draft it already found equal to the entry (the same object,
// announced again by a steady cycle): that shortcut must never hide a change or a lost lease.
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerFromItem, kubeServerKey, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import type {WatchEvent} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const TTL = 60_000;
const NAME = 'prod-eks-us-east-1-111111111111';
const KEY = kubeServerKey('mgmt', NAME);

function draft(labels: Record<string, string> = {env: 'prod'}): KubeServerDraft {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name: NAME, labels},
    spec: {
      cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name: NAME, description: 'EKS cluster prod', labels}, spec: {aws: {region: 'us-east-1', account_id: '111111111111', name: 'prod'}}},
      proxy_ids: [],
    },
  };
}

describe('Heartbeat: the same draft announced again', () => {
  let clock: FakeClock;
  let store: MemoryBackend;
  let puts: WatchEvent[];
  let hb: Heartbeat;

  beforeEach(async () => {
    clock = new FakeClock();
    store = new MemoryBackend({clock, purgeIntervalMs: 5_000});
    puts = [];
    await store.watch('kube_servers/', (e) => {
      if (e.type === 'put') puts.push(e);
    });
    hb = new Heartbeat({backend: store, clock, group: 'mgmt', ttlMs: TTL, hostId: 'host-a', hostname: 'discovery-0', version: '0.1.0', retry: {attempts: 2, baseMs: 10}});
    await hb.start();
  });

  afterEach(async () => {
    await hb.stop({deregister: false});
    await store.close();
  });

  it('is not written again, and a changed draft after it is', async () => {
    const same = draft();
    const first = await hb.announce(same);
    await hb.announce(same);
    const third = await hb.announce(same);
    expect(puts).toHaveLength(1);
    expect(third.metadata.revision).toBe(first.metadata.revision);

    await hb.announce(draft({env: 'staging'}));
    expect(puts).toHaveLength(2);
    const stored = await store.get(KEY);
    expect(stored && kubeServerFromItem(stored).spec.cluster.metadata.labels).toEqual({env: 'staging'});
    // The first draft again is a change back, written too.
    await hb.announce(same);
    expect(puts).toHaveLength(3);
  });

  it('is put again under the new lease when the lease was lost, and then not written again', async () => {
    const same = draft();
    await hb.announce(same);
    await hb.announce(same);
    const lost = hb.lease;
    if (lost) await store.revokeLease(lost);
    expect(await store.get(KEY)).toBeUndefined();
    // The next keepalive finds the lease gone: a new one, every entry put again.
    await clock.advance(TTL / 3);
    expect((await store.get(KEY))?.lease).toBe(hb.lease?.id);
    expect(hb.lease?.id).not.toBe(lost?.id);
    const written = puts.length;
    await hb.announce(same);
    expect(puts).toHaveLength(written);
    expect((await store.get(KEY))?.lease).toBe(hb.lease?.id);
  });
});
