/**
 * Adversarial: etcd's space quota is exceeded (the NOSPACE alarm: puts and lease grants refused,
 * reads and keepalives served) when the service restarts with another `heartbeat.ttl`. Each
 * leadership term the restarted service tries fails (no new lease can be granted, no entry
 * re-put), and retries. With the TTL unchanged the previous run's lease is resumed and kept alive,
 * and the entries stay; with another TTL that lease was neither resumed nor kept alive, so it
 * lapsed and etcd deleted every entry, though no listing lacked any. The term loop is the
 * service's (src/service/terms.ts: open a heartbeat, re-announce the group, stop and retry on failure).
 */
import {Etcd3} from 'etcd3';
import {setTimeout as sleep} from 'node:timers/promises';
import {expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {describeOnEtcd} from '../helpers/etcd.ts';
import {eksDraft} from '../helpers/eks-draft.ts';

const GROUP = 'g';
const OLD_TTL = 8_000;
const NEW_TTL = 600_000;

describeOnEtcd('etcd NOSPACE across a restart with another heartbeat.ttl', (etcd) => {
  it('keeps every entry of the previous run while no term can write', async () => {
    const backend = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/nospace-ttl/', dialTimeoutMs: 2_000});
    const admin = new Etcd3({hosts: etcd.endpoint});
    const heartbeat = (ttlMs: number): Heartbeat =>
      new Heartbeat({backend, clock: systemClock, group: GROUP, ttlMs, hostId: 'host-a', hostname: 'discovery-0', version: 't', retry: {attempts: 1, baseMs: 10}});
    let memberID = '';
    try {
      const previous = heartbeat(OLD_TTL);
      await previous.start();
      for (const name of ['a', 'b']) await previous.announce(eksDraft(name));
      await previous.stop({deregister: false});

      memberID = (await admin.maintenance.status()).header.member_id;
      await admin.maintenance.alarm({action: 'Activate', memberID, alarm: 'Nospace'});

      // The restarted service's terms, as src/service/terms.ts runs them, for twice the old TTL.
      const until = Date.now() + 2 * OLD_TTL;
      let wrote = false;
      while (Date.now() < until) {
        const hb = heartbeat(NEW_TTL);
        try {
          await hb.start();
          for (const name of ['a', 'b']) await hb.announce(eksDraft(name));
          wrote = true;
        } catch {
          // A failed term: stopped, retried.
        }
        await sleep(1_000);
        await hb.stop({deregister: false});
      }
      expect(wrote).toBe(false);

      const keys = (await admin.getAll().prefix(`/nospace-ttl/${kubeServerPrefix(GROUP)}`).keys()).sort();
      expect(keys).toEqual([`/nospace-ttl/${kubeServerPrefix(GROUP)}a`, `/nospace-ttl/${kubeServerPrefix(GROUP)}b`]);
    } finally {
      if (memberID) await admin.maintenance.alarm({action: 'Deactivate', memberID, alarm: 'Nospace'}).catch(() => undefined);
      admin.close();
      await backend.close();
    }
  }, 60_000);
});
