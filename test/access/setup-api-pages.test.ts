/**
 * The one paged call of EKS access set-up, `ListAssociatedAccessPolicies`, at the SDK command level
 * (aws-sdk-client-mock): a `nextToken` that comes back was followed for ever — each page's policies
 * kept, and the set-up step, which runs inside the cycle's slot, never ended, so no later cycle ran
 * (a per-request deadline bounds each call, not the loop). It fails the call instead; a listing that
 * pages properly is still read to its last page.
 */
import {EKSClient, ListAssociatedAccessPoliciesCommand} from '@aws-sdk/client-eks';
import {mockClient} from 'aws-sdk-client-mock';
import {afterEach, describe, expect, it} from 'vitest';
import {createAccessSetupApi} from '../../src/clouds/aws/access-setup-api.ts';

const eks = mockClient(EKSClient);
afterEach(() => eks.reset());

const api = () => createAccessSetupApi({region: 'us-east-1', credentials: async () => ({accessKeyId: 'AKIDSETUPPAGES', secretAccessKey: 'setup-pages-secret'}), requestTimeoutMs: 5_000, maxAttempts: 1});
const policy = (name: string) => ({policyArn: `arn:aws:eks::aws:cluster-access-policy/${name}`, accessScope: {type: 'cluster' as const}});

describe('ListAssociatedAccessPolicies paging', () => {
  it('reads every page of a listing that pages properly', async () => {
    eks.on(ListAssociatedAccessPoliciesCommand).callsFake((input: {nextToken?: string}) =>
      input.nextToken === undefined ? {associatedAccessPolicies: [policy('A')], nextToken: 't1'} : {associatedAccessPolicies: [policy('B')]},
    );
    const setup = api();
    expect(await setup.listAssociatedAccessPolicies('c', 'arn:aws:iam::111111111111:role/r')).toEqual([policy('A').policyArn, policy('B').policyArn]);
    setup.close();
  });

  it('fails at a nextToken it already gave, instead of following it for ever', async () => {
    let calls = 0;
    // Past 50 calls the mock fails them, so a loop that follows the token ends (with another error) instead of hanging the suite.
    eks.on(ListAssociatedAccessPoliciesCommand).callsFake(() => {
      if (++calls > 50) throw Object.assign(new Error('stop'), {name: 'ServerException'});
      return {associatedAccessPolicies: [policy('A')], nextToken: 'same-page-again'};
    });
    const setup = api();
    await expect(setup.listAssociatedAccessPolicies('c', 'arn:aws:iam::111111111111:role/r')).rejects.toThrow(/InvalidResponse.*nextToken it had already given/);
    expect(calls).toBe(2);
    setup.close();
  });
});
