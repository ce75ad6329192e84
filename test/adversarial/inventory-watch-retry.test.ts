/**
 * Adversarial: the registry refuses the inventory's watch when the replica starts (etcd not up yet,
 * a network policy applied late). The first listing is retried by the periodic re-list; the watch
 * was never opened again, so for the rest of the process every change reached /v1/kube_servers,
 * /v1/watch and the heartbeat's view of which lease an entry is on only with the next re-list
 * (30 s by default), not as it happened.
 */
import {expect, it} from 'vitest';
import {Inventory} from '../../src/inventory/inventory.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeClock, flushMicrotasks} from '../helpers/fake-clock.ts';

const doc = (name: string): string =>
  JSON.stringify({kind: 'kube_server', version: 'v3', metadata: {name, labels: {}}, spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}}});

/** `backend` whose first `watch` is refused. */
function watchRefusedOnce(backend: RegistryBackend): RegistryBackend & {refused: number} {
  let refused = 0;
  return new Proxy(backend, {
    get(target, key) {
      if (key === 'refused') return refused;
      if (key === 'watch') {
        return async (...args: Parameters<RegistryBackend['watch']>) => {
          if (refused === 0) {
            refused++;
            throw new Error('connection refused');
          }
          return target.watch(...args);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as RegistryBackend & {refused: number};
}

it('opens the watch again with the next re-list after the registry refused it at start', async () => {
  const clock = new FakeClock();
  const backend = new MemoryBackend({clock});
  const flaky = watchRefusedOnce(backend);
  const inventory = new Inventory({backend: flaky, group: 'g', clock, resyncMs: 30_000});
  try {
    await backend.put('kube_servers/g/first', doc('first'));
    await inventory.start();
    expect(flaky.refused).toBe(1);
    expect(inventory.list().map((s) => s.metadata.name)).toEqual(['first']);

    // The next re-list: the registry answers again.
    await clock.advance(30_000);
    await flushMicrotasks();

    // A change between re-lists reaches the inventory as it happens, through the watch.
    await backend.put('kube_servers/g/second', doc('second'));
    await flushMicrotasks();
    expect(inventory.list().map((s) => s.metadata.name), 'the change waits for the next re-list: the watch was never opened again').toEqual(['first', 'second']);
  } finally {
    await inventory.stop();
    await backend.close();
  }
});
