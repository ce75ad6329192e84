/**
 * `kube-discovery token eks|aks ...`: a kubectl exec credential plugin. Prints one
 * ExecCredential on stdout; on failure prints one line on stderr (never a stack trace,
 * never a secret) and exits 1, or 2 for bad usage.
 */
import {oneLine} from './common.ts';
import {systemClock, type Clock} from '../core/clock.ts';
import {errorMessage, InputError} from '../core/errors.ts';
import {AZURE_CLOUD_NAMES, isAzureCloudName} from '../clouds/azure/clouds.ts';
import type {AzureClientOptions} from '../clouds/azure/pipeline.ts';
import {defaultAzureCredential, type AzureCredentialFactory} from '../credentials/aks-credential.ts';
import {AKS_SERVER_ID, mintEntraToken} from '../credentials/aks-token.ts';
import {AwsCredentialProviders} from '../credentials/aws-credentials.ts';
import {mintEksToken} from '../credentials/eks-token.ts';
import {execCredential} from '../credentials/exec-credential.ts';
import {partitionOf} from '../credentials/sts-endpoint.ts';
import {unknownRegionHint} from '../config/region-hints.ts';
import type {CliIo, Command} from './io.ts';
import {flagsOf} from './flags.ts';

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
  /** TLS and pipeline options of the Resource Manager client of `token aks` (tests trust their fake's CA). */
  readonly azureClientOptions?: AzureClientOptions;
}

type TokenMinter = (argv: readonly string[], io: CliIo, deps: Required<TokenCommandDeps>) => Promise<MintedToken>;

const USAGE = `usage: kube-discovery token eks --cluster-name NAME --region REGION [--role-arn ARN] [--external-id ID]
       kube-discovery token aks (--server-id ID | --subscription S --resource-group G --name N) [--tenant-id TENANT] [--client-id ID]
                                [--environment AzurePublicCloud|AzureChinaCloud|AzureUSGovernment] [--resource-manager-endpoint URL]
Prints a client.authentication.k8s.io ExecCredential for kubectl (honours KUBERNETES_EXEC_INFO).
  token eks   a presigned STS token, like \`aws eks get-token\` (credentials from the AWS SDK default chain)
  token aks   with --server-id: an Entra ID token for <server-id>/.default (DefaultAzureCredential);
              without: the cluster's user credential from listClusterUserCredential (local accounts),
              or an Entra ID token when that credential says the cluster uses Entra ID.
              --resource-manager-endpoint (or KUBE_DISCOVERY_ARM_ENDPOINT) replaces the cloud's Resource Manager URL.
`;

// The SDK warns on the console (multi-line) about e.g. conflicting credential sources; a
// credential plugin must keep stderr to one line, so those are dropped.
const quietLogger = {debug() {}, info() {}, warn() {}, error() {}};

