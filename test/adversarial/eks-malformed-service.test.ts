/**
 * Adversarial, end to end: the three EKS answers this review found read as good ones — a tag of
 * the wrong JSON type, a ListClusters name EKS cannot give a cluster, a 2xx carrying
 * `x-amzn-ErrorType` — met by the running service (Discovery, registrar, heartbeat) on a real
 * SQLite registry, through the real EKS client on the short path of a single-account matcher,
 * against the wire-level fake behind the fault proxy. After a clean cycle, each spoiled cycle
 * keeps every entry (stale where its source failed or its record was unusable), renames nothing,
 * and the next clean cycle is as the first.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {Registrar} from '../../src/discovery/cycle.ts';
import type {Discovery} from '../../src/discovery/discovery.ts';
import {answer, mutateJson, type FaultProxy, type ProxyFaultRule} from '../fakes/faults.ts';
import {NAMES, startEksService, type EksService} from './eks-service-harness.ts';

const KEY = {accessKeyId: 'AKIAMALFORMEDSVC0001', secretAccessKey: 'malformed-service-secret'};

let service: EksService;
let proxy: FaultProxy;
let registrar: Registrar;
let discovery: Discovery;

beforeAll(async () => {
  service = await startEksService({key: KEY, tmpPrefix: 'eks-malformed-', refreshInterval: '0s'});
  ({proxy, registrar, discovery} = service);
});
afterAll(async () => {
  await service.close();
});

const entries = (): ReturnType<EksService['entries']> => service.entries();

const retag = (edit: (tags: Record<string, unknown>, name: string) => unknown): ProxyFaultRule => (req) =>
  req.operation === 'DescribeCluster'
    ? mutateJson((body) => {
        const cluster = body['cluster'] as Record<string, unknown>;
        return {cluster: {...cluster, tags: edit(cluster['tags'] as Record<string, unknown>, String(cluster['name']))}};
      })
    : undefined;

const SPOILS: [string, ProxyFaultRule, string[]][] = [
  ['a tag value that is not a string (env of a1, the name tag of a2)', retag((tags, name) => (name === 'a1' ? {...tags, env: 7} : name === 'a2' ? {...tags, TeleportKubernetesName: null} : tags)), ['a1-eks-us-east-1-111111111111', 'payments']],
  ['tags that are a string', retag((tags, name) => (name === 'b1' ? 'env=prod' : tags)), ['b1-eks-us-east-1-111111111111']],
  ['a ListClusters name that is not UTF-8 where b1 was', (req) => (req.operation === 'ListClusters' ? answer(200, '{"clusters":["a1","a2","b\uFFFD"]}') : undefined), NAMES],
  ['a ListClusters 200 that carries x-amzn-ErrorType', (req) => (req.operation === 'ListClusters' ? answer(200, '{"clusters":[]}', {'x-amzn-errortype': 'InternalFailure'}) : undefined), NAMES],
];

describe('the service on SQLite meets answers that look good but are not', () => {
  it('a clean cycle registers the three clusters', async () => {
    const report = await discovery.runCycle(registrar);
    expect(report.sources.every((s) => s.ok)).toBe(true);
    expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
  });

  for (const [what, rule, stale] of SPOILS) {
    it(`${what}: nothing deleted or renamed; ${stale.length === NAMES.length ? 'every entry' : stale.join(', ')} stale; the next clean cycle heals`, async () => {
      proxy.fault = rule;
      try {
        const report = await discovery.runCycle(registrar);
        expect(report.counts.delete).toBe(0);
        expect(report.counts.create).toBe(0);
        expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: stale.includes(name)})));
      } finally {
        proxy.fault = undefined;
      }
      await discovery.runCycle(registrar);
      expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
    });
  }
});
