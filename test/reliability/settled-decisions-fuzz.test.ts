// Random steps (retag, vanish, a failed source, probe health, an external delete, new static labels,
// a lost lease) over many cycles: after every cycle the registry holds exactly what discovery decided,
// though unchanged decisions reuse the registered entry as their document (reconcile settleUnchanged).
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {compileTagMatcher} from '../../matchers/index.ts';
import {builtInClouds} from '../../src/clouds/index.ts';
import type {DiscoveredCluster, SourceRef, SourceResult} from '../../src/core/types.ts';
import {runCycle, type CycleReport, type Registrar, type SourcePlanner} from '../../src/discovery/cycle.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {Inventory} from '../../src/inventory/inventory.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

const GROUP = 'fz';
const ACCOUNT = '111111111111';
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
const srcs: SourceRef[] = ['us-east-1', 'eu-west-1'].map((region) => ({id: `eks:${region}:${ACCOUNT}`, cloud: 'AWS', type: 'eks', region, account: ACCOUNT, matcherIndex: 0}));
function cluster(s: SourceRef, name: string, env: string, broken: boolean): DiscoveredCluster {
  const base = {cloud: 'AWS' as const, type: 'eks' as const, name, region: s.region, account: ACCOUNT, tags: {env}, status: 'ACTIVE', statusOk: true, authMode: 'API', kubernetesVersion: '1.30', id: `arn:aws:eks:${s.region}:${ACCOUNT}:cluster/${name}`, access: {kind: 'eks' as const, clusterName: name, region: s.region}, sourceId: s.id};
  return broken ? {...base, endpoint: `https://${name}.eks.amazonaws.com`, unreachable: {reason: 'invalid_ca', message: 'bad ca'}} : {...base, endpoint: `https://${name}.eks.amazonaws.com`, caData: CA};
}
function rng(seed: number): () => number { let s = seed >>> 0; return () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; }; }

