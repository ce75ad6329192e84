/**
 * Adversarial (review of e77648c): a re-list after an etcd watch gap runs while the periodic
 * re-list is still on its way. The gap re-list (read after the gap) sees a cluster registered
 * during the gap; the periodic one was read before it. Answered last, the older listing replaced
 * the view: the cluster left /v1/kube_servers and /v1/watch clients were sent a `delete` for a
 * cluster nobody deleted, until the next re-list. The cluster was not in the older listing's
 * "changed while listing" set, since the gap re-list, not the watch, brought it in.
 */
import {afterEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {evaluate} from '../../src/discovery/evaluate.ts';
import {Inventory, type InventoryEvent} from '../../src/inventory/inventory.ts';
import type {RegistryBackend, RegistryItem, WatchEvent, WatchOptions} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {context, eksCluster, okResult} from '../discovery/builders.ts';

const ACCOUNT = '111111111111';
const name = (cluster: string): string => `${cluster}-eks-us-east-1-${ACCOUNT}`;

/**
 * The real backend, with listings read at once but answered when the test says (`hold`), and a
 * watch that can lose events (`mute`, a compaction gap) and whose `onGap` the test calls.
 */
function gappyBackend(backend: RegistryBackend) {
  const held: Array<() => void> = [];
  let holding = false;
  let muted = false;
  let onGap: (() => void) | undefined;
  const view = new Proxy(backend, {
    get(target, key) {
      if (key === 'list') {
        return (prefix: string): Promise<RegistryItem[]> => {
          const read = target.list(prefix);
          if (!holding) return read;
          let open = (): void => undefined;
          const gate = new Promise<void>((resolve) => (open = resolve));
          held.push(open);
          return read.then(async (items) => (await gate, items));
        };
      }
      if (key === 'listMeta') return undefined;
      if (key === 'watch') {
        return (prefix: string, onEvent: (e: WatchEvent) => void, options?: WatchOptions) => {
          onGap = options?.onGap;
          return target.watch(prefix, (e) => (muted ? undefined : onEvent(e)));
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    backend: view,
    hold: (on: boolean) => void (holding = on),
    releaseAll: () => held.splice(0).forEach((open) => open()),
    mute: (on: boolean) => void (muted = on),
    gap: () => onGap?.(),
  };
}

describe('a re-list after a watch gap overlapping the periodic re-list', () => {
  let inventory: Inventory | undefined;
  let heartbeat: Heartbeat | undefined;
  afterEach(async () => {
    await inventory?.stop();
    await heartbeat?.stop({deregister: false});
  });

  it('a cluster registered during the gap stays in the inventory, and no watcher is told it was deleted', async () => {
    const backend = new MemoryBackend({clock: systemClock});
    heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g1', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
    await heartbeat.start();
    const announce = async (cluster: string): Promise<void> => {
      const found = [eksCluster(cluster, 'us-east-1', ACCOUNT, {tags: {env: 'prod'}})];
      for (const c of evaluate([okResult('us-east-1', ACCOUNT, found)], context('g1')).candidates.values()) await heartbeat?.announce(c.server);
    };
    await announce('old');
    const gappy = gappyBackend(backend);
    inventory = new Inventory({backend: gappy.backend, group: 'g1', clock: systemClock, resyncMs: 3_600_000});
    await inventory.start();
    const events: InventoryEvent[] = [];
    inventory.subscribe((e) => events.push(e));
    expect(inventory.get(name('old'))).toBeDefined();

    // The periodic re-list reads the registry now; its answer is on its way.
    gappy.hold(true);
    const periodic = inventory.resync();
    gappy.hold(false);
    // The watch's history is compacted: a cluster registered now is never delivered.
    gappy.mute(true);
    await announce('fresh');
    gappy.mute(false);
    // The watch restarted from now: the inventory lists again and finds the cluster.
    gappy.gap();
    for (let i = 0; i < 500 && inventory.get(name('fresh')) === undefined; i++) await new Promise((r) => setTimeout(r, 10));
    expect(inventory.get(name('fresh')), 'the gap re-list brought the cluster in').toBeDefined();

    // The older listing's answer arrives last.
    gappy.releaseAll();
    await periodic;

    expect(inventory.get(name('fresh')), 'the cluster registered during the gap left the inventory').toBeDefined();
    expect(events.filter((e) => e.type === 'delete').map((e) => (e.type === 'delete' ? e.name : ''))).toEqual([]);
  });
});
