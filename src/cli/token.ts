/**
 * `kube-discovery token eks|aks ...`: a kubectl exec credential plugin. Prints one
 * ExecCredential on stdout; on failure prints one line on stderr (never a stack trace,
 * never a secret) and exits 1, or 2 for bad usage.
 */
import {oneLine} from './common.ts';
import {parseArgs} from 'node:util';
import {systemClock, type Clock} from '../core/clock.ts';
import {InputError} from '../core/errors.ts';
import {AZURE_CLOUD_NAMES, isAzureCloudName} from '../clouds/azure/clouds.ts';
import {defaultAzureCredential, type AzureCredentialFactory} from '../credentials/aks-credential.ts';
import {mintEntraToken} from '../credentials/aks-token.ts';
import {AwsCredentialProviders} from '../credentials/aws-credentials.ts';
import {mintEksToken} from '../credentials/eks-token.ts';
import {execCredential} from '../credentials/exec-credential.ts';
import {partitionOf} from '../credentials/sts-endpoint.ts';
import type {CliIo, Command} from './io.ts';

/** What a token sub-command hands back to be printed. */
interface MintedToken {
  readonly token: string;
  readonly expiresAt: Date;
}

/** Injected dependencies of the token command; only tests change them. */
export interface TokenCommandDeps {
  readonly clock?: Clock;
  /** Builds the Entra ID credential of `token aks`; default DefaultAzureCredential. */
  readonly azureCredential?: AzureCredentialFactory;
}

type TokenMinter = (argv: readonly string[], io: CliIo, deps: Required<TokenCommandDeps>) => Promise<MintedToken>;

const USAGE = `usage: kube-discovery token eks --cluster-name NAME --region REGION [--role-arn ARN] [--external-id ID]
       kube-discovery token aks --server-id ID [--tenant-id TENANT] [--client-id ID] [--environment AzurePublicCloud|AzureChinaCloud|AzureUSGovernment]
Prints a client.authentication.k8s.io ExecCredential for kubectl (honours KUBERNETES_EXEC_INFO).
`;

// The SDK warns on the console (multi-line) about e.g. conflicting credential sources; a
// credential plugin must keep stderr to one line, so those are dropped.
const quietLogger = {debug() {}, info() {}, warn() {}, error() {}};

const mintEks: TokenMinter = async (argv, io, {clock}) => {
  const {values} = parse(argv, {
    'cluster-name': {type: 'string'},
    region: {type: 'string'},
    'role-arn': {type: 'string'},
    'external-id': {type: 'string'},
  });
  const clusterName = values['cluster-name'];
  if (typeof clusterName !== 'string' || clusterName === '') throw new InputError('expected --cluster-name NAME, got none');
  // Like `aws eks get-token`, fall back to the SDK's region variables.
  const region = stringValue(values['region']) || io.env['AWS_REGION'] || io.env['AWS_DEFAULT_REGION'];
  if (!region) throw new InputError('expected --region REGION (or AWS_REGION), got none');
  const roleArn = stringValue(values['role-arn']);
  const externalId = stringValue(values['external-id']);
  if (externalId && !roleArn) throw new InputError('expected --role-arn with --external-id, got only --external-id');
  partitionOf(region); // a typo'd region is a usage error, reported before looking for credentials

  const providers = new AwsCredentialProviders({env: io.env, clock, logger: quietLogger});
  const credentials = await providers.provider({region, ...(roleArn ? {roleArn} : {}), ...(externalId ? {externalId} : {})})();
  return mintEksToken({clusterName, region, credentials, clock, env: io.env});
};

// Like `kubelogin get-token --login azurecli|msi|workloadidentity`: whatever DefaultAzureCredential finds.
const mintAks: TokenMinter = async (argv, _io, {azureCredential}) => {
  const {values} = parse(argv, {
    'server-id': {type: 'string'},
    'tenant-id': {type: 'string'},
    'client-id': {type: 'string'},
    environment: {type: 'string'},
  });
  const serverId = stringValue(values['server-id']);
  if (!serverId) throw new InputError('expected --server-id ID (the AKS Entra ID server application, 6dae42f8-4368-4678-94ff-3960e28e3630 for AKS-managed Entra ID), got none');
  if (!/^[\w.:/-]+$/.test(serverId)) throw new InputError(`expected --server-id to be an application id or URI, got ${JSON.stringify(serverId)}`);
  const environment = stringValue(values['environment']) ?? 'AzurePublicCloud';
  if (!isAzureCloudName(environment)) throw new InputError(`expected --environment to be one of ${AZURE_CLOUD_NAMES.join(', ')}, got ${JSON.stringify(environment)}`);
  const tenantId = stringValue(values['tenant-id']);
  const clientId = stringValue(values['client-id']);
  const credential = azureCredential({cloud: environment, ...(tenantId ? {tenantId} : {}), ...(clientId ? {clientId} : {})});
  return mintEntraToken(credential, serverId);
};

// Explicit registration: adding a cloud is one function and one line here.
const minters = {eks: mintEks, aks: mintAks} as const satisfies Record<string, TokenMinter>;

/** Builds the token command with injected dependencies. */
export function tokenCommand(deps: TokenCommandDeps = {}): Command {
  const resolved: Required<TokenCommandDeps> = {clock: deps.clock ?? systemClock, azureCredential: deps.azureCredential ?? defaultAzureCredential};
  return async (argv, io) => {
    const [cloud, ...rest] = argv;
    if (cloud === undefined || cloud === '-h' || cloud === '--help' || cloud === 'help') {
      (cloud === undefined ? io.stderr : io.stdout)(USAGE);
      return cloud === undefined ? 2 : 0;
    }
    if (!Object.hasOwn(minters, cloud)) {
      io.stderr(`kube-discovery token: expected one of ${Object.keys(minters).join(', ')}, got ${JSON.stringify(cloud)}\n${USAGE}`);
      return 2;
    }
    if (rest.includes('-h') || rest.includes('--help')) {
      io.stdout(USAGE);
      return 0;
    }
    try {
      const {token, expiresAt} = await minters[cloud as keyof typeof minters](rest, io, resolved);
      io.stdout(`${JSON.stringify(execCredential(token, expiresAt, io.env))}\n`);
      return 0;
    } catch (error) {
      io.stderr(`kube-discovery token: ${oneLine(error, io)}\n`);
      return error instanceof InputError ? 2 : 1;
    }
  };
}

/** `kube-discovery token ...` with the real clock. */
export const runToken: Command = tokenCommand();

function parse<const O extends Record<string, {type: 'string'}>>(argv: readonly string[], options: O) {
  try {
    return parseArgs({args: [...argv], options, strict: true, allowPositionals: false});
  } catch (error) {
    // parseArgs errors are already one readable line ("Unknown option '--foo'").
    throw new InputError(error instanceof Error ? error.message : String(error));
  }
}

function stringValue(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

