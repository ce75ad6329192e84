/**
 * Region lists per AWS partition, used when a matcher says `regions: ["*"]`.
 * Opt-in regions that the account has not enabled answer with an authentication
 * error; the fetcher skips those quietly and counts them instead of failing.
 */

/** Partition ids discovery knows how to expand. */
export type AwsPartition = 'aws' | 'aws-cn' | 'aws-us-gov';

const REGIONS: Readonly<Record<AwsPartition, readonly string[]>> = {
  aws: [
    'af-south-1', 'ap-east-1', 'ap-east-2', 'ap-northeast-1', 'ap-northeast-2', 'ap-northeast-3',
    'ap-south-1', 'ap-south-2', 'ap-southeast-1', 'ap-southeast-2', 'ap-southeast-3', 'ap-southeast-4',
    'ap-southeast-5', 'ap-southeast-6', 'ap-southeast-7', 'ca-central-1', 'ca-west-1', 'eu-central-1',
    'eu-central-2', 'eu-north-1', 'eu-south-1', 'eu-south-2', 'eu-west-1', 'eu-west-2', 'eu-west-3',
    'il-central-1', 'me-central-1', 'me-south-1', 'mx-central-1', 'sa-east-1', 'us-east-1', 'us-east-2',
    'us-west-1', 'us-west-2',
  ],
  'aws-cn': ['cn-north-1', 'cn-northwest-1'],
  'aws-us-gov': ['us-gov-east-1', 'us-gov-west-1'],
};

/**
 * Regions an account must opt in to (launched after March 2019). Only these can answer "not
 * enabled"; the same error from a default region means the credentials are bad, which must
 * fail the source rather than empty it.
 */
export const OPT_IN_REGIONS: ReadonlySet<string> = new Set([
  'af-south-1', 'ap-east-1', 'ap-east-2', 'ap-south-2', 'ap-southeast-3', 'ap-southeast-4', 'ap-southeast-5',
  'ap-southeast-6', 'ap-southeast-7', 'ca-west-1', 'eu-central-2', 'eu-south-1', 'eu-south-2', 'il-central-1',
  'me-central-1', 'me-south-1', 'mx-central-1',
]);

/** DNS suffix of each partition's regional endpoints. */
export const PARTITION_DNS_SUFFIX: Readonly<Record<AwsPartition, string>> = {
  aws: 'amazonaws.com',
  'aws-cn': 'amazonaws.com.cn',
  'aws-us-gov': 'amazonaws.com',
};

/** The partition a region belongs to (`cn-*` → aws-cn, `us-gov-*` → aws-us-gov, else aws). */
export function partitionOfRegion(region: string): AwsPartition {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  return 'aws';
}

/** The partition named in an ARN (`arn:aws-cn:iam::...`), or undefined for anything else. */
export function partitionOfArn(arn: string): AwsPartition | undefined {
  const p = arn.split(':')[1];
  return p === 'aws' || p === 'aws-cn' || p === 'aws-us-gov' ? p : undefined;
}

/** Every region of a partition. */
export function regionsOfPartition(partition: AwsPartition): readonly string[] {
  return REGIONS[partition];
}

/**
 * Expands a matcher's region list: `["*"]` becomes every region of the partition,
 * other lists are de-duplicated in order.
 */
export function expandRegions(regions: readonly string[], partition: AwsPartition): string[] {
  if (regions.includes('*')) return [...regionsOfPartition(partition)];
  return [...new Set(regions)];
}
