/**
 * Adversarial, incremental path: the tag read (`GetResources`, on the short path of lean-read.ts)
 * only ever decides which clusters to describe; ListClusters stays the authority on what exists.
 * Tag pages that are wrong — a 2xx carrying `x-amzn-ErrorType`, a PaginationToken that comes
 * back, a list that is null, a tag without a value, mappings of another region, an empty but
 * well-formed read — must never drop a cluster: the cycle describes instead. The running service
 * (Discovery, registrar, heartbeat) on a real SQLite registry, against the wire-level fake behind
 * the fault proxy.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {Registrar} from '../../src/discovery/cycle.ts';
import type {Discovery} from '../../src/discovery/discovery.ts';
import type {FakeAws} from '../fakes/aws-fakes.ts';
import {answer, type ProxyFault, type FaultProxy} from '../fakes/faults.ts';
import {ACCOUNT, NAMES, REGION, startEksService, type EksService} from './eks-service-harness.ts';

const KEY = {accessKeyId: 'AKIATAGREADATTACKS01', secretAccessKey: 'tag-read-attacks-secret'};

let service: EksService;
let fake: FakeAws;
let proxy: FaultProxy;
let registrar: Registrar;
let discovery: Discovery;

beforeAll(async () => {
  service = await startEksService({key: KEY, tmpPrefix: 'eks-tag-read-'});
  ({fake, proxy, registrar, discovery} = service);
});
afterAll(async () => {
  await service.close();
});

const entries = (): ReturnType<EksService['entries']> => service.entries();

const isTagRead = (operation: string): boolean => operation === 'POST /';
const page = (body: object, headers: Record<string, string> = {}): ProxyFault => answer(200, JSON.stringify(body), {'content-type': 'application/x-amz-json-1.1', ...headers});
const arn = (region: string, name: string): string => `arn:aws:eks:${region}:${ACCOUNT}:cluster/${name}`;

const SPOILS: [string, () => ProxyFault][] = [
  ['a 200 carrying x-amzn-ErrorType', () => page({ResourceTagMappingList: []}, {'x-amzn-errortype': 'ThrottlingException'})],
  ['a PaginationToken that comes back', () => page({ResourceTagMappingList: [], PaginationToken: 'p1'})],
  ['a null mapping list', () => page({ResourceTagMappingList: null})],
  ['a tag without a value', () => page({ResourceTagMappingList: [{ResourceARN: arn(REGION, 'a1'), Tags: [{Key: 'env', Value: null}]}]})],
  ['mappings of another region only, with other tags', () => page({ResourceTagMappingList: ['a1', 'a2', 'b1'].map((n) => ({ResourceARN: arn('eu-west-1', n), Tags: [{Key: 'env', Value: 'dev'}]}))})],
  ['an empty, well-formed read (eventual consistency)', () => page({ResourceTagMappingList: []})],
  // The clusters' true tags, in a page longer than the 100 mappings asked for: not an answer to this request (nor is a read of any length kept on the heap).
  [
    'a page of more mappings than ResourcesPerPage asked for',
    () =>
      page({
        ResourceTagMappingList: [
          {ResourceARN: arn(REGION, 'a1'), Tags: [{Key: 'env', Value: 'prod'}]},
          {ResourceARN: arn(REGION, 'a2'), Tags: [{Key: 'env', Value: 'prod'}, {Key: 'TeleportKubernetesName', Value: 'payments'}]},
          {ResourceARN: arn(REGION, 'b1'), Tags: [{Key: 'env', Value: 'prod'}]},
          ...Array.from({length: 98}, (_, i) => ({ResourceARN: arn(REGION, `x${i}`), Tags: [{Key: 'env', Value: 'prod'}]})),
        ],
      }),
  ],
];

describe('a tag read that is wrong drops no cluster: the cycle describes instead', () => {
  it('a clean cycle registers the three clusters, and a second one reads tags instead of describing', async () => {
    await discovery.runCycle(registrar);
    expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
    fake.stats.reset();
    await discovery.runCycle(registrar);
    expect(fake.stats.count({operation: 'GetResources'})).toBeGreaterThan(0);
    expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(0);
  });

  for (const [what, fault] of SPOILS) {
    it(`${what}: every cluster described, every entry kept and fresh`, async () => {
      fake.stats.reset();
      proxy.fault = (req) => (isTagRead(req.operation) ? fault() : undefined);
      try {
        const report = await discovery.runCycle(registrar);
        expect(report.sources.every((s) => s.ok)).toBe(true);
        expect(report.counts.delete).toBe(0);
        expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
        expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(3);
      } finally {
        proxy.fault = undefined;
      }
    });
  }

  // JSON.parse keeps the last of two equal keys: the true page, then a second list saying a1 is no longer env=prod, would drop a1.
  // A key given twice is malformed (src/core/json-keys.ts): the read fails and the cycle describes.
  for (const [what, members] of [
    ['"ResourceTagMappingList" given twice, the second saying a1 is env=dev', `"ResourceTagMappingList":[{"ResourceARN":"${arn(REGION, 'a1')}","Tags":[{"Key":"env","Value":"dev"}]}]`],
    ['"PaginationToken" given twice', '"PaginationToken":"p9","PaginationToken":""'],
  ] as const) {
    it(`${what}: every cluster described, every entry kept and fresh`, async () => {
      fake.stats.reset();
      proxy.fault = (req) => (isTagRead(req.operation) ? {kind: 'mutate', rewrite: (text) => text.replace(/\}\s*$/, `,${members}}`)} : undefined);
      try {
        const report = await discovery.runCycle(registrar);
        expect(report.sources.every((s) => s.ok)).toBe(true);
        expect(report.counts.delete).toBe(0);
        expect(await entries()).toEqual(NAMES.map((name) => ({name, stale: false})));
        expect(fake.stats.count({operation: 'DescribeCluster'})).toBe(3);
      } finally {
        proxy.fault = undefined;
      }
    });
  }

  it('a cluster gone from ListClusters is deregistered whatever the tag read says of it', async () => {
    fake.world.removeCluster(ACCOUNT, REGION, 'b1');
    proxy.fault = (req) => (isTagRead(req.operation) ? page({ResourceTagMappingList: ['a1', 'a2', 'b1'].map((n) => ({ResourceARN: arn(REGION, n), Tags: [{Key: 'env', Value: 'prod'}]}))}) : undefined);
    try {
      const report = await discovery.runCycle(registrar);
      expect(report.counts.delete).toBe(1);
      expect((await entries()).map((e) => e.name)).toEqual(['a1-eks-us-east-1-111111111111', 'payments']);
    } finally {
      proxy.fault = undefined;
    }
  });
});
