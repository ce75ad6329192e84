/**
 * Adversarial: an opt-in region answering "credentials not recognised" is read as "region not
 * enabled" and skipped. That answer is not a listing: an entry registered in that region (so the
 * region was enabled) must survive it — e.g. when the access key is deactivated and every region
 * answers InvalidClientTokenId / UnrecognizedClientException.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {Heartbeat} from '../../heartbeats/heartbeat.ts';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {Discovery} from '../../src/discovery/discovery.ts';
import {createRegistrar} from '../../src/discovery/registrar.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import type {FakeAws} from '../fakes/aws-fakes.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAADVERSARIAL00001', secretAccessKey: 'adversarial-secret'};

let aws: AwsServiceWorld;
let fake: FakeAws;

beforeAll(async () => {
  aws = await startAwsServiceWorld({
    key: KEY,
    account: ACCOUNT,
    env: {AWS_REGION: 'us-east-1'},
    populate: (world) => {
      world.addCluster(ACCOUNT, 'us-east-1', {name: 'home'});
      world.addCluster(ACCOUNT, 'af-south-1', {name: 'cape'});
    },
  });
  fake = aws.fake;
});

afterAll(() => aws.close());

describe('a region answering "not enabled" after clusters were registered there', () => {
  for (const code of ['UnrecognizedClientException', 'InvalidClientTokenId']) {
    it(`keeps the opt-in region's entries when every region answers ${code} (a deactivated key)`, async () => {
      fake.fault = undefined;
      const config = parseConfig(
        `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: ["*"]
storage: {type: memory}
`,
        'adv.yaml',
      );
      const backend = new MemoryBackend({clock: systemClock});
      const heartbeat = new Heartbeat({backend, clock: systemClock, group: 'g', ttlMs: 600_000, hostId: 'h', hostname: 'n', version: 't'});
      await heartbeat.start();
      try {
        const discovery = new Discovery({config, clock: systemClock});
        const registrar = createRegistrar(backend, heartbeat, 'g');
        const names = async (): Promise<string[]> => (await registrar.current()).map((s) => s.metadata.name).sort();
        await discovery.runCycle(registrar);
        const before = await names();
        expect(before).toEqual(['cape-eks-af-south-1-111111111111', 'home-eks-us-east-1-111111111111']);

        // The key is deactivated: every EKS region says it does not know the credentials.
        fake.fault = (ctx) => (ctx.service === 'eks' ? {code, status: 403} : undefined);
        const report = await discovery.runCycle(registrar);
        expect(report.items.filter((i) => i.action === 'delete')).toEqual([]);
        expect(await names()).toEqual(before);
      } finally {
        fake.fault = undefined;
        await heartbeat.stop({deregister: false});
        await backend.close();
      }
    });
  }
});
