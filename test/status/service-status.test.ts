import {afterEach, describe, expect, it} from 'vitest';
import {Inventory} from '../../src/inventory/inventory.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {RegistryHealth} from '../../src/registry/health.ts';
import type {Role} from '../../src/service/leadership.ts';
import {readinessOf, statusBodyOf, type ServiceState} from '../../src/status/service-status.ts';
import {StatusTracker} from '../../src/status/status.ts';
import {failedResult, okResult} from '../discovery/builders.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

describe('readiness and status of the service', () => {
  const clock = new FakeClock();
  const inventories: Inventory[] = [];
  afterEach(async () => {
    for (const inventory of inventories.splice(0)) await inventory.stop();
  });

  async function state(role: Role, options: {firstCycleDone?: boolean; pingFails?: boolean} = {}): Promise<ServiceState> {
    const backend = new MemoryBackend({clock});
    const inventory = new Inventory({backend, group: 'g1', clock});
    inventories.push(inventory);
    await inventory.start();
    const ping = options.pingFails ? () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:2379')) : () => backend.ping();
    return {
      group: 'g1',
      replica: 'replica-a',
      hostId: 'host-1',
      backend: {name: backend.name, ping},
      inventory,
      registryHealth: new RegistryHealth({backend: 'memory', clock, logger: silentLogger}),
      status: new StatusTracker(),
      role: () => role,
      firstCycleDone: () => options.firstCycleDone ?? false,
      scheduler: () => undefined,
    };
  }

  it('a follower is ready once the registry was read', async () => {
    expect(await readinessOf(await state({role: 'follower', leader: 'replica-b'}))).toEqual({ready: true, status: 'ready'});
  });

  it('a leader is not ready before its first cycle, then ready; degraded while no source has ever succeeded', async () => {
    const leader: Role = {role: 'leader', backend: new MemoryBackend({clock})};
    expect(await readinessOf(await state(leader))).toMatchObject({ready: false, status: 'not_ready', reason: 'the first discovery cycle has not completed yet'});
    const done = await state(leader, {firstCycleDone: true});
    done.status.recordSource(failedResult('us-east-1', '111111111111'), clock.now());
    expect(await readinessOf(done)).toMatchObject({ready: true, status: 'degraded', reason: expect.stringMatching(/^no discovery source has succeeded yet \(1 failing: throttled\)/)});
    done.status.recordSource(okResult('us-east-1', '111111111111', []), clock.now());
    expect(await readinessOf(done)).toEqual({ready: true, status: 'ready'});
  });

  it('an unreachable backend after a good first read: degraded, serving the last inventory, reason class only', async () => {
    const s = await state({role: 'follower'}, {pingFails: true});
    const readiness = await readinessOf(s);
    expect(readiness).toMatchObject({ready: true, status: 'degraded'});
    expect(readiness.reason).toMatch(/^registry reads failing \(unreachable\); serving the last known inventory$/);
    expect(s.registryHealth.faults()).toMatchObject([{operation: 'read', reason: 'unreachable'}]);
  });

  it('the status body names role, leader, backend and inventory state', async () => {
    const body = statusBodyOf(await state({role: 'follower', leader: 'replica-b'}));
    expect(body).toMatchObject({
      summary: expect.stringMatching(/^follower of replica-b; 0 clusters/),
      discovery_group: 'g1',
      replica: 'replica-a',
      role: 'follower',
      leader: 'replica-b',
      backend: {type: 'memory', synced: true, faults: []},
      inventory: {count: 0, stale: false},
      next_cycle: null,
      cycle_running: false,
    });
  });
});
