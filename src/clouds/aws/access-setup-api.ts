/**
 * The EKS calls of automatic access set-up (`setup_access_for_arn`): access entries and
 * access-policy associations of one region, through the real SDK client, plus the caller's
 * own ARN. Every failure becomes an AccessSetupCallError naming the operation, the AWS error
 * code and the IAM action it needs; an answer without the fields we rely on is an error
 * (`InvalidResponse`), never read as "nothing there".
 */
import {
  AssociateAccessPolicyCommand,
  CreateAccessEntryCommand,
  DeleteAccessEntryCommand,
  DescribeAccessEntryCommand,
  DisassociateAccessPolicyCommand,
  EKSClient,
  ListAssociatedAccessPoliciesCommand,
} from '@aws-sdk/client-eks';
import {GetCallerIdentityCommand, STSClient} from '@aws-sdk/client-sts';
import type {AwsCredentialProvider} from '../../credentials/aws-credentials.ts';
import {awsErrorCode} from './errors.ts';
import {errorMessage} from '../../core/errors.ts';
import {pageTokenKey} from '../../core/page-token.ts';

/** An access entry as set-up reads it. */
export interface SetupAccessEntry {
  readonly principalArn: string;
  readonly kubernetesGroups: readonly string[];
  readonly tags: Readonly<Record<string, string>>;
}

/** The calls set-up makes in one region with one identity. */
export interface AccessSetupApi {
  /** The caller's principal ARN (an assumed-role session becomes its role ARN, which EKS maps). */
  callerArn(): Promise<string>;
  /** undefined when the principal has no entry on the cluster. */
  describeAccessEntry(clusterName: string, principalArn: string): Promise<SetupAccessEntry | undefined>;
  createAccessEntry(clusterName: string, principalArn: string, groups: readonly string[], tags: Readonly<Record<string, string>>): Promise<void>;
  /** false when there was nothing to delete (entry or cluster already gone). */
  deleteAccessEntry(clusterName: string, principalArn: string): Promise<boolean>;
  /** ARNs of the access policies associated with the principal's entry, every page. */
  listAssociatedAccessPolicies(clusterName: string, principalArn: string): Promise<string[]>;
  associateAccessPolicy(clusterName: string, principalArn: string, policyArn: string): Promise<void>;
  /** false when the association (or the entry, or the cluster) was already gone. */
  disassociateAccessPolicy(clusterName: string, principalArn: string, policyArn: string): Promise<boolean>;
}

/** IAM action of each operation, named in health messages when AWS denies it. */
export const SETUP_IAM_ACTIONS: Readonly<Record<string, string>> = {
  GetCallerIdentity: 'sts:GetCallerIdentity',
  DescribeAccessEntry: 'eks:DescribeAccessEntry',
  CreateAccessEntry: 'eks:CreateAccessEntry',
  DeleteAccessEntry: 'eks:DeleteAccessEntry',
  ListAssociatedAccessPolicies: 'eks:ListAssociatedAccessPolicies',
  AssociateAccessPolicy: 'eks:AssociateAccessPolicy',
  DisassociateAccessPolicy: 'eks:DisassociateAccessPolicy',
};

/** One set-up call failed; `code` is AWS's error code, `InvalidResponse`, or a transport code. */
export class AccessSetupCallError extends Error {
  override readonly name = 'AccessSetupCallError';
  readonly operation: string;
  readonly code: string;
  /** The IAM action the operation needs, e.g. `eks:CreateAccessEntry`. */
  readonly iamAction: string;

  constructor(operation: string, code: string, message: string, options?: {cause?: unknown}) {
    super(message, options);
    this.operation = operation;
    this.code = code;
    this.iamAction = SETUP_IAM_ACTIONS[operation] ?? `eks:${operation}`;
  }
}

/** Options of createAccessSetupApi. */
export interface AccessSetupApiOptions {
  readonly region: string;
  readonly credentials: AwsCredentialProvider;
  /** Deadline of one HTTP attempt: a hung call fails the step instead of stalling the cycle. */
  readonly requestTimeoutMs: number;
  readonly maxAttempts?: number;
  /** Called with every SDK client built (metrics middleware). */
  readonly onClient?: (client: EKSClient | STSClient) => void;
}

const NOT_FOUND = 'ResourceNotFoundException';
/** Pages one policy listing may take: an identity has a handful of access policies, far below one page each. */
const MAX_POLICY_PAGES = 100;

