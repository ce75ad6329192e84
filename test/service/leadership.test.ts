import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {openEtcdBackend} from '../../src/registry/etcd.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {createLeadership, type Role} from '../../src/service/leadership.ts';
import {describeWithEtcd, startEtcd, type TestEtcd} from '../helpers/etcd.ts';

describe('createLeadership', () => {
  it.each(['memory', 'sqlite'])('with %s storage this process is the leader at once and writes through the backend itself', async (storageType) => {
    const backend = new MemoryBackend({clock: systemClock});
    const leadership = createLeadership({backend, storageType, group: 'g1', replica: 'r1', clock: systemClock, logger: silentLogger});
    const roles: Role[] = [];
    await leadership.start((role) => roles.push(role));
    expect(roles).toEqual([{role: 'leader', backend}]);
    expect(leadership.current()).toEqual({role: 'leader', backend});
    await leadership.stop();
    await backend.close();
  });
});

describeWithEtcd('createLeadership on etcd', () => {
  let etcd: TestEtcd;
  beforeAll(async () => {
    etcd = await startEtcd();
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  it('reports one role change per transition: the first replica leads (fenced backend), the second follows and names it, then takes over', async () => {
    const open = () => openEtcdBackend({endpoints: [etcd.endpoint], prefix: '/leadership-test/', requestTimeoutMs: 1_000});
    const [backendA, backendB] = [await open(), await open()];
    // Longer than the test: a 2 s session stepped A down whenever a loaded machine stalled the
    // event loop past its renew deadline. B takes over because A resigns in stop(), not by a lapse.
    const options = {storageType: 'etcd', group: 'g1', sessionTtlMs: 120_000, clock: systemClock, logger: silentLogger};
    const a = createLeadership({...options, backend: backendA, replica: 'replica-a'});
    const b = createLeadership({...options, backend: backendB, replica: 'replica-b'});
    const rolesA: Role[] = [];
    const rolesB: Role[] = [];
    await a.start((role) => rolesA.push(role));
    await b.start((role) => rolesB.push(role));
    expect(rolesA.map((r) => r.role)).toEqual(['leader']);
    expect(rolesA[0]?.role === 'leader' && rolesA[0].backend).not.toBe(backendA);
    expect(rolesB).toEqual([{role: 'follower', leader: 'replica-a'}]);
    await a.stop();
    await vi.waitFor(() => expect(b.current().role).toBe('leader'), {timeout: 10_000});
    expect(rolesB.map((r) => r.role)).toEqual(['follower', 'leader']);
    await b.stop();
    await Promise.all([backendA.close(), backendB.close()]);
  });
});
