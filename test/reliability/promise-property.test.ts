/**
 * The promise, as a property over the wire: for random sequences of cloud states (clusters
 * appearing, vanishing, retagged) and faults (malformed or empty-looking list pages, 5xx,
 * reset connections, malformed or unreachable cluster records), run real cycles with the real
 * EKS client through the fault proxy. An entry is deleted only in a cycle where a well-formed
 * listing of its source succeeded and lacked it, or it stopped matching; after a clean cycle
 * the registry is exactly what the cloud holds.
 */
import fc from 'fast-check';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import type {Registrar} from '../../src/discovery/cycle.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, mutateJson, startFaultProxy, type FaultProxy, type ProxyFault, type ProxyFaultRule} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAPROPERTY00000001', secretAccessKey: 'property-secret'};
const REGIONS = ['us-east-1', 'eu-west-1'] as const;
const NAMES = ['a', 'b', 'c', 'd'] as const;
type Region = (typeof REGIONS)[number];

/** Per region and name: absent, or present with an env tag. */
type CloudState = Record<Region, Partial<Record<(typeof NAMES)[number], 'prod' | 'dev'>>>;

/** A fault on one region's listing, or on one cluster's record. */
type Fault =
  | {kind: 'none'}
  | {kind: 'list'; region: Region; page: 'first' | 'later'; how: 'empty-object' | 'no-content' | 'null-clusters' | 'server-error' | 'reset' | 'truncate'}
  | {kind: 'record'; region: Region; cluster: (typeof NAMES)[number]; how: 'bad-status' | 'other-name' | 'bad-ca' | 'no-endpoint'};

const listFault: Record<Extract<Fault, {kind: 'list'}>['how'], ProxyFault> = {
  'empty-object': answer(200, '{}'),
  'no-content': {kind: 'answer', status: 204, body: ''},
  'null-clusters': answer(200, '{"clusters":null}'),
  'server-error': answer(500, '{"message":"boom"}', {'x-amzn-errortype': 'InternalFailure'}),
  reset: {kind: 'reset'},
  truncate: {kind: 'truncate'},
};
const edit = (patch: Record<string, unknown>): ProxyFault => mutateJson((body) => ({cluster: {...(body['cluster'] as object), ...patch}}));
const recordFault: Record<Extract<Fault, {kind: 'record'}>['how'], ProxyFault> = {
  'bad-status': edit({status: 'active'}),
  'other-name': edit({name: 'somebody-else'}),
  'bad-ca': edit({certificateAuthority: {data: 'bm90IGEgY2VydA=='}}),
  'no-endpoint': edit({endpoint: null}),
};

function rule(fault: Fault): ProxyFaultRule | undefined {
  if (fault.kind === 'list') return (r) => (r.operation === 'ListClusters' && r.region === fault.region && r.page === fault.page ? listFault[fault.how] : undefined);
  if (fault.kind === 'record') return (r) => (r.operation === 'DescribeCluster' && r.region === fault.region && r.cluster === fault.cluster ? recordFault[fault.how] : undefined);
  return undefined;
}

const stateArb: fc.Arbitrary<CloudState> = fc.record({
  'us-east-1': fc.dictionary(fc.constantFrom(...NAMES), fc.constantFrom('prod' as const, 'dev' as const)),
  'eu-west-1': fc.dictionary(fc.constantFrom(...NAMES), fc.constantFrom('prod' as const, 'dev' as const)),
}) as fc.Arbitrary<CloudState>;
const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  fc.constant<Fault>({kind: 'none'}),
  fc.record({
    kind: fc.constant('list' as const),
    region: fc.constantFrom(...REGIONS),
    page: fc.constantFrom('first' as const, 'later' as const),
    how: fc.constantFrom('empty-object' as const, 'no-content' as const, 'null-clusters' as const, 'server-error' as const, 'reset' as const, 'truncate' as const),
  }),
  fc.record({
    kind: fc.constant('record' as const),
    region: fc.constantFrom(...REGIONS),
    cluster: fc.constantFrom(...NAMES),
    how: fc.constantFrom('bad-status' as const, 'other-name' as const, 'bad-ca' as const, 'no-endpoint' as const),
  }),
);

const entryName = (name: string, region: string): string => `${name}-eks-${region}-${ACCOUNT}`;

function wanted(state: CloudState): string[] {
  return REGIONS.flatMap((region) => Object.entries(state[region]).filter(([, env]) => env === 'prod').map(([name]) => entryName(name, region))).sort();
}

let fake: FakeAws;
let proxy: FaultProxy;
let restoreEnv: () => void;

