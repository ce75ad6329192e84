/**
 * "No credentials at all" is a typed mark on the source failure (`noCredentials`), set where the
 * cloud error is classified; the service's plain warning reads that mark, not the message text.
 */
import {AggregateAuthenticationError, AuthenticationError, CredentialUnavailableError} from '@azure/identity';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {awsFailure} from '../../src/clouds/aws/errors.ts';
import {azureFailure} from '../../src/clouds/azure/errors.ts';
import type {SourceFailure} from '../../src/core/types.ts';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import type {CycleReport} from '../../src/discovery/cycle.ts';
import {warnIfNoCredentials} from '../../src/observability/log-events.ts';
import {createLogger} from '../../src/observability/logger.ts';
import {startFakeAws, type FakeAws} from '../fakes/aws-server.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';

const ROLE = 'arn:aws:iam::222222222222:role/discovery';

function report(failures: readonly {cloud: string; error: SourceFailure}[]): CycleReport {
  return {
    startedAt: 0,
    durationMs: 1,
    result: 'failure',
    sources: failures.map(({cloud, error}, i) => ({id: `s${i}`, cloud, region: 'r', account: 'a', ok: false, clusters: 0, error})),
    items: [],
    counts: {create: 0, update: 0, delete: 0, unchanged: 0, stale: 0, skip: 0},
    notes: [],
    applyErrors: [],
    results: [],
  };
}

function warnings(r: CycleReport): {cloud?: string; event?: string; msg?: string}[] {
  const chunks: string[] = [];
  const logger = createLogger({level: 'info', format: 'json', destination: {write: (s: string) => void chunks.push(s)}});
  warnIfNoCredentials(logger, r);
  return chunks.join('').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as {cloud?: string; event?: string; msg?: string});
}

describe('no credentials', () => {
  let fake: FakeAws;
  beforeAll(async () => {
    const world = new FakeAwsWorld();
    world.addAccount('111111111111', {accessKeys: [{accessKeyId: 'AKIDBASE', secretAccessKey: 'base-secret'}]});
    world.addAccount('222222222222', {roles: [{arn: ROLE, trust: ['999999999999']}]});
    fake = await startFakeAws({world});
  });
  afterAll(() => fake.close());

  it('AWS: a chain that finds nothing is marked; a role that refuses us is not', async () => {
    const none = new AwsCredentialProviders({env: fake.env, base: () => Promise.reject(new Error('Could not load credentials from any providers'))});
    const missing = await none.provider({region: 'us-east-1', roleArn: ROLE})().catch((e: unknown) => e);
    const refusedBy = new AwsCredentialProviders({env: fake.env, base: () => Promise.resolve({accessKeyId: 'AKIDBASE', secretAccessKey: 'base-secret'})});
    const refused = await refusedBy.provider({region: 'us-east-1', roleArn: ROLE})().catch((e: unknown) => e);
    expect(awsFailure(missing, 'ListClusters').noCredentials).toBe(true);
    expect(awsFailure(refused, 'ListClusters')).toMatchObject({reason: 'access_denied'});
    expect(awsFailure(refused, 'ListClusters').noCredentials).toBeUndefined();

    const lines = warnings(report([{cloud: 'AWS', error: awsFailure(missing, 'ListClusters')}, {cloud: 'AWS', error: awsFailure(missing, 'ListClusters')}]));
    expect(lines).toMatchObject([{event: 'no_credentials', cloud: 'AWS'}]);
    expect(lines[0]?.msg).toMatch(/^no AWS credentials found: set AWS_ACCESS_KEY_ID/);
    // One source with working (if refused) credentials: the problem is not "no credentials".
    expect(warnings(report([{cloud: 'AWS', error: awsFailure(missing, 'ListClusters')}, {cloud: 'AWS', error: awsFailure(refused, 'ListClusters')}]))).toEqual([]);
  });

  it('Azure: an identity chain with nothing available is marked and warned about in its own words; a refused secret is not', () => {
    const missing = new AggregateAuthenticationError([new CredentialUnavailableError('EnvironmentCredential is unavailable.'), new CredentialUnavailableError('AzureCliCredential: Azure CLI could not be found.')], 'DefaultAzureCredential failed.');
    const refused = new AggregateAuthenticationError([new AuthenticationError(401, {error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret provided.'})], 'ChainedTokenCredential authentication failed.');
    const failure = azureFailure(missing, 'Subscriptions.List');
    expect(failure.noCredentials).toBe(true);
    expect(azureFailure(refused, 'Subscriptions.List').noCredentials).toBeUndefined();
    const lines = warnings(report([{cloud: 'Azure', error: failure}]));
    expect(lines).toMatchObject([{event: 'no_credentials', cloud: 'Azure', msg: `${failure.message}. The service keeps serving the registry and retries every cycle.`}]);
    expect(warnings(report([{cloud: 'Azure', error: azureFailure(refused, 'Subscriptions.List')}]))).toEqual([]);
  });
});
