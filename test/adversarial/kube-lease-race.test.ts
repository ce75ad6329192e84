/**
 * Adversarial: the Kubernetes registry judges each entry by its Lease. `list` (what readers serve)
 * and `reapExpired` (what the leader deletes) read entries and Leases in two calls. When a new
 * Lease is granted and the entries moved onto it (a take-over re-announce, a heartbeat that
 * re-grants) between the Lease list and the entry list, the entry names a Lease the first list
 * never saw: it must not be hidden from readers, nor deleted as expired.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import type {KubeClient, KubeRequest} from '../../src/registry/kube-client.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let kube: KubeEnv;

beforeAll(async () => {
  kube = await startKubeEnv();
});

afterAll(async () => {
  await kube.close();
});

/**
 * The real client, except that one kind of call is held: `before` holds the request until
 * `release` (the API server answers with the state of then), `after` holds the answer it got
 * (the state of before). `reached` resolves when the first such call is held.
 */
function holding(client: KubeClient, what: (req: KubeRequest) => boolean, when: 'before' | 'after'): {client: KubeClient; reached: Promise<void>; release: () => void; arm: () => void} {
  let release = (): void => undefined;
  let gate = Promise.resolve();
  let reached = (): void => undefined;
  const result = {
    client: undefined as unknown as KubeClient,
    reached: Promise.resolve(),
    release: () => release(),
    arm: () => {
      gate = new Promise<void>((resolve) => (release = resolve));
      result.reached = new Promise<void>((resolve) => (reached = resolve));
    },
  };
  result.client = {
    server: client.server,
    namespace: client.namespace,
    watch: (...args) => client.watch(...args),
    async request(req: KubeRequest) {
      if (!(req.method === 'GET' && what(req))) return client.request(req);
      if (when === 'before') {
        reached();
        await gate;
        return client.request(req);
      }
      const answer = await client.request(req);
      reached();
      await gate;
      return answer;
    },
  };
  return result;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('an entry moved onto a new Lease while it is being read', () => {
  for (const what of ['list', 'reapExpired'] as const) {
    it(`${what} neither hides nor deletes it`, async () => {
      const writer = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'leader'});
      const slow = holding(await kube.client(), (req) => req.path.endsWith('/kubeservers'), 'before');
      const reader = new KubernetesBackend({client: slow.client, namespace: 'kd', clock: systemClock, identity: 'reader'});
      const key = `kube_servers/race/${what}`;
      try {
        const first = await writer.grantLease(60_000);
        await writer.put(key, '{"v":1}', {lease: first});

        slow.arm();
        const reading = what === 'list' ? reader.list('kube_servers/race/') : reader.reapExpired();
        await slow.reached;
        // Lets a Lease list sent alongside the entry list be answered first (the order is the API server's).
        await sleep(100);
        // The take-over: a new Lease, the entry re-announced onto it, the old Lease revoked.
        const second = await writer.grantLease(60_000);
        await writer.put(key, '{"v":1}', {lease: second});
        await writer.revokeLease(first);
        slow.release();
        const result = await reading;

        if (what === 'list') expect((result as {key: string}[]).map((i) => i.key)).toEqual([key]);
        expect((await writer.get(key))?.value).toBe('{"v":1}');
      } finally {
        slow.release();
        await reader.close();
        await writer.close();
      }
    });
  }
});

describe('a watcher whose entry moves onto a new Lease while a Lease check is under way', () => {
  it('emits no delete for it', async () => {
    const writer = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock: systemClock, identity: 'leader'});
    const slow = holding(await kube.client(), (req) => req.path.endsWith('/leases'), 'after');
    const reader = new KubernetesBackend({client: slow.client, namespace: 'kd', clock: systemClock, identity: 'reader', purgeIntervalMs: 100});
    const key = 'kube_servers/race-watch/a';
    const events: {type: string; key: string}[] = [];
    const watcher = await reader.watch('kube_servers/race-watch/', (e) => events.push({type: e.type, key: e.type === 'put' ? e.item.key : e.key}));
    const until = async (what: () => boolean): Promise<void> => {
      for (let i = 0; i < 200 && !what(); i++) await sleep(25);
      expect(what()).toBe(true);
    };
    try {
      const first = await writer.grantLease(60_000);
      await writer.put(key, '{"v":1}', {lease: first});
      await until(() => events.length === 1);

      // A Lease check's answer is held: it is the state from before the take-over.
      slow.arm();
      await slow.reached;
      const second = await writer.grantLease(60_000);
      await writer.put(key, '{"v":1}', {lease: second});
      await until(() => events.length === 2);
      slow.release();
      // The next check (answered after the take-over) has run too.
      slow.arm();
      await slow.reached;
      slow.release();
      expect(events).toEqual([{type: 'put', key}, {type: 'put', key}]);
    } finally {
      slow.release();
      await watcher.close();
      await reader.close();
      await writer.close();
    }
  });
});
