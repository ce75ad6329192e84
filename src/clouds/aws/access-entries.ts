/**
 * The EKS calls of `configure eks`: the cluster's endpoint, CA and authentication mode
 * (DescribeCluster), and the access entry of one principal (DescribeAccessEntry,
 * CreateAccessEntry). Access entries are never updated or deleted here: an entry someone
 * else made is reported, not changed.
 */
import {CreateAccessEntryCommand, DescribeAccessEntryCommand, DescribeClusterCommand, EKSClient} from '@aws-sdk/client-eks';
import type {AwsCredentialProvider} from '../../credentials/aws-credentials.ts';
import type {Env} from '../../credentials/sts-endpoint.ts';
import {awsErrorCode} from './errors.ts';
import {errorMessage} from '../../core/errors.ts';

/** What configure needs to know about a cluster. */
export interface EksClusterAccess {
  readonly name: string;
  readonly arn: string;
  readonly status: string;
  /** `API`, `API_AND_CONFIG_MAP` or `CONFIG_MAP`. */
  readonly authenticationMode: string;
  readonly endpoint?: string;
  /** PEM of the cluster CA (decoded from DescribeCluster's base64). */
  readonly caPem?: string;
}

/** An access entry as configure compares it. */
export interface EksAccessEntry {
  readonly principalArn: string;
  readonly kubernetesGroups: readonly string[];
  readonly username?: string;
  readonly type?: string;
}

/** The EKS operations configure uses. */
export interface EksAccessApi {
  describeCluster(name: string): Promise<EksClusterAccess>;
  /** undefined when the principal has no entry on the cluster. */
  describeAccessEntry(clusterName: string, principalArn: string): Promise<EksAccessEntry | undefined>;
  createAccessEntry(clusterName: string, principalArn: string, kubernetesGroups: readonly string[]): Promise<EksAccessEntry>;
  close(): void;
}

/** An EKS call failed; the message names the operation, the AWS error code and what to check. */
export class EksAccessError extends Error {
  override readonly name = 'EksAccessError';
  readonly code: string;
  readonly operation: string;

  constructor(message: string, operation: string, code: string, options?: {cause?: unknown}) {
    super(message, options);
    this.operation = operation;
    this.code = code;
  }
}

/** Options of createEksAccessApi. */
export interface EksAccessApiOptions {
  readonly region: string;
  readonly credentials: AwsCredentialProvider;
  /** Read for `AWS_ENDPOINT_URL_EKS` / `AWS_ENDPOINT_URL` (the SDK reads process.env itself too). */
  readonly env?: Env;
}

/** The EKS API of one region, through the real SDK client. */
export function createEksAccessApi(options: EksAccessApiOptions): EksAccessApi {
  const endpoint = configuredEksEndpoint(options.env ?? {});
  const client = new EKSClient({region: options.region, credentials: options.credentials, ...(endpoint ? {endpoint} : {})});
  const send = async <T>(operation: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw eksError(operation, error);
    }
  };
  return {
    async describeCluster(name) {
      const out = await send('DescribeCluster', () => client.send(new DescribeClusterCommand({name})));
      const cluster = out.cluster;
      if (!cluster?.name || !cluster.arn) throw new EksAccessError(`DescribeCluster returned no cluster for ${name}`, 'DescribeCluster', 'InvalidResponse');
      const caData = cluster.certificateAuthority?.data;
      return {
        name: cluster.name,
        arn: cluster.arn,
        status: cluster.status ?? 'UNKNOWN',
        // Clusters created before access entries existed report no mode: they use aws-auth.
        authenticationMode: cluster.accessConfig?.authenticationMode ?? 'CONFIG_MAP',
        ...(cluster.endpoint ? {endpoint: cluster.endpoint} : {}),
        ...(caData ? {caPem: Buffer.from(caData, 'base64').toString('utf8')} : {}),
      };
    },
    async describeAccessEntry(clusterName, principalArn) {
      try {
        const out = await client.send(new DescribeAccessEntryCommand({clusterName, principalArn}));
        return out.accessEntry ? toEntry(out.accessEntry, principalArn) : undefined;
      } catch (error) {
        if (awsErrorCode(error) === 'ResourceNotFoundException') return undefined;
        throw eksError('DescribeAccessEntry', error);
      }
    },
    async createAccessEntry(clusterName, principalArn, kubernetesGroups) {
      const out = await send('CreateAccessEntry', () =>
        client.send(new CreateAccessEntryCommand({clusterName, principalArn, kubernetesGroups: [...kubernetesGroups], type: 'STANDARD'})),
      );
      return out.accessEntry ? toEntry(out.accessEntry, principalArn) : {principalArn, kubernetesGroups};
    },
    close: () => client.destroy(),
  };
}

function toEntry(entry: {principalArn?: string; kubernetesGroups?: string[]; username?: string; type?: string}, principalArn: string): EksAccessEntry {
  return {
    principalArn: entry.principalArn ?? principalArn,
    kubernetesGroups: entry.kubernetesGroups ?? [],
    ...(entry.username ? {username: entry.username} : {}),
    ...(entry.type ? {type: entry.type} : {}),
  };
}

function eksError(operation: string, error: unknown): EksAccessError {
  if (error instanceof EksAccessError) return error;
  const code = awsErrorCode(error);
  const message = errorMessage(error).split('\n')[0] ?? '';
  const hint =
    code === 'AccessDeniedException'
      ? ' (grant the identity running configure deploy/aws/configure-policy.json)'
      : code === 'ResourceNotFoundException'
        ? ' (check --cluster-name and --region)'
        : '';
  return new EksAccessError(`EKS ${operation} failed: ${code}: ${message}${hint}`, operation, code, {cause: error});
}

/** `AWS_ENDPOINT_URL_EKS`, else `AWS_ENDPOINT_URL`, as the SDK's own resolution reads them. */
function configuredEksEndpoint(env: Env): string | undefined {
  if (env['AWS_IGNORE_CONFIGURED_ENDPOINT_URLS']?.toLowerCase() === 'true') return undefined;
  return env['AWS_ENDPOINT_URL_EKS'] || env['AWS_ENDPOINT_URL'] || undefined;
}
