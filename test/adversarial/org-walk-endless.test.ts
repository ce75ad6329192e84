/**
 * Adversarial: Organizations answers that never end — an OU listed under its own child (the tree
 * is a loop), `ListAccountsForParent` pages that always carry a new `NextToken`. The walk followed
 * them for ever: the cycle's deadline cut its planning off (nothing deleted), but the walk went on
 * calling Organizations in the background, one more endless walk each cycle. A loop in the OU tree
 * is malformed and fails the walk at once; an endless list is cut off by the cycle's deadline and
 * calls nothing after it. Answers cut short (a body cut off, a reset, throttling) fail it too. The running discovery (Discovery, registrar, heartbeat) against the
 * wire-level fake behind the fault proxy.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import {awsCloud} from '../../src/clouds/aws/cloud-module.ts';
import {azureCloud} from '../../src/clouds/azure/cloud-module.ts';
import {Clouds} from '../../src/clouds/cloud.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {startFakeAws, type FakeAws, type FakeOrganization} from '../fakes/aws-fakes.ts';
import {answer, awsClassifier, startFaultProxy, type FaultProxy, type ProxyFaultRule} from '../fakes/faults.ts';
import {setEnv} from '../helpers/env.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';
import {organizationWorld} from '../helpers/org-world.ts';

const MGMT = '111111111111';
const MEMBER = '222222222222';
const KEY = {accessKeyId: 'AKIAORGWALKENDLESS01', secretAccessKey: 'org-walk-endless-secret'};
const ROLE = 'kube-discovery';
const NAME = `c-eks-us-east-1-${MEMBER}`;

let fake: FakeAws;
let proxy: FaultProxy;
let org: FakeOrganization;
let prod: string;
let restoreEnv: () => void;

beforeAll(async () => {
  const made = organizationWorld(MGMT, KEY);
  const world = made.world;
  org = made.org;
  prod = org.addUnit('prod');
  made.addMember(MEMBER, org.addUnit('team', prod), ROLE);
  world.addCluster(MEMBER, 'us-east-1', {name: 'c'});
  fake = await startFakeAws({world});
  proxy = await startFaultProxy({upstream: fake.url, classify: awsClassifier((id) => world.lookupAccessKey(id)?.account)});
  const viaProxy = Object.fromEntries(Object.entries(fake.env).map(([k, v]) => [k, v === fake.url ? proxy.url : v]));
  restoreEnv = setEnv({...viaProxy, AWS_MAX_ATTEMPTS: '1', AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_REGION: 'us-east-1'});
});

afterAll(async () => {
  restoreEnv();
  await proxy.close();
  await fake.close();
});

/** Rewrites the JSON answers of one Organizations operation. */
function rewrite(operation: string, edit: (body: Record<string, unknown>) => void): ProxyFaultRule {
  return (req) =>
    req.operation === operation
      ? {
          kind: 'mutate',
          rewrite: (text) => {
            const body = JSON.parse(text) as Record<string, unknown>;
            edit(body);
            return JSON.stringify(body);
          },
        }
      : undefined;
}

let page = 0;
const FAULTS: [string, ProxyFaultRule, string][] = [
  // prod lists itself and its child `team` lists prod: prod → team → prod → …
  [
    'an OU listed under its own child',
    rewrite('ListOrganizationalUnitsForParent', (body) => {
      const units = body['OrganizationalUnits'] as {Id: string}[];
      if (!units.some((u) => u.Id === prod)) units.push({Id: prod});
    }),
    'invalid_response',
  ],
  [
    'ListAccountsForParent pages that always carry a new NextToken',
    (req) =>
      req.operation !== 'ListAccountsForParent'
        ? undefined
        : req.page === 'first'
          ? rewrite('ListAccountsForParent', (body) => (body['NextToken'] = `endless-${page++}`))(req)
          : answer(200, JSON.stringify({Accounts: [], NextToken: `endless-${page++}`}), {'content-type': 'application/x-amz-json-1.1'}),
    'timeout',
  ],
  // Attacks that held: answers cut short fail the walk like any error.
  ['a ListAccountsForParent answer cut off mid-body', (req) => (req.operation === 'ListAccountsForParent' ? {kind: 'truncate'} : undefined), 'other'],
  ['a ListOrganizationalUnitsForParent connection reset', (req) => (req.operation === 'ListOrganizationalUnitsForParent' ? {kind: 'reset'} : undefined), 'other'],
  [
    'ListRoots throttled past the retries',
    (req) => (req.operation === 'ListRoots' ? answer(400, JSON.stringify({__type: 'TooManyRequestsException', Message: 'slow down'}), {'content-type': 'application/x-amz-json-1.1'}) : undefined),
    'throttled',
  ],
];

describe('an organization walk that would never end', () => {
  for (const [what, rule, reason] of FAULTS) {
    it(`${what}: the matcher fails (${reason}), nothing is deleted, and no Organizations call is made after the cycle`, async () => {
      const config = (cycleTimeout: string): ReturnType<typeof parseConfig> => parseConfig(
        `version: v1
discovery_service:
  discovery_group: g
  cycle_timeout: ${cycleTimeout}
  aws:
    - types: [eks]
      regions: [us-east-1]
      assume_role_name: ${ROLE}
      organization: {organization_id: ${org.id}, organizational_units: {include: ["*"], exclude: []}}
storage: {type: memory}
`,
        'org-walk-endless.yaml',
      );
      const backend = new MemoryBackend({clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      const providers = new AwsCredentialProviders({env: process.env, base: () => Promise.resolve(KEY)});
      // Only the endless walk is to be cut off, by the 2 s cycle deadline. The good first cycle has a
      // generous one, and no call hangs: on a loaded machine a good call or cycle can take seconds.
      // Both cycles plan with the same AWS planner (its last plan), as two cycles of one process do.
      const sources = new AwsSources({requestTimeoutMs: ROUND_TRIP.timeout, credentialProvider: (role) => providers.provider(role), organizations: {organizationsTimeoutMs: ROUND_TRIP.timeout}});
      const clouds = new Clouds([{...awsCloud, planner: (options) => ({plan: (context) => sources.plan(options.config.discovery_service.aws, context)})}, azureCloud]);
      const discovery = (cycleTimeout: string): Discovery => new Discovery({config: config(cycleTimeout), clock: systemClock, clouds});
      const registrar = createRegistrar(backend, heartbeat, 'g');
      const organizationsCalls = (): number => proxy.seen.filter((s) => /^(?:List|Describe)(?:Roots|OrganizationalUnits|Accounts|Organization)/.test(s.req.operation)).length;
      try {
        await discovery('20s').runCycle(registrar);
        expect((await registrar.current()).map((s) => s.metadata.name)).toEqual([NAME]);

        proxy.fault = rule;
        const spoiled = await discovery('2s').runCycle(registrar);
        expect(spoiled.items.filter((i) => i.action === 'delete')).toEqual([]);
        expect(spoiled.sources.find((s) => s.id.startsWith('eks:*'))?.error?.reason).toBe(reason);
        expect((await registrar.current()).map((s) => ({name: s.metadata.name, stale: s.status?.stale}))).toEqual([{name: NAME, stale: true}]);
        // A call already on the wire when the cycle ended may still arrive; a walk still running
        // would call again within a round trip: give it a few.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const after = organizationsCalls();
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(organizationsCalls()).toBe(after);
      } finally {
        proxy.fault = undefined;
        await heartbeat.stop({deregister: false});
        await backend.close();
      }
    });
  }
});