/** The set-up calls of one region, through real SDK clients; `close` releases them. */
export function createAccessSetupApi(options: AccessSetupApiOptions): AccessSetupApi & {close(): void} {
  const common = {
    region: options.region,
    credentials: options.credentials,
    maxAttempts: options.maxAttempts ?? 3,
    // Without throwOnRequestTimeout the SDK only warns when requestTimeout passes, and a hung call would stall the cycle.
    requestHandler: {connectionTimeout: Math.min(5_000, options.requestTimeoutMs), requestTimeout: options.requestTimeoutMs, throwOnRequestTimeout: true},
  };
  const eks = new EKSClient(common);
  const sts = new STSClient(common);
  options.onClient?.(eks);
  options.onClient?.(sts);
  const call = async <T>(operation: string, run: () => Promise<T>, onNotFound?: () => T): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      if (error instanceof AccessSetupCallError) throw error;
      const code = awsErrorCode(error);
      if (code === NOT_FOUND && onNotFound) return onNotFound();
      const text = errorMessage(error).split('\n')[0] ?? '';
      throw new AccessSetupCallError(operation, code, `${operation} failed: ${code}: ${text}`, {cause: error});
    }
  };
  const invalid = (operation: string, what: string): AccessSetupCallError =>
    new AccessSetupCallError(operation, 'InvalidResponse', `${operation} answered without ${what}`);
  return {
    callerArn: () =>
      call('GetCallerIdentity', async () => {
        const out = await sts.send(new GetCallerIdentityCommand({}));
        if (!out.Arn) throw invalid('GetCallerIdentity', 'Arn');
        return principalOf(out.Arn);
      }),
    describeAccessEntry: (clusterName, principalArn) =>
      call(
        'DescribeAccessEntry',
        async () => {
          const out = await eks.send(new DescribeAccessEntryCommand({clusterName, principalArn}));
          const entry = out.accessEntry;
          if (!entry?.principalArn) throw invalid('DescribeAccessEntry', 'accessEntry.principalArn');
          return {principalArn: entry.principalArn, kubernetesGroups: entry.kubernetesGroups ?? [], tags: entry.tags ?? {}};
        },
        () => undefined,
      ),
    createAccessEntry: (clusterName, principalArn, groups, tags) =>
      call('CreateAccessEntry', async () => {
        const out = await eks.send(new CreateAccessEntryCommand({clusterName, principalArn, kubernetesGroups: [...groups], type: 'STANDARD', tags: {...tags}}));
        if (!out.accessEntry) throw invalid('CreateAccessEntry', 'accessEntry');
      }),
    deleteAccessEntry: (clusterName, principalArn) =>
      call(
        'DeleteAccessEntry',
        async () => {
          await eks.send(new DeleteAccessEntryCommand({clusterName, principalArn}));
          return true;
        },
        () => false,
      ),
    listAssociatedAccessPolicies: (clusterName, principalArn) =>
      call('ListAssociatedAccessPolicies', async () => {
        const arns: string[] = [];
        // The step runs inside the cycle's slot and each call's deadline bounds only that call: a token
        // that comes back (or pages without end) would stall every later cycle, so it fails the call.
        const seen = new Set<string>();
        let nextToken: string | undefined;
        do {
          const out = await eks.send(new ListAssociatedAccessPoliciesCommand({clusterName, principalArn, ...(nextToken ? {nextToken} : {})}));
          if (!Array.isArray(out.associatedAccessPolicies)) throw invalid('ListAssociatedAccessPolicies', 'associatedAccessPolicies');
          for (const p of out.associatedAccessPolicies) if (p.policyArn) arns.push(p.policyArn);
          nextToken = out.nextToken || undefined;
          if (nextToken !== undefined) {
            const key = pageTokenKey(nextToken);
            if (seen.has(key)) throw new AccessSetupCallError('ListAssociatedAccessPolicies', 'InvalidResponse', 'ListAssociatedAccessPolicies failed: InvalidResponse: the listing gave a nextToken it had already given');
            if (seen.size >= MAX_POLICY_PAGES) throw new AccessSetupCallError('ListAssociatedAccessPolicies', 'InvalidResponse', `ListAssociatedAccessPolicies failed: InvalidResponse: more than ${MAX_POLICY_PAGES} pages`);
            seen.add(key);
          }
        } while (nextToken);
        return arns;
      }),
    associateAccessPolicy: (clusterName, principalArn, policyArn) =>
      call('AssociateAccessPolicy', async () => {
        const out = await eks.send(new AssociateAccessPolicyCommand({clusterName, principalArn, policyArn, accessScope: {type: 'cluster'}}));
        if (!out.associatedAccessPolicy) throw invalid('AssociateAccessPolicy', 'associatedAccessPolicy');
      }),
    disassociateAccessPolicy: (clusterName, principalArn, policyArn) =>
      call(
        'DisassociateAccessPolicy',
        async () => {
          await eks.send(new DisassociateAccessPolicyCommand({clusterName, principalArn, policyArn}));
          return true;
        },
        () => false,
      ),
    close: () => {
      eks.destroy();
      sts.destroy();
    },
  };
}

/** `arn:aws:sts::A:assumed-role/R/S` → `arn:aws:iam::A:role/R` (role paths are not in session ARNs); other ARNs unchanged. */
export function principalOf(arn: string): string {
  const m = /^arn:([\w-]+):sts::(\d{12}):assumed-role\/([^/]+)\/.+$/.exec(arn);
  return m ? `arn:${m[1]}:iam::${m[2]}:role/${m[3]}` : arn;
}
