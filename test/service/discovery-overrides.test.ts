/**
 * A test or the bench may override one field of the service's `aws` discovery options without
 * losing the rest: before the per-field merge, `discovery: {aws: {...}}` replaced the whole block
 * and with it the middleware that counts every SDK call in /metrics.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {parseConfig} from '../../src/config/load.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {startService} from '../../src/service/service.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {captureIo} from '../helpers/env.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIAOVERRIDESTEST001', secretAccessKey: 'overrides-secret'};
let aws: AwsServiceWorld;

beforeAll(async () => {
  aws = await startAwsServiceWorld({key: KEY, account: ACCOUNT, populate: (world) => world.addCluster(ACCOUNT, 'us-east-1', {name: 'a'})});
});

afterAll(() => aws.close());

describe('discovery overrides of the service', () => {
  it('a partial aws override keeps the middleware that counts every SDK call', async () => {
    const config = parseConfig(
      `version: v1
discovery_service:
  discovery_group: overrides
  poll_interval: 1h
  aws: [{types: [eks], regions: [us-east-1]}]
storage: {type: memory}
probe: {enabled: false}
http: {listen_addr: "127.0.0.1:0"}
`,
      'overrides.yaml',
    );
    const svc = await startService({config, io: captureIo().io, clock: systemClock, logger: silentLogger, discovery: {aws: {perRegionConcurrency: 1}}});
    try {
      const report = await svc.nextCycle();
      expect(report.result).toBe('success');
      expect(report.items.map((i) => i.name)).toEqual(['a-eks-us-east-1-111111111111']);
      const text = await (await fetch(`${svc.url}/metrics`)).text();
      expect(text).toMatch(/kube_discovery_cloud_api_requests_total\{service="eks",operation="ListClusters",code="OK"\} [1-9]/);
      expect(text).toMatch(/kube_discovery_cloud_api_requests_total\{service="sts",operation="GetCallerIdentity",code="OK"\} [1-9]/);
    } finally {
      await svc.stop({deregister: false});
    }
  });
});
