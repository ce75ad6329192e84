/**
 * One EKS source's fetch through a real EKS client, on either read path the service has: the
 * client wrapped and primed as the service uses it (`short`: lean-read.ts, answers read by plans
 * compiled from the SDK's schema) or the SDK's own deserialisers (`sdk`).
 */
import {DescribeClusterCommand, EKSClient, ListClustersCommand} from '@aws-sdk/client-eks';
import PQueue from 'p-queue';
import {createEksFetcher} from '../../src/clouds/aws/eks-fetcher.ts';
import {describeClusterOperation, leanReads, listClustersOperation} from '../../src/clouds/aws/lean-read.ts';
import {leanSdkClient} from '../../src/clouds/aws/lean-sdk.ts';
import {eksSource} from '../../src/clouds/aws/sources.ts';
import type {SourceResult} from '../../src/core/types.ts';

/** A fetcher of `account`'s clusters in `region` (default us-east-1) at `endpoint`; the short path is primed by a listing and a describe of `a1`. */
export async function eksFetcherOf(
  path: 'short' | 'sdk',
  options: {readonly endpoint: string; readonly key: {accessKeyId: string; secretAccessKey: string}; readonly account: string; readonly region?: string},
): Promise<{fetch(): Promise<SourceResult>; destroy(): void}> {
  const region = options.region ?? 'us-east-1';
  const eks = leanSdkClient(new EKSClient({region, endpoint: options.endpoint, credentials: options.key, maxAttempts: 1}));
  let client: Pick<EKSClient, 'send'> = eks;
  if (path === 'short') {
    client = leanReads(eks, [listClustersOperation(ListClustersCommand), describeClusterOperation(DescribeClusterCommand)]);
    await client.send(new ListClustersCommand({}));
    await client.send(new DescribeClusterCommand({name: 'a1'}));
  }
  const fetcher = createEksFetcher({source: eksSource(0, region, options.account), client, describeQueue: new PQueue({concurrency: 4})});
  return {fetch: () => fetcher.fetch(new AbortController().signal), destroy: () => eks.destroy()};
}
