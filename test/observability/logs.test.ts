/**
 * What operators read in the logs: one structured line per failed source (from a real EKS
 * fetcher failing against the AWS fake), and no secret in any line, whatever path it is logged under.
 */
import {EKSClient} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {beforeEach, describe, expect, it} from 'vitest';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import {logCycleSummary, logSourceResult} from '../../src/observability/log-events.ts';
import {createLogger, type Logger} from '../../src/observability/logger.ts';
import {failRegion, FakeAwsWorld, startFakeAws} from '../fakes/aws-fakes.ts';

const ACCOUNT = '111111111111';
const KEY = {accessKeyId: 'AKIALOGSEXAMPLE00001', secretAccessKey: 'logs-secret-key/+example'};

// The secrets every path is tried with.
const EKS_TOKEN = 'k8s-aws-v1.aHR0cHM6Ly9zdHMudXMtZWFzdC0xLmFtYXpvbmF3cy5jb20vP0FjdGlvbj1HZXRDYWxsZXJJZGVudGl0eQ';
const SECRET_KEY = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const SESSION_TOKEN = 'IQoJb3JpZ2luX2VjEXAMPLEtoken0123456789abcdefghijklmnopqrstuvwxyzABCDEF/+==';
const AUTHORIZATION = 'Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXZhbHVl';
const SIGNATURE = 'a3f1c09e5b7d2e4f6a8b0c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c7d9e1f';
const SECRETS = [EKS_TOKEN, SECRET_KEY, SESSION_TOKEN, AUTHORIZATION.slice('Bearer '.length), SIGNATURE, 'hunter2-password'];

function capture(format: 'json' | 'text' = 'json'): {logger: Logger; lines: () => string[]} {
  const chunks: string[] = [];
  const logger = createLogger({level: 'debug', format, destination: {write: (s: string) => void chunks.push(s)}});
  return {logger, lines: () => chunks.join('').split('\n').filter((l) => l !== '')};
}

