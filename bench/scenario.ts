/**
 * Scenarios of the cloud simulator (`bench/scenarios/*.json|yaml`): how many accounts, regions
 * and clusters, which share is unhealthy or in another state, latency, rate limits, failures and
 * churn. Validated with zod so a typo in a scenario fails with its path, not with a quiet default.
 */
import {readFile} from 'node:fs/promises';
import path from 'node:path';
import {parse as parseYaml} from 'yaml';
import * as z from 'zod';

const rateLimit = z.strictObject({rate_per_second: z.number().positive(), burst: z.number().int().min(1)});
const share = z.number().min(0).max(1);
const latency = z.union([z.number().min(0), z.record(z.string(), z.number().min(0))]);

const awsSchema = z.strictObject({
  /** Number of accounts; the first is the management account the service runs in, the others are reached by AssumeRole. */
  accounts: z.number().int().min(1).max(50).default(1),
  /** Region names, or how many of the built-in list to take. */
  regions: z.union([z.array(z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/)).min(1), z.number().int().min(1).max(30)]),
  /** Clusters per (account, region), counting those in other states. */
  clusters_per_region: z.number().int().min(0),
  /** Share of clusters in states discovery skips (CREATING, DELETING, FAILED). */
  other_status_share: share.default(0),
  /** Items per ListClusters page (EKS answers up to 100). */
  page_size: z.number().int().min(1).max(100).default(100),
  latency_ms: latency.default(0),
  /** Token buckets per (region, operation): `{DescribeCluster: {rate_per_second, burst}, '*': ...}`. */
  rate_limits: z.record(z.string(), rateLimit).optional(),
  /** Regions whose every EKS call fails with `fail_code`. */
  fail_regions: z.array(z.string()).default([]),
  fail_code: z.string().default('ServiceUnavailableException'),
});

const azureSchema = z.strictObject({
  subscriptions: z.number().int().min(1).max(50),
  resource_groups_per_subscription: z.number().int().min(1).default(1),
  clusters_per_resource_group: z.number().int().min(0),
  locations: z.array(z.string().regex(/^[a-z0-9]+$/)).min(1).default(['eastus', 'westeurope']),
  /** Share of clusters with Entra ID integration (probed with an Entra token rather than the local account). */
  aad_share: share.default(0.5),
  /** Share of clusters not provisioned or not running. */
  other_status_share: share.default(0),
  page_size: z.number().int().min(1).default(100),
  latency_ms: z.number().min(0).default(0),
  /** Token buckets per (subscription, operation); an empty bucket answers 429 with Retry-After. */
  rate_limits: z.record(z.string(), rateLimit).optional(),
  /** How many subscriptions (the last ones) answer every call with 403 AuthorizationFailed. */
  failing_subscriptions: z.number().int().min(0).default(0),
  /** Spread the subscriptions over this many management groups under `sim-root` (every other one nested a level deeper); the matcher then names `management_groups: [sim-root]`. */
  management_groups: z.number().int().min(1).optional(),
});

const kubeSchema = z.strictObject({
  /** HTTPS Kubernetes API servers shared by the healthy clusters (unhealthy ones get their own). */
  servers: z.number().int().min(1).max(256).default(8),
  /** EKS clusters without an access entry for the discovery identity: the probe gets 401. */
  unmapped: z.number().int().min(0).default(0),
  /** Clusters whose RBAC denies `impersonate`: the probe's SelfSubjectAccessReview says no. */
  forbidden: z.number().int().min(0).default(0),
});

const churnSchema = z.strictObject({
  /** Share of clusters changed per churn step: a third created, a third deleted, a third retagged. */
  percent: z.number().min(0).max(100),
  /** Churn on a timer as well as on `POST /churn`. */
  every_seconds: z.number().positive().optional(),
});

/** The scenario schema. */
export const scenarioSchema = z.strictObject({
  name: z.string().min(1),
  description: z.string().optional(),
  /** Seeds names, tags and churn so two runs see the same world. */
  seed: z.number().int().default(1),
  aws: awsSchema.optional(),
  azure: azureSchema.optional(),
  kube: kubeSchema.optional(),
  churn: churnSchema.optional(),
  /**
   * How the bench configures the service under test for this workload: extra `discovery_service`
   * keys (e.g. W3's `aws_rate_limits` matched to the simulated quotas); `--discovery` adds to them.
   */
  service: z.strictObject({discovery: z.record(z.string(), z.unknown()).default({})}).optional(),
});

/** A validated scenario. */
export type Scenario = z.output<typeof scenarioSchema>;
/** The `aws` part of a scenario. */
export type AwsScenario = NonNullable<Scenario['aws']>;
/** The `azure` part of a scenario. */
export type AzureScenario = NonNullable<Scenario['azure']>;
/** The `kube` part of a scenario. */
export type KubeScenario = NonNullable<Scenario['kube']>;

/** Validates a parsed scenario document; the error names every bad key path. */
export function parseScenario(doc: unknown, source: string): Scenario {
  const result = scenarioSchema.safeParse(doc);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`).join('\n');
    throw new Error(`scenario ${source} is invalid:\n${problems}`);
  }
  return result.data;
}

/** Reads a scenario from a `.json`, `.yaml` or `.yml` file. */
export async function loadScenario(file: string): Promise<Scenario> {
  const text = await readFile(file, 'utf8');
  const ext = path.extname(file).toLowerCase();
  let doc: unknown;
  try {
    doc = ext === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new Error(`scenario ${file}: expected ${ext === '.json' ? 'JSON' : 'YAML'}, found a syntax error: ${(error as Error).message}`, {cause: error});
  }
  return parseScenario(doc, file);
}

/** Regions the simulator hands out when a scenario asks for a count. */
export const REGIONS: readonly string[] = [
  'us-east-1', 'us-east-2', 'us-west-1', 'us-west-2', 'eu-west-1', 'eu-west-2', 'eu-west-3', 'eu-central-1',
  'eu-north-1', 'eu-south-1', 'ap-south-1', 'ap-northeast-1', 'ap-northeast-2', 'ap-northeast-3', 'ap-southeast-1',
  'ap-southeast-2', 'ap-east-1', 'ca-central-1', 'sa-east-1', 'me-south-1', 'af-south-1', 'il-central-1',
  'me-central-1', 'ap-south-2', 'ap-southeast-3', 'ap-southeast-4', 'eu-central-2', 'eu-south-2', 'ca-west-1', 'mx-central-1',
];

/** The region names of an AWS scenario. */
export function regionsOf(aws: AwsScenario): string[] {
  return typeof aws.regions === 'number' ? REGIONS.slice(0, aws.regions) : [...aws.regions];
}

/** The account ids of an AWS scenario; the first is the management account. */
export function accountsOf(aws: AwsScenario): string[] {
  return Array.from({length: aws.accounts}, (_, i) => String(111111111111 * (i + 1) % 1e12).padStart(12, '0'));
}
