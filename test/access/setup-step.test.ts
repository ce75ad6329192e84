/**
 * The access set-up step on its own, against the wire-level EKS/STS fakes and an RBAC-enforcing
 * Kubernetes fake: the periodic full refresh re-reads without writing, and an RBAC write refused
 * while a fresh association propagates is retried on the injected clock.
 */
import {afterEach, beforeEach, describe, expect, it} from 'vitest';
import {createAccessSetupStep, PROPAGATION_RETRY_MS, type SetupOutcome} from '../../src/access/setup-step.ts';
import {systemClock, type Clock} from '../../src/core/clock.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {silentLogger} from '../../src/observability/logger.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {FakeAwsWorld, startFakeAws, type FakeAws} from '../fakes/aws-fakes.ts';
import {startFakeKubeApi, KubeRbacStore, type FakeKubeApi, type KubeAuthorizer} from '../fakes/kube-api-server.ts';
import {rbacAuthorizer} from '../fakes/kube-rbac-authorizer.ts';
import {setEnv} from '../helpers/env.ts';
import {eksAuthenticator} from '../probe/eks-fixtures.ts';
import {setupStepConfig, unchangedClusterReport} from './setup-fixtures.ts';

const ACCOUNT = '111111111111';
const REGION = 'us-east-1';
const USER_ARN = `arn:aws:iam::${ACCOUNT}:user/discovery`;
const KEY = {accessKeyId: 'AKIASETUPSTEP0000001', secretAccessKey: 'setup-step-secret', arn: USER_ARN};

let aws: FakeAws;
let kube: FakeKubeApi;
let restoreEnv: () => void;
let deniedCreates = 0;

beforeEach(async () => {
  const world = new FakeAwsWorld();
  world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  aws = await startFakeAws({world});
  const rbac = new KubeRbacStore();
  const enforce = rbacAuthorizer(rbac);
  // Like EKS right after AssociateAccessPolicy: the first writes are still refused.
  const authorize: KubeAuthorizer = (user, attrs) => {
    if (attrs.verb === 'create' && attrs.resource === 'clusterroles' && deniedCreates > 0) {
      deniedCreates--;
      return {allowed: false, reason: 'access policy not yet in effect'};
    }
    return enforce(user, attrs);
  };
  const authn = eksAuthenticator({world, clusters: [{account: ACCOUNT, region: REGION, name: 'c'}], stsUrl: aws.url});
  kube = await startFakeKubeApi({authenticate: authn.authenticate, rbac, authorize});
  world.addCluster(ACCOUNT, REGION, {name: 'c', endpoint: kube.url, caData: Buffer.from(kube.caPem).toString('base64')});
  restoreEnv = setEnv({...aws.env, AWS_ACCESS_KEY_ID: KEY.accessKeyId, AWS_SECRET_ACCESS_KEY: KEY.secretAccessKey, AWS_MAX_ATTEMPTS: '1'});
});

afterEach(async () => {
  restoreEnv();
  await kube.close();
  await aws.close();
});

const config = setupStepConfig(REGION, USER_ARN);

/** A cycle report in which cluster `c` is registered and unchanged. */
function report(): CycleReport {
  return unchangedClusterReport(kube, ACCOUNT, REGION).report;
}

function step(options: {clock?: Clock; fullRefreshMs?: number} = {}) {
  const outcomes: SetupOutcome[] = [];
  const s = createAccessSetupStep({
    config,
    clock: options.clock ?? systemClock,
    backend: new MemoryBackend({clock: systemClock}),
    logger: silentLogger,
    env: process.env,
    timeoutMs: 5_000,
    onOutcome: (o) => outcomes.push(o),
    ...(options.fullRefreshMs === undefined ? {} : {fullRefreshMs: options.fullRefreshMs}),
  });
  return {s, outcomes};
}

const writes = (): number =>
  ['CreateAccessEntry', 'DeleteAccessEntry', 'AssociateAccessPolicy', 'DisassociateAccessPolicy'].reduce((n, operation) => n + aws.stats.count({operation}), 0) +
  kube.requests.filter((r) => r.method === 'PUT' || (r.method === 'POST' && !r.path.includes('accessreviews'))).length;

describe('access set-up step', () => {
  it('re-reads a set-up cluster at the full refresh and writes nothing', async () => {
    const {s, outcomes} = step({fullRefreshMs: 0});
    const signal = new AbortController().signal;
    await s.run(report(), signal);
    const afterSetup = writes();
    const reads = aws.stats.count({operation: 'DescribeAccessEntry'});
    await s.run(report(), signal);
    s.close();
    expect(outcomes).toEqual(['configured', 'unchanged']);
    expect(writes()).toBe(afterSetup);
    expect(aws.stats.count({operation: 'DescribeAccessEntry'})).toBe(reads + 1);
    // The check is the principal's own access review, not a read of RBAC objects it may not read.
    expect(kube.requests.filter((r) => r.path.endsWith('selfsubjectaccessreviews')).length).toBe(3);
  });

  it('retries an RBAC write refused while the association propagates, waiting on the injected clock', async () => {
    deniedCreates = 2;
    const waits: number[] = [];
    const clock: Clock = {...systemClock, sleep: async (ms) => void waits.push(ms)};
    const {s, outcomes} = step({clock});
    await s.run(report(), new AbortController().signal);
    s.close();
    expect(outcomes).toEqual(['configured']);
    expect(waits).toEqual(PROPAGATION_RETRY_MS.slice(0, 2));
    expect(kube.rbac.get('clusterroles', 'kube-discovery')).toBeDefined();
    expect(aws.stats.count({operation: 'DisassociateAccessPolicy', status: 200})).toBe(1);
  });
});
