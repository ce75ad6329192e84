/**
 * Planning of single-account EKS sources: the regional clients are built while the caller's
 * account is looked up (one STS round trip off a first cycle's critical path), and a lookup
 * that fails still fails every source of the matcher.
 */
import {describe, expect, it} from 'vitest';
import {AwsSources} from '../../src/clouds/aws/sources.ts';
import type {EksApi} from '../../src/clouds/aws/eks-fetcher.ts';
import {flushMicrotasks} from '../helpers/fake-clock.ts';

function deferred<T>(): {promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void} {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return {promise, resolve, reject};
}

const unusedClient: EksApi = {send: () => Promise.reject(new Error('not called in planning'))};

describe('AwsSources.plan', () => {
  it('builds every regional client while the account lookup is still running', async () => {
    const account = deferred<string>();
    const built: string[] = [];
    const sources = new AwsSources({
      callerAccount: () => account.promise,
      makeEksClient: (region) => (built.push(region), unusedClient),
      credentialProvider: () => async () => ({accessKeyId: 'AKIAPLAN000000000001', secretAccessKey: 'plan-secret'}),
    });
    const planned = sources.plan([{types: ['eks'], regions: ['us-east-1', 'eu-west-1', 'ap-south-1']}]);
    await flushMicrotasks();
    expect(built).toEqual(['us-east-1', 'eu-west-1', 'ap-south-1']);
    account.resolve('123456789012');
    const {fetchers, failed} = await planned;
    expect(failed).toEqual([]);
    expect(fetchers.map((f) => f.source.id)).toEqual(['eks:us-east-1:123456789012', 'eks:eu-west-1:123456789012', 'eks:ap-south-1:123456789012']);
    // Clients are kept: the next cycle builds none.
    await sources.plan([{types: ['eks'], regions: ['us-east-1', 'eu-west-1', 'ap-south-1']}]);
    expect(built).toHaveLength(3);
  });

  it('fails every source of the matcher when the account lookup fails', async () => {
    const sources = new AwsSources({
      callerAccount: () => Promise.reject(Object.assign(new Error('denied'), {name: 'AccessDenied', $metadata: {httpStatusCode: 403}})),
      makeEksClient: () => unusedClient,
      credentialProvider: () => async () => ({accessKeyId: 'AKIAPLAN000000000001', secretAccessKey: 'plan-secret'}),
    });
    const {fetchers, failed} = await sources.plan([{types: ['eks'], regions: ['us-east-1', 'eu-west-1']}]);
    expect(fetchers).toEqual([]);
    expect(failed.map((f) => [f.source.region, f.ok, f.error?.operation])).toEqual([
      ['us-east-1', false, 'GetCallerIdentity'],
      ['eu-west-1', false, 'GetCallerIdentity'],
    ]);
  });

  it('looks the account up again when the default credentials change to other keys, and only then', async () => {
    // The default chain's keys can change while the process runs (a refreshed role session). A
    // listing signed with keys of account B, recorded as account A's, would deregister A's clusters
    // and register B's under A.
    let key = {accessKeyId: 'AKIAPLANACCOUNTA0001', secretAccessKey: 'plan-secret-a'};
    const accounts: Record<string, string> = {AKIAPLANACCOUNTA0001: '111111111111', AKIAPLANACCOUNTB0001: '222222222222'};
    const lookups: string[] = [];
    const sources = new AwsSources({
      callerAccount: async (credentials) => {
        const {accessKeyId} = await credentials();
        lookups.push(accessKeyId);
        return accounts[accessKeyId] ?? '000000000000';
      },
      makeEksClient: () => unusedClient,
      credentialProvider: () => async () => key,
    });
    const matchers = [{types: ['eks' as const], regions: ['us-east-1']}];
    const ids = async (): Promise<string[]> => (await sources.plan(matchers)).fetchers.map((f) => f.source.id);
    expect(await ids()).toEqual(['eks:us-east-1:111111111111']);
    expect(await ids()).toEqual(['eks:us-east-1:111111111111']);
    key = {accessKeyId: 'AKIAPLANACCOUNTB0001', secretAccessKey: 'plan-secret-b'};
    expect(await ids()).toEqual(['eks:us-east-1:222222222222']);
    expect(await ids()).toEqual(['eks:us-east-1:222222222222']);
    expect(lookups).toEqual(['AKIAPLANACCOUNTA0001', 'AKIAPLANACCOUNTB0001']);
  });
});
