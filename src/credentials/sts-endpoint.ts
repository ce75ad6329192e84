/**
 * Where an EKS token's presigned STS request points: the regional STS endpoint of the
 * region's partition, or the endpoint the user configured through the SDK's own
 * `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL` variables.
 */
import {InputError} from '../core/errors.ts';

/** Environment variables read here; a plain record so tests pass their own. */
export type Env = Readonly<Record<string, string | undefined>>;

/** An AWS partition: its id and the DNS suffix of its regional endpoints. */
export interface AwsPartition {
  readonly id: string;
  readonly dnsSuffix: string;
}

// Copied from the SDK's partitions.json (shipped inside @aws-sdk/core, which is not a direct
// dependency, so we don't import it). Order matters: the aws pattern is the broadest.
const PARTITIONS: readonly (AwsPartition & {readonly regionRegex: RegExp})[] = [
  {id: 'aws-cn', dnsSuffix: 'amazonaws.com.cn', regionRegex: /^cn-\w+-\d+$/},
  {id: 'aws-us-gov', dnsSuffix: 'amazonaws.com', regionRegex: /^us-gov-\w+-\d+$/},
  {id: 'aws-iso', dnsSuffix: 'c2s.ic.gov', regionRegex: /^us-iso-\w+-\d+$/},
  {id: 'aws-iso-b', dnsSuffix: 'sc2s.sgov.gov', regionRegex: /^us-isob-\w+-\d+$/},
  {id: 'aws-iso-e', dnsSuffix: 'cloud.adc-e.uk', regionRegex: /^eu-isoe-\w+-\d+$/},
  {id: 'aws-iso-f', dnsSuffix: 'csp.hci.ic.gov', regionRegex: /^us-isof-\w+-\d+$/},
  {id: 'aws-eusc', dnsSuffix: 'amazonaws.eu', regionRegex: /^eusc-de-\w+-\d+$/},
  {id: 'aws', dnsSuffix: 'amazonaws.com', regionRegex: /^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$/},
];

// Like the SDK, a well-formed region no pattern knows yet (a brand-new prefix) falls back to
// the aws partition; anything else is a typo we refuse rather than sign for.
const REGION_SHAPE = /^[a-z]{2,5}(-[a-z]+)+-\d+$/;

/** The partition a region belongs to; throws InputError for something that is not a region. */
export function partitionOf(region: string): AwsPartition {
  for (const {id, dnsSuffix, regionRegex} of PARTITIONS) {
    if (regionRegex.test(region)) return {id, dnsSuffix};
  }
  if (REGION_SHAPE.test(region)) return {id: 'aws', dnsSuffix: 'amazonaws.com'};
  throw new InputError(`expected an AWS region such as us-east-1 or cn-north-1, got ${JSON.stringify(region)}`);
}

/**
 * The STS endpoint URL the user configured for the SDK (`AWS_ENDPOINT_URL_STS`, else
 * `AWS_ENDPOINT_URL`), unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is true; undefined when none.
 */
export function configuredStsEndpoint(env: Env): URL | undefined {
  if (env['AWS_IGNORE_CONFIGURED_ENDPOINT_URLS']?.toLowerCase() === 'true') return undefined;
  const raw = env['AWS_ENDPOINT_URL_STS'] || env['AWS_ENDPOINT_URL'];
  if (!raw) return undefined;
  try {
    return new URL(raw);
  } catch {
    throw new InputError(`expected AWS_ENDPOINT_URL_STS to be an absolute URL, got ${JSON.stringify(raw)}`);
  }
}

/**
 * The endpoint a token for `region` is presigned for: the configured one when set (the token
 * then targets that endpoint, which is what a user pointing at a test STS wants), else
 * `https://sts.<region>.<partition suffix>/`.
 */
export function stsEndpoint(region: string, env: Env = {}): URL {
  const partition = partitionOf(region);
  return configuredStsEndpoint(env) ?? new URL(`https://sts.${region}.${partition.dnsSuffix}/`);
}
