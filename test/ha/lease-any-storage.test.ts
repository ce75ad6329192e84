/**
 * `leader_election: {type: kubernetes_lease}` on a storage other than kubernetes: two replicas on
 * one real etcd elect their leader on a Lease of the fake API server. The leader cut off from
 * the API server is deposed and its writes to etcd are refused; the other leads within the lease
 * duration plus one retry period of fake time. The config refuses the Lease with sqlite/memory.
 */
import {join} from 'node:path';
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {ConfigError, parseConfig} from '../../src/config/load.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {FencedError} from '../../src/core/errors.ts';
import {electionLeaseName} from '../../src/ha/lease-election.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import type {RegistryBackend} from '../../src/registry/backend.ts';
import {openEtcdBackend, type EtcdBackend} from '../../src/registry/etcd.ts';
import {createLeadership, type Leadership, type Role} from '../../src/service/leadership.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';
import type {KubeEnv} from '../kubernetes/kube-env.ts';
import {quiet, startKubeEnv} from '../kubernetes/kube-env.ts';
import {eventually} from '../registry/contract.ts';

const LEASE_MS = 15_000;
const RETRY_MS = 2_000;

describe('leader_election config', () => {
  const base = (storage: string) => `version: v1\ndiscovery_service:\n  discovery_group: mgmt\nstorage: ${storage}\nleader_election:\n  type: kubernetes_lease\n  namespace: kd\n`;

  it('is accepted with etcd and kubernetes storage, lease_duration defaulting to 15s', () => {
    const config = parseConfig(base('{type: etcd, endpoints: ["http://127.0.0.1:2379"]}'), 'discovery.yaml');
    expect(config.leader_election).toEqual({type: 'kubernetes_lease', namespace: 'kd', lease_duration: 15_000});
    expect(parseConfig(base('{type: kubernetes, namespace: kd}'), 'discovery.yaml').leader_election?.type).toBe('kubernetes_lease');
  });

  it.each(['{type: sqlite, path: ./x.db}', '{type: memory}'])('is refused with %s, located at leader_election.type', (storage) => {
    let problems: ConfigError['problems'] = [];
    try {
      parseConfig(base(storage), 'discovery.yaml');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      problems = (error as ConfigError).problems;
    }
    expect(problems).toEqual([expect.objectContaining({path: 'leader_election.type', line: 6, column: 9})]);
    expect(problems[0]?.message).toMatch(/storage the replicas share \(etcd or kubernetes\).*found kubernetes_lease with storage (sqlite|memory)/);
  });

  it('names an unknown type and a too short lease', () => {
    expect(() => parseConfig(base('{type: etcd, endpoints: ["http://127.0.0.1:2379"]}').replace('kubernetes_lease', 'zookeeper'), 'discovery.yaml')).toThrow(/discovery\.yaml:6:9: leader_election\.type/);
    expect(() => parseConfig(`${base('{type: etcd, endpoints: ["http://127.0.0.1:2379"]}')}  lease_duration: 1s\n`, 'discovery.yaml')).toThrow(/discovery\.yaml:8:19: leader_election\.lease_duration: expected a duration between 2s/);
  });
});

describeWithEtcd('Lease election with etcd storage', () => {
  let etcd: TestEtcd;
  let env: KubeEnv;
  let clock: FakeClock;
  const backends: EtcdBackend[] = [];
  const running: Leadership[] = [];

  beforeEach(async () => {
    etcd = await startEtcd();
    env = await startKubeEnv();
    clock = new FakeClock();
  });
  afterEach(async () => {
    env.server.setFault(undefined);
    for (const l of running.splice(0)) await l.stop();
    for (const b of backends.splice(0)) await b.close();
    await env.close();
    await etcd.stop();
  });

  /** A replica: its own etcd client and a kubeconfig with its own token (so faults can target it). */
  async function replica(name: string): Promise<{leadership: Leadership; role: () => Role; backend: EtcdBackend}> {
    await env.clientAs(name);
    const backend = await openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/lease-any/', requestTimeoutMs: 2_000});
    backends.push(backend);
    const leadership = createLeadership({
      backend,
      storageType: 'etcd',
      group: 'mgmt',
      replica: name,
      sessionTtlMs: 60_000,
      leaderElection: {type: 'kubernetes_lease', kubeconfig: join(env.dir, `kubeconfig-${name}`), namespace: 'kd', lease_duration: LEASE_MS},
      clock,
      logger: silentLogger,
    });
    running.push(leadership);
    let role: Role = {role: 'follower'};
    await leadership.start((r) => (role = r));
    return {leadership, role: () => role, backend};
  }

  const lease = () => env.server.getObject('coordination.k8s.io', 'leases', 'kd', electionLeaseName('mgmt'))?.['spec'] as Record<string, unknown> | undefined;

  /** One retry period of fake time; each round's HTTP runs in real time. */
  const tick = async (): Promise<void> => {
    await clock.advance(RETRY_MS);
    await quiet(env.server);
  };
  const tickUntil = (check: () => void): Promise<void> => eventually(async () => {
    await tick();
    check();
  }, 20_000);

  it('elects on the Lease; the deposed leader cannot write to etcd; the other leads within the lease duration plus one retry period', async () => {
    const a = await replica('replica-a');
    const b = await replica('replica-b');
    expect(a.role().role).toBe('leader');
    expect(b.role()).toEqual({role: 'follower', leader: 'replica-a'});
    expect(lease()).toMatchObject({holderIdentity: 'replica-a', leaseDurationSeconds: 15, leaseTransitions: 0});
    const aView = (a.role() as {backend: RegistryBackend}).backend;
    await aView.put('probe/a', 'from a');

    // replica-a loses the API server (503 on every call); etcd stays reachable to it.
    const cutAt = clock.now();
    env.server.setFault((call) => (call.user === 'replica-a' ? {status: 503, body: 'unavailable'} : undefined));
    await tickUntil(() => expect(a.role().role).toBe('follower'));
    // Deposed by its own clock before anyone else may lead: its writes are refused, etcd unchanged.
    await expect(aView.put('probe/b', 'from deposed a')).rejects.toBeInstanceOf(FencedError);
    await expect(aView.delete('probe/a')).rejects.toBeInstanceOf(FencedError);
    expect(await b.backend.get('probe/b')).toBeUndefined();
    expect((await b.backend.get('probe/a'))?.value).toBe('from a');

    await tickUntil(() => expect(b.role().role).toBe('leader'));
    expect(clock.now() - cutAt).toBeLessThanOrEqual(LEASE_MS + 2 * RETRY_MS);
    expect(lease()).toMatchObject({holderIdentity: 'replica-b', leaseTransitions: 1});
    const bView = (b.role() as {backend: RegistryBackend}).backend;
    await bView.put('probe/b', 'from b');
    expect((await a.backend.get('probe/b'))?.value).toBe('from b');
  });
});