describe('source failure line', () => {
  let world: FakeAwsWorld;

  beforeEach(() => {
    world = new FakeAwsWorld();
    world.addAccount(ACCOUNT, {accessKeys: [KEY]});
  });

  it('is exactly one JSON line with cloud, account, region, operation, code and request id', async () => {
    const fake = await startFakeAws({world, fault: failRegion('eu-west-1', 'AccessDeniedException')});
    try {
      const client = new EKSClient({region: 'eu-west-1', endpoint: fake.url, credentials: KEY, maxAttempts: 1});
      const fetcher = createEksFetcher({source: eksSource(0, 'eu-west-1', ACCOUNT), client, describeQueue: new PQueue({concurrency: 2})});
      const result = await fetcher.fetch(new AbortController().signal);
      const {logger, lines} = capture();
      logSourceResult(logger, result, 42);

      expect(lines()).toHaveLength(1);
      const line = JSON.parse(lines()[0] ?? '') as Record<string, unknown>;
      expect(line).toMatchObject({
        level: 'warn',
        event: 'source_failed',
        cloud: 'AWS',
        account: ACCOUNT,
        region: 'eu-west-1',
        operation: 'ListClusters',
        code: 'AccessDeniedException',
        reason: 'access_denied',
        duration_ms: 42,
      });
      // The id AWS support asks for: the fake's x-amzn-RequestId of the failed call.
      expect(line['request_id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(line['msg']).toContain('eks:eu-west-1:111111111111 failed: ListClusters: AccessDeniedException');
    } finally {
      await fake.close();
    }
  });

  it('is followed by one cycle summary line naming the failed sources', () => {
    const {logger, lines} = capture();
    logCycleSummary(logger, {
      startedAt: 0,
      durationMs: 1200,
      result: 'partial',
      sources: [
        {id: 'eks:us-east-1:111111111111', cloud: 'AWS', region: 'us-east-1', account: ACCOUNT, ok: true, clusters: 3},
        {id: 'eks:eu-west-1:111111111111', cloud: 'AWS', region: 'eu-west-1', account: ACCOUNT, ok: false, clusters: 0,
          error: {reason: 'throttled', code: 'ThrottlingException', message: 'Rate exceeded', operation: 'ListClusters'}},
      ],
      items: [],
      counts: {create: 2, update: 1, delete: 0, unchanged: 0, stale: 4, skip: 0},
      notes: [],
      applyErrors: [],
      results: [],
    });

    expect(lines()).toHaveLength(1);
    expect(JSON.parse(lines()[0] ?? '')).toMatchObject({
      level: 'warn', event: 'cycle', result: 'partial', failed_sources: ['eks:eu-west-1:111111111111'],
      failed_by_reason: {throttled: 1}, registered: 2, updated: 1, stale: 4, duration_ms: 1200,
    });
  });
});

describe('redaction', () => {
  function logEverywhere(logger: Logger): void {
    const credentials = {accessKeyId: KEY.accessKeyId, secretAccessKey: SECRET_KEY, sessionToken: SESSION_TOKEN};
    const headers = {authorization: AUTHORIZATION, 'x-amz-security-token': SESSION_TOKEN};
    const url = `https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity&X-Amz-Signature=${SIGNATURE}&X-Amz-Security-Token=${SESSION_TOKEN}`;
    const error = Object.assign(new Error(`token ${EKS_TOKEN} rejected; secret ${SECRET_KEY}`, {cause: new Error(`upstream said ${AUTHORIZATION}`)}), {
      $response: {headers},
      credentials,
    });

    logger.info({token: EKS_TOKEN, credentials, headers}, 'top level');
    logger.info({request: {deep: {deeper: [{Authorization: AUTHORIZATION, note: `sent ${EKS_TOKEN}`}]}}, url}, 'nested');
    logger.info({config: {aws: [{secret_access_key: SECRET_KEY, session_token: SESSION_TOKEN, password: 'hunter2-password'}]}}, 'config');
    logger.info({headers: new Headers({Authorization: AUTHORIZATION}), map: new Map([['sessionToken', SESSION_TOKEN]]), link: new URL(url)}, 'objects');
    logger.warn({err: error}, 'as err');
    logger.error(error);
    logger.error(`message with ${EKS_TOKEN} and ${AUTHORIZATION} and ${url}`);
    logger.info('format %s %j', SECRET_KEY, {sessionToken: SESSION_TOKEN});
    logger.info(`aws_secret_access_key=${SECRET_KEY} aws_session_token=${SESSION_TOKEN} body {"password":"hunter2-password"}`);
    logger.child({token: EKS_TOKEN, auth: AUTHORIZATION}).info({}, 'child bindings');
    logger.info({body: `<SecretAccessKey>${SECRET_KEY}</SecretAccessKey><SessionToken>${SESSION_TOKEN}</SessionToken>`}, 'sts xml');
  }

  for (const format of ['json', 'text'] as const) {
    it(`keeps tokens, secret keys and Authorization headers out of every ${format} line`, () => {
      const {logger, lines} = capture(format);
      logEverywhere(logger);
      const output = lines().join('\n');

      expect(lines().length).toBeGreaterThanOrEqual(11);
      for (const secret of SECRETS) expect(output).not.toContain(secret);
      expect(output).toContain('[REDACTED]');
      // What is not secret stays readable.
      expect(output).toContain('GetCallerIdentity');
      expect(output).toContain('upstream said Bearer [REDACTED]');
      // `log.format: text` is the human-readable form, not JSON.
      expect(lines()[0]).toMatch(format === 'text' ? /^\[[^\]]+\] INFO: top level$/ : /^\{"level":"info"/);
    });
  }

  it('leaves ordinary values alone', () => {
    const {logger, lines} = capture();
    logger.info({tokens_minted: 3, next_token: 'page-2', cluster: 'prod', arn: 'arn:aws:eks:us-east-1:111111111111:cluster/prod', sha: 'e83c5163316f89bfbde7d9ab23ca2e25604af290'}, 'ok');

    expect(JSON.parse(lines()[0] ?? '')).toMatchObject({
      tokens_minted: 3, next_token: 'page-2', cluster: 'prod', arn: 'arn:aws:eks:us-east-1:111111111111:cluster/prod', sha: 'e83c5163316f89bfbde7d9ab23ca2e25604af290',
    });
  });
});