beforeAll(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  restoreEnv = setEnv({
    AWS_ENDPOINT_URL_EKS: proxy.url,
    AWS_ENDPOINT_URL_STS: proxy.url,
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey,
    AWS_MAX_ATTEMPTS: '1',
    AWS_RETRY_MODE: 'standard',
    AWS_EC2_METADATA_DISABLED: 'true',
  });
});
afterAll(async () => {
  restoreEnv();
  await proxy.close();
  await fake.close();
});

/** Puts the fake cloud into `state`. */
function apply(state: CloudState): void {
  for (const region of REGIONS) {
    for (const name of NAMES) {
      const env = state[region][name];
      const existing = fake.world.cluster(ACCOUNT, region, name);
      if (!env) {
        if (existing) fake.world.removeCluster(ACCOUNT, region, name);
      } else if (existing) {
        fake.world.retagCluster(ACCOUNT, region, name, {env});
      } else {
        fake.world.addCluster(ACCOUNT, region, {name, tags: {env}});
      }
    }
  }
}

/** A registrar over a Map: the property looks at every delete. */
function memoryRegistrar(): Registrar & {entries: Map<string, KubeServer>} {
  const entries = new Map<string, KubeServer>();
  return {
    entries,
    current: async () => [...entries.values()],
    announce: async (draft) => {
      entries.set(draft.metadata.name, {...draft, metadata: {...draft.metadata, expires: '2099-01-01T00:00:00Z', revision: '1'}} as KubeServer);
    },
    remove: async (name) => {
      entries.delete(name);
    },
  };
}

describe('the promise, over random cloud states and faults', () => {
  it('deletes an entry only after a well-formed listing of its source lacked it (or it stopped matching)', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: prop
  request_timeout: 10s
  aws:
    - types: [eks]
      regions: [us-east-1, eu-west-1]
      tags: {env: prod}
`,
      'prop.yaml',
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(stateArb, faultArb), {minLength: 1, maxLength: 4}), async (steps) => {
        const discovery = new Discovery({config, clock: systemClock});
        const registrar = memoryRegistrar();
        for (const [state, fault] of steps) {
          apply(state);
          proxy.fault = rule(fault);
          const before = new Set(registrar.entries.keys());
          const seenBefore = proxy.seen.length;
          const report = await discovery.runCycle(registrar);
          proxy.fault = undefined;
          // Which regions' listings the proxy actually spoiled (a later-page fault needs a later page).
          const spoiled = new Set(proxy.seen.slice(seenBefore).filter((e) => e.fault && e.req.operation === 'ListClusters').map((e) => e.req.region));
          const want = new Set(wanted(state));
          for (const name of before) {
            if (registrar.entries.has(name)) continue;
            // Deleted: its region's source must have succeeded, and the cloud must really lack it (or it no longer matches).
            const region = REGIONS.find((r) => name.includes(`-eks-${r}-`)) ?? '';
            const source = report.sources.find((s) => s.region === region);
            expect(source?.ok, `${name} deleted although ${source?.id ?? region} failed`).toBe(true);
            expect(want.has(name), `${name} deleted although the cloud still lists it as matching (fault ${JSON.stringify(fault)})`).toBe(false);
            expect(spoiled.has(region), `${name} deleted under a list fault of its region`).toBe(false);
          }
          // A source whose listing was spoiled must have failed, never "succeeded empty".
          for (const region of spoiled) expect(report.sources.find((s) => s.region === region)?.ok, `${region} listing spoiled`).toBe(false);
        }
        // One clean cycle later the registry is exactly what the cloud holds.
        await discovery.runCycle(registrar);
        expect([...registrar.entries.keys()].sort()).toEqual(wanted(steps.at(-1)![0]));
      }),
      {
        numRuns: 25,
        examples: [
          // A later-page fault on a region with no later page: the empty listing is real, the delete legitimate.
          [[[{'us-east-1': {a: 'prod'}, 'eu-west-1': {}}, {kind: 'record', region: 'us-east-1', cluster: 'a', how: 'no-endpoint'}], [{'us-east-1': {}, 'eu-west-1': {}}, {kind: 'list', region: 'us-east-1', page: 'later', how: 'empty-object'}]]],
          // The case: a filled region answered with `{}` on its first page.
          [[[{'us-east-1': {a: 'prod', b: 'prod', c: 'prod'}, 'eu-west-1': {d: 'prod'}}, {kind: 'none'}], [{'us-east-1': {a: 'prod', b: 'prod', c: 'prod'}, 'eu-west-1': {d: 'prod'}}, {kind: 'list', region: 'us-east-1', page: 'first', how: 'empty-object'}]]],
        ],
      },
    );
    // 25 runs of up to four real cycles each: ~13 s alone, more on a loaded 2-CPU machine.
  }, 120_000);
});
