/**
 * Adversarial: the leader's election entry in etcd is deleted and put back (same key, value and
 * session lease, another create revision) while it leads — an etcd restored from a snapshot, an
 * operator deleting and re-putting the key by hand. The leader's fenced writes check that create
 * revision, so every one of them is refused from then on, while the replica still believes it
 * leads: its cycles register and remove nothing, indefinitely, and no other replica takes over
 * (the entry, alive on the leader's session, is still the oldest). The replica should notice its
 * fence is gone, step down and campaign again, so that a leader that can write exists — without a
 * cluster leaving the inventory on the way.
 */
import {Etcd3} from 'etcd3';
import {expect, it} from 'vitest';
import {kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {parseConfig} from '../../src/config/load.ts';
import {systemClock} from '../../src/core/clock.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {startService} from '../../src/service/service.ts';
import {startAwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {startTcpProxy} from '../helpers/tcp-proxy.ts';

const GROUP = 'fence';
const ACCOUNT = '111111111111';
const PREFIX = '/fence-recreated/';
const served = (name: string): string => `${name}-eks-us-east-1-${ACCOUNT}`;

describeOnEtcd('the leader\'s election entry recreated under it', (etcd) => {
  it('the leader steps down and leads again with a fence that holds, so the cluster found next is registered and none leaves', async () => {
    const key = {accessKeyId: 'AKIAFENCERECREATED01', secretAccessKey: 'fence-recreated-secret'};
    const aws = await startAwsServiceWorld({key, account: ACCOUNT, populate: (w) => w.addCluster(ACCOUNT, 'us-east-1', {name: 'a'})});
    // The service reaches etcd through a proxy that can hold back what etcd tells it, so it hears of
    // the delete and the put together, as after a restore (or a watch that resumed late).
    const proxy = await startTcpProxy(etcd.endpoint);
    const backend = await openEtcdBackend({endpoints: [proxy.endpoint], prefix: PREFIX, requestTimeoutMs: 2_000});
    const admin = new Etcd3({hosts: [etcd.endpoint]});
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: ${GROUP}
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: etcd, endpoints: ["${proxy.endpoint}"], prefix: ${PREFIX}}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
      'fence.yaml',
    );
    const svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger, backend});
    const stored = async (): Promise<string[]> => (await backend.list(kubeServerPrefix(GROUP))).map((i) => i.key.slice(kubeServerPrefix(GROUP).length));
    try {
      await expect.poll(stored, {timeout: 60_000, interval: 50}).toEqual([served('a')]);
      let deletes = 0;
      svc.inventory.subscribe((e) => {
        if (e.type === 'delete') deletes++;
      });

      proxy.hold();
      try {
        const [entry] = (await admin.getAll().prefix(`${PREFIX}election/${GROUP}/`).exec()).kvs;
        expect(entry, 'the service leads').toBeDefined();
        if (!entry) return;
        await admin.delete().key(entry.key).exec();
        // Same key, value and session lease: only its create revision differs.
        await admin.put(entry.key).value(entry.value).lease(entry.lease).exec();
      } finally {
        proxy.release();
      }
      aws.world.addCluster(ACCOUNT, 'us-east-1', {name: 'b'});

      // Cycles while it leads (the new term's first cycle runs by itself); never a cluster missing meanwhile.
      let missing = 0;
      const registered = async (): Promise<string[]> => {
        if (svc.inventory.get(served('a')) === undefined) missing++;
        if (svc.role() === 'leader') svc.trigger();
        return stored();
      };
      await expect
        .poll(registered, {timeout: 30_000, interval: 200, message: 'the cluster found after the entry was recreated is never registered: every write of the leader is refused'})
        .toEqual([served('a'), served('b')]);
      expect(svc.role()).toBe('leader');
      expect(deletes).toBe(0);
      expect(missing).toBe(0);
      // Both entries hang on a lease the leader keeps alive.
      for (const item of await backend.list(kubeServerPrefix(GROUP))) expect(item.lease).toBeDefined();
    } finally {
      await svc.stop({deregister: false});
      await backend.close();
      admin.close();
      await proxy.close();
      await aws.close();
    }
  }, 90_000);
});
