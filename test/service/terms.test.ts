import {afterEach, describe, expect, it} from 'vitest';
import {kubeServerPrefix, type KubeServerDraft} from '../../heartbeats/kube-server.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {intervalSchedule} from '../../src/scheduler/schedule.ts';
import {Scheduler} from '../../src/scheduler/scheduler.ts';
import {openRuntime, type Runtime, type Writer} from '../../src/service/runtime.ts';
import {LeadershipTerms} from '../../src/service/terms.ts';
import {captureIo} from '../helpers/env.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const CONFIG = parseConfig('version: v1\ndiscovery_service:\n  discovery_group: g1\n  poll_interval: 5m\n  aws: [{types: [eks], regions: [us-east-1]}]\nstorage: {type: memory}\n', 'discovery.yaml');

function draft(name: string): KubeServerDraft {
  return {
    kind: 'kube_server',
    version: 'v3',
    metadata: {name, labels: {}},
    spec: {cluster: {kind: 'kube_cluster', version: 'v3', metadata: {name, description: '', labels: {}}, spec: {}}, proxy_ids: []},
  };
}

describe('LeadershipTerms', () => {
  const clock = new FakeClock();
  let runtime: Runtime;
  const writers: Writer[] = [];
  const leaders: boolean[] = [];

  async function terms(backend = new MemoryBackend({clock})): Promise<{terms: LeadershipTerms; backend: MemoryBackend; cycles: () => number}> {
    runtime = await openRuntime(CONFIG, captureIo({}).io, {clock, logTo: 'stdout', logger: silentLogger, backend});
    let cycles = 0;
    const t = new LeadershipTerms({
      config: CONFIG,
      runtime,
      clock,
      log: silentLogger,
      metrics: {setLeader: (leader) => void leaders.push(leader)},
      makeScheduler: (writer) => {
        writers.push(writer);
        return new Scheduler({clock, next: intervalSchedule(300_000), run: async () => void cycles++});
      },
      nextCycle: () => new Promise<CycleReport>(() => undefined),
    });
    return {terms: t, backend, cycles: () => cycles};
  }

  afterEach(async () => {
    writers.length = 0;
    leaders.length = 0;
    await runtime?.close();
  });

  /** Lets the queued role change run. */
  async function settle(t: LeadershipTerms): Promise<void> {
    await clock.advance(0);
    for (let i = 0; i < 50 && t.role.role === 'leader' && !t.scheduler; i++) await clock.advance(0);
  }

  it('a leader runs a term: a heartbeat writer and a scheduler whose first cycle starts at once', async () => {
    const {terms: t, backend, cycles} = await terms();
    expect(t.scheduler).toBeUndefined();
    t.onRole({role: 'leader', backend});
    await settle(t);
    expect(t.scheduler).toBeDefined();
    expect(writers).toHaveLength(1);
    expect(cycles()).toBe(1);
    expect(leaders).toEqual([true]);
    await t.stop(0, false);
  });

  it('a deposed leader ends its term: no scheduler, entries left to expire rather than deleted', async () => {
    const {terms: t, backend} = await terms();
    t.onRole({role: 'leader', backend});
    await settle(t);
    await writers[0]?.heartbeat.announce(draft('prod'));
    t.onRole({role: 'follower', leader: 'other'});
    await settle(t);
    expect(t.scheduler).toBeUndefined();
    expect(t.role).toEqual({role: 'follower', leader: 'other'});
    expect((await backend.list(kubeServerPrefix('g1'))).map((i) => i.key)).toEqual([`${kubeServerPrefix('g1')}prod`]);
    expect(leaders).toEqual([true, false]);
    await t.stop(0, false);
  });

  it('after stop, role changes begin no term; stop with deregister removes the entries', async () => {
    const {terms: t, backend} = await terms();
    t.onRole({role: 'leader', backend});
    await settle(t);
    await writers[0]?.heartbeat.announce(draft('prod'));
    await t.stop(0, true);
    expect(await backend.list(kubeServerPrefix('g1'))).toEqual([]);
    t.onRole({role: 'leader', backend});
    await settle(t);
    expect(t.scheduler).toBeUndefined();
    expect(writers).toHaveLength(1);
  });
});
