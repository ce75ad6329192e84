/**
 * Adversarial: etcd compacts its history while a replica pages through a large listing. Every page
 * after the first is read at the first page's revision; once that revision is compacted
 * (`--auto-compaction-retention` short, or an operator's `etcdctl compact`), the read fails with
 * "required revision has been compacted". On a registry that takes several pages to list, under
 * aggressive compaction, every listing could fail: a fresh replica's inventory never syncs and
 * serves no cluster at all (/v1/kube_servers, /v1/watch, kubectl), and the leader's cycles cannot
 * read the registry. A listing that runs into a compacted revision should start again at the newest
 * one (a few times at most) and return one consistent snapshot.
 *
 * The compaction is made by a wrapper around the real etcd client: right before a later page is
 * read, another client writes and compacts the history up to that write.
 */
import {Etcd3, type IRangeRequest} from 'etcd3';
import {expect, it} from 'vitest';
import {kubeServerKey, kubeServerPrefix} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {EtcdBackend} from '../../src/registry/etcd.ts';
import {compact, describeOnEtcd} from '../helpers/etcd.ts';

const GROUP = 'paged';
// More than one page of the backend's listing (500 keys a page).
const ENTRIES = 1_100;

function doc(name: string): string {
  return JSON.stringify({
    kind: 'kube_server',
    version: 'v3',
    metadata: {name},
    spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, labels: {}}, spec: {}}},
  });
}

const nameOf = (i: number): string => `c${String(i).padStart(5, '0')}`;

/**
 * A real client whose later listing pages (a range at a fixed revision) are each preceded by a
 * write and a compaction up to it, `times` times in all (Infinity: on every such page).
 */
function compactingClient(endpoint: string, prefix: string, times: number, before?: () => Promise<void>): {client: Etcd3; compactions: () => number} {
  const client = new Etcd3({hosts: [endpoint]});
  const admin = new Etcd3({hosts: [endpoint]});
  let done = 0;
  const range = client.kv.range.bind(client.kv);
  client.kv.range = async (req: IRangeRequest, options) => {
    const laterPage = req.revision !== undefined && req.range_end !== undefined && req.keys_only !== true;
    if (laterPage && done < times) {
      done++;
      await before?.();
      const marker = await admin.put(`${prefix}unrelated/marker`).value(String(done)).exec();
      await compact(endpoint, marker.header.revision);
    }
    return range(req, options);
  };
  const close = client.close.bind(client);
  client.close = () => {
    admin.close();
    close();
  };
  return {client, compactions: () => done};
}

async function fill(endpoint: string, prefix: string): Promise<void> {
  const writer = new Etcd3({hosts: [endpoint]});
  try {
    for (let i = 0; i < ENTRIES; i += 100) {
      await Promise.all(
        Array.from({length: Math.min(100, ENTRIES - i)}, (_, j) => writer.put(`${prefix}${kubeServerKey(GROUP, nameOf(i + j))}`).value(doc(nameOf(i + j))).exec()),
      );
    }
  } finally {
    writer.close();
  }
}

describeOnEtcd('etcd compacting its history during a paged listing', (etcd) => {
  it('a fresh replica\'s inventory serves every cluster although etcd compacted the revision of its first listing', async () => {
    const prefix = '/list-compaction-inventory/';
    await fill(etcd.endpoint, prefix);
    const {client, compactions} = compactingClient(etcd.endpoint, prefix, 1);
    const backend = new EtcdBackend(client, {endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 5_000});
    // The replica's re-list is an hour away: only its first listing counts.
    const inventory = new Inventory({backend, group: GROUP, clock: systemClock, resyncMs: 3_600_000});
    try {
      await inventory.start();
      expect(compactions()).toBe(1);
      expect(inventory.list(), 'every cluster is missing for readers of this replica: its listing failed on the compacted revision').toHaveLength(ENTRIES);
      expect(inventory.synced).toBe(true);
    } finally {
      await inventory.stop();
      await backend.close();
    }
  }, 60_000);

  it('a listing that started again returns one snapshot of the newest revision, not pages of two revisions', async () => {
    const prefix = '/list-compaction-snapshot/';
    await fill(etcd.endpoint, prefix);
    const other = new Etcd3({hosts: [etcd.endpoint]});
    // Between the first page and the compaction, a cluster on the first page leaves and a new one
    // arrives there: the listing must show both changes, as a listing at that revision would.
    const {client} = compactingClient(etcd.endpoint, prefix, 1, async () => {
      await other.delete().key(`${prefix}${kubeServerKey(GROUP, nameOf(3))}`).exec();
      await other.put(`${prefix}${kubeServerKey(GROUP, 'b-new')}`).value(doc('b-new')).exec();
    });
    const backend = new EtcdBackend(client, {endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 5_000});
    try {
      const names = (await backend.list(kubeServerPrefix(GROUP))).map((item) => item.key.slice(kubeServerPrefix(GROUP).length));
      expect(names).toHaveLength(ENTRIES);
      expect(names).toContain('b-new');
      expect(names).not.toContain(nameOf(3));
      expect(new Set(names).size).toBe(names.length);
    } finally {
      other.close();
      await backend.close();
    }
  }, 60_000);

  it('a listing compacted under it every time gives up after a few attempts, with etcd\'s reason', async () => {
    const prefix = '/list-compaction-endless/';
    await fill(etcd.endpoint, prefix);
    const {client, compactions} = compactingClient(etcd.endpoint, prefix, Number.POSITIVE_INFINITY);
    const backend = new EtcdBackend(client, {endpoints: [etcd.endpoint], prefix, requestTimeoutMs: 5_000});
    try {
      await expect(backend.list(kubeServerPrefix(GROUP))).rejects.toThrow(/compacted/);
      // Bounded: it neither loops forever nor gives up at the first compaction it could outrun.
      expect(compactions()).toBeGreaterThan(1);
      expect(compactions()).toBeLessThanOrEqual(10);
    } finally {
      await backend.close();
    }
  }, 60_000);
});
