/**
 * `kube-discovery token eks|aks ...`: a kubectl exec credential plugin. Prints one
 * ExecCredential on stdout; on failure prints one line on stderr (never a stack trace,
 * never a secret) and exits 1, or 2 for bad usage.
 */
import {parseArgs} from 'node:util';
import {systemClock, type Clock} from '../core/clock.ts';
import {InputError} from '../core/errors.ts';
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
}

type TokenMinter = (argv: readonly string[], io: CliIo, deps: Required<TokenCommandDeps>) => Promise<MintedToken>;

const USAGE = `usage: kube-discovery token eks --cluster-name NAME --region REGION [--role-arn ARN] [--external-id ID]
       kube-discovery token aks --server-id ID
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

const mintAks: TokenMinter = () => Promise.reject(new InputError('token aks is not supported yet'));

// Explicit registration: adding a cloud is one function and one line here.
const minters = {eks: mintEks, aks: mintAks} as const satisfies Record<string, TokenMinter>;

/** Builds the token command with injected dependencies. */
export function tokenCommand(deps: TokenCommandDeps = {}): Command {
  const resolved: Required<TokenCommandDeps> = {clock: deps.clock ?? systemClock};
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

/** The error as one line, with any secret from the environment cut out as a last line of defence. */
function oneLine(error: unknown, io: CliIo): string {
  let text = (error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, ' ').trim();
  for (const name of ['AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN']) {
    for (const secret of [io.env[name], process.env[name]]) {
      if (secret && secret.length >= 8) text = text.split(secret).join('[redacted]');
    }
  }
  return text || 'unknown error';
}
