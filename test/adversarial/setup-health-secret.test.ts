/**
 * Adversarial: when access set-up fails, the cluster's API answer becomes part of its health
 * message, which is stored in the registry and served by /v1/kube_servers. An API server (or a
 * webhook, or a proxy in front of it) that echoes the request's bearer token — an EKS token, a
 * presigned STS call good for 15 minutes — must not put that token into the inventory.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {createAccessSetupStep} from '../../src/access/setup-step.ts';
import {systemClock, type Clock} from '../../src/core/clock.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import type {FakeAws} from '../fakes/aws-fakes.ts';
import {startFakeKubeApi, KubeRbacStore, type FakeKubeApi} from '../fakes/kube-api-server.ts';
import {startAwsServiceWorld, type AwsServiceWorld} from '../helpers/aws-service-world.ts';
import {setupStepConfig, unchangedClusterReport} from '../access/setup-fixtures.ts';
import {eksAuthenticator} from '../probe/eks-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIASETUPSECRET00001', secretAccessKey: 'setup-secret-secret', arn: USER_ARN};

let setup: AwsServiceWorld;
let aws: FakeAws;
let kube: FakeKubeApi;
const tokens: string[] = [];

beforeEach(async () => {
  setup = await startAwsServiceWorld({key: KEY, account: ACCOUNT});
  aws = setup.fake;
  const authn = eksAuthenticator({world: setup.world, clusters: [{account: ACCOUNT, region: REGION, name: 'c'}], stsUrl: aws.url});
  kube = await startFakeKubeApi({
    authenticate: (token) => {
      tokens.push(token);
      return authn.authenticate(token);
    },
    rbac: new KubeRbacStore(),
    // A webhook authorizer that quotes what it was given, token included.
    authorize: () => ({allowed: false, reason: `denied request with credential ${tokens.at(-1) ?? ''}`}),
  });
  setup.world.addCluster(ACCOUNT, REGION, {name: 'c', endpoint: kube.url, caData: Buffer.from(kube.caPem).toString('base64')});
});

afterEach(async () => {
  await kube.close();
  await setup.close();
});

const config = setupStepConfig(REGION, USER_ARN);

describe('a failed access set-up', () => {
  it('keeps the bearer token an API server echoed out of the health message', async () => {
    const {report, server} = unchangedClusterReport(kube, ACCOUNT, REGION);
    const clock: Clock = {...systemClock, sleep: () => Promise.resolve()};
    const step = createAccessSetupStep({config, clock, backend: new MemoryBackend({clock: systemClock}), logger: silentLogger, env: process.env, timeoutMs: 5_000});
    await step.run(report, new AbortController().signal);
    step.close();

    const health = step.adjustHealth(server, {status: 'unhealthy', reason: 'unauthorized', message: 'probe refused'});
    expect(health.reason).toBe('access_setup_failed');
    expect(tokens.length).toBeGreaterThan(0);
    for (const token of tokens) expect(health.message).not.toContain(token.slice(0, 40));
  });
});
