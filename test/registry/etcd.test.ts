/**
 * The etcd backend against a real etcd on loopback: the shared contract (time-dependent cases on
 * real 1 s leases), then what only etcd does — keepalive cost at the wire, watches that resume,
 * prefix isolation, fenced writes, and error messages that name the endpoint but no secret.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {Etcd3} from 'etcd3';
import {afterAll, afterEach, beforeAll, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {FencedError} from '../../src/core/errors.ts';
import type {RegistryBackend, WatchEvent} from '../../src/registry/backend.ts';
import {etcdBackendFromConfig, openEtcdBackend, type EtcdBackend} from '../../src/registry/etcd.ts';
import {compact, describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import {startTcpProxy} from '../helpers/tcp-proxy.ts';
import {backendContract, eventually} from './contract.ts';

describeWithEtcd('etcd registry backend', () => {
  let etcd: TestEtcd;
  let prefixes = 0;
  const opened: RegistryBackend[] = [];

  /** A backend under a fresh prefix, so tests never see each other's keys. */
  async function open(endpoint = etcd.endpoint, prefix = `/test-${prefixes++}/`): Promise<EtcdBackend> {
    const backend = await openEtcdBackend({endpoints: [endpoint], prefix, requestTimeoutMs: 2_000});
    opened.push(backend);
    return backend;
  }

  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((b) => b.close().catch(() => undefined)));
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  backendContract(
    'etcd',
    async () => ({
      backend: await open(),
      // etcd keeps real time: the time-dependent cases wait, on 1 s leases.
      advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    }),
    {supportsFakeClock: false, realTimeTtlMs: 1_000},
  );

  it('keeps 10,000 entries alive with one keepalive message and no rewrite, the same as for 10', async () => {
    const backend = await open();
    const cost: Array<{keepalives: number; puts: number; calls: number}> = [];
    for (const count of [10, 10_000]) {
      const lease = await backend.grantLease(60_000);
      const keys = Array.from({length: count}, (_, i) => `${backend.prefix}kube_servers/g${count}/c${String(i).padStart(5, '0')}`);
      await seed(etcd.endpoint, keys, lease.id);
      const before = await serverCounters(etcd.endpoint);
      const calls = backend.stats.keepAliveCalls;
      await backend.keepAlive(lease);
      const after = await serverCounters(etcd.endpoint);
      cost.push({keepalives: after.keepalives - before.keepalives, puts: after.puts - before.puts, calls: backend.stats.keepAliveCalls - calls});
      expect(await backend.list(`kube_servers/g${count}/`)).toHaveLength(count);
    }
    expect(cost).toEqual([
      {keepalives: 1, puts: 0, calls: 1},
      {keepalives: 1, puts: 0, calls: 1},
    ]);
  });

  it('watch from a revision replays what came after it, then follows live changes', async () => {
    const backend = await open();
    const a = await backend.put('k/a', '1');
    const b = await backend.put('k/b', '1');
    await backend.delete('k/a');
    const events: WatchEvent[] = [];
    await backend.watch('k/', (e) => events.push(e), {fromRevision: a.revision});
    const c = await backend.put('k/c', '1');
    await eventually(() => expect(events).toHaveLength(3));
    expect(events[0]).toEqual({type: 'put', item: b});
    expect(events[1]).toMatchObject({type: 'delete', key: 'k/a'});
    expect(events[2]).toEqual({type: 'put', item: c});
  });

  it('a watch cut off from etcd resumes where it stopped: nothing lost, nothing twice', async () => {
    const proxy = await startTcpProxy(etcd.endpoint);
    try {
      const writer = await open();
      const watching = await open(proxy.endpoint, writer.prefix);
      const seen: string[] = [];
      await watching.watch('k/', (e) => seen.push(e.type === 'put' ? `put ${e.item.key}=${e.item.value}` : `delete ${e.key}`));
      await writer.put('k/1', 'before');
      await eventually(() => expect(seen).toEqual(['put k/1=before']));

      proxy.cut();
      await writer.put('k/2', 'during');
      await writer.put('k/1', 'during');
      await writer.delete('k/2');
      proxy.restore();
      await writer.put('k/3', 'after');

      await eventually(() => expect(seen).toHaveLength(5), 15_000);
      expect(seen).toEqual(['put k/1=before', 'put k/2=during', 'put k/1=during', 'delete k/2', 'put k/3=after']);
    } finally {
      await proxy.close();
    }
  });

  it('a watch whose history was compacted away: refused at start, restarted from now when it happens mid-way', async () => {
    const backend = await open();
    const first = await backend.put('k/a', '1');
    await backend.put('k/a', '2');
    await compact(etcd.endpoint, (await backend.put('k/a', '3')).revision);
    await expect(backend.watch('k/', () => undefined, {fromRevision: first.revision})).rejects.toThrow(/etcd watch at .* failed: .*compacted/);

    const proxy = await startTcpProxy(etcd.endpoint);
    try {
      const watching = await open(proxy.endpoint, backend.prefix);
      const seen: string[] = [];
      await watching.watch('k/', (e) => seen.push(e.type === 'put' ? e.item.value : `delete ${e.key}`));
      proxy.cut();
      const missed = await backend.put('k/a', 'missed');
      await backend.put('k/a', 'compacted');
      await compact(etcd.endpoint, (await backend.put('k/b', 'x')).revision);
      proxy.restore();
      // The watch restarts from "now" at some point after reconnecting; keep writing until it sees one.
      await eventually(async () => {
        await backend.put('k/c', 'after');
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(seen).toContain('after');
      }, 15_000);
      expect(seen).not.toContain(missed.value);
    } finally {
      await proxy.close();
    }
  });

  it('two prefixes on one etcd never see each other', async () => {
    const blue = await open(etcd.endpoint, '/blue/');
    const green = await open(etcd.endpoint, '/green/');
    const greenEvents: WatchEvent[] = [];
    await green.watch('', (e) => greenEvents.push(e));
    await blue.put('kube_servers/g/a', 'blue');
    await green.put('kube_servers/g/a', 'green');
    await blue.delete('kube_servers/g/a');
    expect((await green.list('')).map((i) => [i.key, i.value])).toEqual([['kube_servers/g/a', 'green']]);
    expect(await blue.list('')).toEqual([]);
    await eventually(() => expect(greenEvents).toHaveLength(1));
    expect(greenEvents[0]).toMatchObject({type: 'put', item: {key: 'kube_servers/g/a', value: 'green'}});
  });

  it("a deposed leader's late writes are refused with FencedError and change nothing", async () => {
    const backend = await open();
    const won = await backend.put('election/g/lease-1', 'replica-a');
    const fenced = backend.withFence({key: 'election/g/lease-1', createRevision: won.revision});
    const lease = await backend.grantLease(60_000);
    const put = await fenced.put('kube_servers/g/a', 'v1', {lease});
    expect(put).toMatchObject({key: 'kube_servers/g/a', value: 'v1', lease: lease.id});
    expect(await fenced.delete('kube_servers/g/gone')).toBe(false);

    // Replica A's session ends and a new campaign re-creates the key: the old fence no longer holds.
    await backend.delete('election/g/lease-1');
    await backend.put('election/g/lease-1', 'replica-b');
    await expect(fenced.put('kube_servers/g/a', 'late write')).rejects.toBeInstanceOf(FencedError);
    await expect(fenced.delete('kube_servers/g/a')).rejects.toBeInstanceOf(FencedError);
    await expect(fenced.revokeLease(lease)).rejects.toBeInstanceOf(FencedError);
    expect(await backend.get('kube_servers/g/a')).toMatchObject({value: 'v1', revision: put.revision});
    // Reads are not fenced.
    expect(await fenced.get('kube_servers/g/a')).toMatchObject({value: 'v1'});
  });

  it('names the endpoint when etcd is unreachable, never the password', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kd-etcd-'));
    try {
      const passwordFile = path.join(dir, 'password');
      await writeFile(passwordFile, 'hunter2-very-secret\n');
      const unreachable = 'http://127.0.0.1:1';
      const backend = await etcdBackendFromConfig(
        {type: 'etcd', endpoints: [unreachable], prefix: '/x/', username: 'root', password_file: passwordFile, dial_timeout: 500},
        {clock: systemClock},
      );
      opened.push(backend);
      const error = await backend.ping().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(error?.message).toContain('etcd ping at http://127.0.0.1:1 failed');
      expect(`${error?.message} ${String(error?.cause)} ${JSON.stringify(backend)}`).not.toContain('hunter2');
    } finally {
      await rm(dir, {recursive: true, force: true});
    }
  });
});

/** Writes many leased keys in transactions of 128 (etcd's limit): seeding, not the code under test. */
async function seed(endpoint: string, keys: readonly string[], lease: string): Promise<void> {
  const client = new Etcd3({hosts: endpoint});
  try {
    for (let i = 0; i < keys.length; i += 128) {
      const success = keys.slice(i, i + 128).map((key) => ({request_put: {key: Buffer.from(key), value: Buffer.from('{}'), lease}}));
      await client.kv.txn({success});
    }
  } finally {
    client.close();
  }
}

/** etcd's own gRPC counters: LeaseKeepAlive messages received and Put calls handled. */
async function serverCounters(endpoint: string): Promise<{keepalives: number; puts: number}> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const value = (pattern: RegExp): number => Number(pattern.exec(text)?.[1] ?? 0);
  return {
    keepalives: value(/^grpc_server_msg_received_total\{grpc_method="LeaseKeepAlive"[^}]*\} (\d+)/m),
    puts: value(/^grpc_server_started_total\{grpc_method="Put"[^}]*\} (\d+)/m),
  };
}
