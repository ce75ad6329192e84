/**
 * Adversarial: on `storage: kubernetes` an entry lives while its Lease's renewTime + duration is
 * in the future, judged by the reader's clock. During an API-server outage nobody can renew; when
 * the API answers again, every Lease looks expired before its holder has had a chance to renew,
 * and a reader serves an empty inventory (the leader's reaper even deletes the entries). A backend
 * that was down must not cost the inventory: etcd extends its leases after an outage for the same
 * reason.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {FakeClock} from '../helpers/fake-clock.ts';
import {KubernetesBackend} from '../../src/registry/kubernetes.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

let kube: KubeEnv;

beforeAll(async () => {
  kube = await startKubeEnv();
});

afterAll(async () => {
  await kube.close();
});

describe('entries after an API-server outage longer than their Lease', () => {
  it('are still served when the API answers again, until the holder had its chance to renew', async () => {
    const clock = new FakeClock();
    const writer = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock, identity: 'leader'});
    const reader = new KubernetesBackend({client: await kube.client(), namespace: 'kd', clock, identity: 'reader'});
    try {
      const lease = await writer.grantLease(3_000);
      await writer.put('kube_servers/outage/a', '{"v":1}', {lease});
      expect((await reader.list('kube_servers/outage/')).map((i) => i.key)).toEqual(['kube_servers/outage/a']);

      // The API server is down for 10 s: reads fail (and are kept by the inventory), nothing is renewed.
      kube.server.setFault(() => ({status: 503, body: '{"kind":"Status","code":503,"reason":"ServiceUnavailable"}'}));
      for (let t = 0; t < 10; t++) {
        await clock.advance(1_000);
        await expect(reader.list('kube_servers/outage/')).rejects.toThrow();
      }
      kube.server.setFault(undefined);

      // Back: the holder's next keepalive is at most one interval away; the entry has not expired.
      expect((await reader.list('kube_servers/outage/')).map((i) => i.key)).toEqual(['kube_servers/outage/a']);
    } finally {
      kube.server.setFault(undefined);
      await reader.close();
      await writer.close();
    }
  });
});