const mintEks: TokenMinter = async (argv, io, {clock}) => {
  const {values} = flagsOf(argv, {
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
  try {
    const credentials = await providers.provider({region, ...(roleArn ? {roleArn} : {}), ...(externalId ? {externalId} : {})})();
    return await mintEksToken({clusterName, region, credentials, clock, env: io.env});
  } catch (error) {
    // An unknown region is allowed (it may be newer than this release) but is the likelier cause.
    const hint = unknownRegionHint(region);
    if (hint) throw new Error(`${errorMessage(error)} (note: region ${hint})`, {cause: error});
    throw error;
  }
};

// Like `kubelogin get-token --login azurecli|msi|workloadidentity`: whatever DefaultAzureCredential finds.
// `kubeconfig` writes --server-id for Entra ID clusters and --subscription/--resource-group/--name
// for every AKS cluster; without --server-id the cluster's user credential decides (local account).
const mintAks: TokenMinter = async (argv, io, {azureCredential, azureClientOptions, clock}) => {
  const {values} = flagsOf(argv, {
    'server-id': {type: 'string'},
    'tenant-id': {type: 'string'},
    'client-id': {type: 'string'},
    environment: {type: 'string'},
    subscription: {type: 'string'},
    'resource-group': {type: 'string'},
    name: {type: 'string'},
    'resource-manager-endpoint': {type: 'string'},
  });
  const serverId = stringValue(values['server-id']);
  if (serverId && !/^[\w.:/-]+$/.test(serverId)) throw new InputError(`expected --server-id to be an application id or URI, got ${JSON.stringify(serverId)}`);
  const environment = stringValue(values['environment']) ?? 'AzurePublicCloud';
  if (!isAzureCloudName(environment)) throw new InputError(`expected --environment to be one of ${AZURE_CLOUD_NAMES.join(', ')}, got ${JSON.stringify(environment)}`);
  const tenantId = stringValue(values['tenant-id']);
  const clientId = stringValue(values['client-id']);
  const subscriptionId = stringValue(values['subscription']);
  const resourceGroup = stringValue(values['resource-group']);
  const name = stringValue(values['name']);
  const armEndpoint = stringValue(values['resource-manager-endpoint']) ?? stringValue(io.env['KUBE_DISCOVERY_ARM_ENDPOINT']);
  if (armEndpoint && !isArmEndpoint(armEndpoint)) {
    throw new InputError(`expected --resource-manager-endpoint (or KUBE_DISCOVERY_ARM_ENDPOINT) to be an https URL (http only for a loopback host), got ${JSON.stringify(armEndpoint)}`);
  }
  if (!serverId && (!subscriptionId || !resourceGroup || !name)) {
    const missing = [subscriptionId ? '' : '--subscription', resourceGroup ? '' : '--resource-group', name ? '' : '--name'].filter(Boolean);
    throw new InputError(
      `expected --server-id ID (an Entra ID cluster; ${AKS_SERVER_ID} for AKS-managed Entra ID) or --subscription, --resource-group and --name (any AKS cluster), got ${
        missing.length === 3 ? 'none' : `no ${missing.join(', ')}`}`,
    );
  }
  const credential = azureCredential({cloud: environment, ...(tenantId ? {tenantId} : {}), ...(clientId ? {clientId} : {})});
  if (serverId || !subscriptionId || !resourceGroup || !name) return mintEntraToken(credential, serverId ?? AKS_SERVER_ID);
  // Loaded here: `token eks` (run by kubectl for every request) should not pay for the ARM client.
  const {fetchAksUserKubeconfig} = await import('../credentials/aks-user-credential.ts');
  const kubeconfig = await fetchAksUserKubeconfig({
    credential,
    cluster: {subscriptionId, resourceGroup, name},
    cloud: environment,
    ...(armEndpoint ? {resourceManagerEndpoint: armEndpoint} : {}),
    clientOptions: azureClientOptions,
  });
  const user = kubeconfig.user;
  if (user.kind === 'token') return {token: user.token, expiresAt: new Date(clock.now() + LOCAL_TOKEN_REUSE_MS)};
  // The cluster switched to Entra ID since discovery recorded it: sign in like kubelogin would.
  if (user.kind === 'entra') return mintEntraToken(credential, user.serverId ?? AKS_SERVER_ID, user.tenantId ?? tenantId);
  throw new Error(
    `AKS cluster ${name} (resource group ${resourceGroup}): its user credential has ${user.kind === 'client-certificate' ? 'a client certificate but no token' : 'no usable user'}; ` +
      'enable AKS-managed Entra ID (az aks update --enable-aad) or use `az aks get-credentials --admin`',
  );
};

/** How long kubectl may reuse a local-account token before running the plugin again: it is static, but may be rotated. */
const LOCAL_TOKEN_REUSE_MS = 10 * 60_000;

function isArmEndpoint(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'https:' || (url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname));
  } catch {
    return false;
  }
}

// Explicit registration: adding a cloud is one function and one line here.
const minters = {eks: mintEks, aks: mintAks} as const satisfies Record<string, TokenMinter>;

/** Builds the token command with injected dependencies. */
export function tokenCommand(deps: TokenCommandDeps = {}): Command {
  const resolved: Required<TokenCommandDeps> = {clock: deps.clock ?? systemClock, azureCredential: deps.azureCredential ?? defaultAzureCredential, azureClientOptions: deps.azureClientOptions ?? {}};
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

function stringValue(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

