/** The plain-SDK EKS listing the benches' floors share (bench/cycle-driver.ts, bench/describe-batching.ts). */
import {ListClustersCommand, type EKSClient} from '@aws-sdk/client-eks';

/** Every cluster name in the client's region, following `nextToken` 100 names a page, as a plain SDK caller would. */
export async function listClusterNames(client: EKSClient): Promise<string[]> {
  const names: string[] = [];
  let nextToken: string | undefined;
  do {
    const page = await client.send(new ListClustersCommand({maxResults: 100, nextToken}));
    names.push(...(page.clusters ?? []));
    nextToken = page.nextToken;
  } while (nextToken);
  return names;
}