describe('remembered and settled decisions over random steps', () => {
  let clock: FakeClock; let backend: MemoryBackend; let inventory: Inventory; let heartbeat: Heartbeat; let registrar: Registrar;
  beforeEach(async () => {
    clock = new FakeClock();
    backend = new MemoryBackend({clock});
    inventory = new Inventory({backend, group: GROUP, clock, resyncMs: 3_600_000});
    await inventory.start();
    heartbeat = new Heartbeat({backend, clock, group: GROUP, ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't', stored: (name, revision) => inventory.stored(name, revision)});
    await heartbeat.start();
    const base = createRegistrar(backend, heartbeat, GROUP);
    registrar = {...base, current: async () => Array.from(inventory.storedEntries(), ([, s]) => s)};
  });
  afterEach(async () => { await heartbeat.stop({deregister: false}); await inventory.stop(); await backend.close(); });

  it('registry matches the decisions over random steps', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const r = rng(seed);
      // state per source: name -> object
      const state = new Map<string, Map<string, DiscoveredCluster>>(srcs.map((s) => [s.id, new Map()]));
      let staticLabels: Record<string, string> = {};
      const failing = new Set<string>();
      const probed = new Map<string, {health: unknown; cluster: DiscoveredCluster}>();
      const matchers = new Map(srcs.map((x) => [x.id, compileTagMatcher({env: 'prod'})]));
      for (let step = 0; step < 30; step++) {
        const op = r();
        const s = srcs[Math.floor(r() * 2)]!;
        const names = ['a', 'b', 'c'];
        const n = names[Math.floor(r() * 3)]! + seed;
        const m = state.get(s.id)!;
        if (op < 0.2) m.set(n, cluster(s, n, r() < 0.5 ? 'prod' : 'dev', r() < 0.2));
        else if (op < 0.3) m.delete(n);
        else if (op < 0.35) { const l = inventory.list(); const e = l[Math.floor(r() * l.length)]; if (e) { probed.delete(e.metadata.name); await backend.delete(`kube_servers/${GROUP}/${e.metadata.name}`); } }
        else if (op < 0.4) { if (failing.has(s.id)) failing.delete(s.id); else failing.add(s.id); }
        else if (op < 0.45) staticLabels = r() < 0.5 ? {} : {team: `t${Math.floor(r() * 3)}`};
        else if (op < 0.6) {
          // a probe writes health on some entry
          const list = inventory.list();
          const e = list[Math.floor(r() * list.length)];
          if (e && !['invalid_ca', 'no_endpoint'].includes(e.status?.target_health?.reason ?? '')) {
            const health = {status: r() < 0.5 ? 'healthy' as const : 'unhealthy' as const, reason: `p${step}`, message: 'probe'};
            await registrar.announce({...e, status: {...e.status, target_health: health}});
            const region = e.spec.cluster.metadata.labels['region']!;
            const c = state.get(`eks:${region}:${ACCOUNT}`)?.get(e.spec.cluster.metadata.labels['teleport.internal/discovered-name']!);
            if (c) probed.set(e.metadata.name, {health, cluster: c});
          }
        }
        const planner: SourcePlanner = {plan: async () => ({failed: [], fetchers: srcs.map((src) => ({source: src, fetch: async (): Promise<SourceResult> => failing.has(src.id) ? {source: src, ok: false, clusters: [], malformed: [], error: {reason: 'other', code: 'X', message: 'x', operation: 'ListClusters'}} : {source: src, ok: true, clusters: [...state.get(src.id)!.values()], malformed: []}}))})};
        await clock.advance(1000);
        const report: CycleReport = await runCycle({planners: [planner], registrar, clock, discoveryGroup: GROUP, evaluateContext: {staticLabels, clouds: builtInClouds}, matcherFor: (x) => matchers.get(x.id)!, sourceConcurrency: 2});
        expect(report.applyErrors).toEqual([]);
        // invariants
        for (const src of srcs) {
          if (failing.has(src.id)) continue;
          for (const [name, c] of state.get(src.id)!) {
            const key = `${name}-eks-${src.region}-${ACCOUNT}`;
            const e = inventory.get(key);
            if (c.tags['env'] !== 'prod') { expect(e, `${seed}/${step} ${key} filtered`).toBeUndefined(); continue; }
            expect(e, `${seed}/${step} ${key} present`).toBeDefined();
            expect(e!.spec.cluster.metadata.labels['team']).toBe(staticLabels['team']);
            expect(e!.status?.stale).toBeUndefined();
            expect(e!.status?.ca_data).toBe(c.caData);
            const p = probed.get(key);
            if (p && p.cluster === c && !c.unreachable && e!.status?.discovered_at) expect(e!.status?.target_health, `${seed}/${step} ${key} probe health kept`).toEqual(p.health);
            if (c.unreachable) expect(e!.status?.target_health?.reason).toBe('invalid_ca');
            else expect(e!.status?.target_health?.reason).not.toBe('invalid_ca');
            expect((await backend.get(`kube_servers/${GROUP}/${key}`))?.lease).toBe(heartbeat.lease?.id);
            const raw = JSON.parse((await backend.get(`kube_servers/${GROUP}/${key}`))!.value);
            expect(raw.metadata.revision, 'no revision stored').toBeUndefined();
          }
          for (const e of inventory.list()) {
            if (e.spec.cluster.metadata.labels['region'] !== src.region) continue;
            const name = e.spec.cluster.metadata.labels['teleport.internal/discovered-name'];
            const c = state.get(src.id)!.get(name!);
            expect(c && c.tags['env'] === 'prod', `${seed}/${step} ${e.metadata.name} should be gone`).toBeTruthy();
          }
        }
      }
    }
  });

  it('a lost lease: entries re-put by the heartbeat, then steady cycles keep them on the new lease', async () => {
    const s = srcs[0]!;
    const clusters = [cluster(s, 'x', 'prod', false), cluster(s, 'y', 'prod', false)];
    const planner: SourcePlanner = {plan: async () => ({failed: [], fetchers: [{source: s, fetch: async (): Promise<SourceResult> => ({source: s, ok: true, clusters, malformed: []})}]})};
    const matcher = compileTagMatcher({env: 'prod'});
    const run = async (): Promise<CycleReport> => { await clock.advance(1000); return runCycle({planners: [planner], registrar, clock, discoveryGroup: GROUP, evaluateContext: {staticLabels: {}, clouds: builtInClouds}, matcherFor: () => matcher, sourceConcurrency: 1}); };
    await run(); await run(); await run();
    const old = heartbeat.lease!;
    await backend.revokeLease(old);
    const pending = run();
    for (let i = 0; i < 20; i++) { await clock.advance(500); for (let j = 0; j < 20; j++) await new Promise((res) => setImmediate(res)); }
    const r1 = await pending;
    expect(r1.applyErrors).toEqual([]);
    await run(); await run();
    expect(heartbeat.lease?.id).not.toBe(old.id);
    for (const n of ['x', 'y']) expect((await backend.get(`kube_servers/${GROUP}/${n}-eks-${s.region}-${ACCOUNT}`))?.lease, n).toBe(heartbeat.lease?.id);
    void r1;
  });
});
