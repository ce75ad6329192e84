/**
 * Reads the kubeconfig `listClusterUserCredential` returns: the API server URL, its CA, and
 * how the user authenticates (a static local-account token, or Entra ID through kubelogin).
 * Errors name what was expected and what was found, never a credential value.
 */
// js-yaml, not `yaml`: a cold cycle reads one kubeconfig per cluster, and js-yaml's plain load is
// about 5x cheaper (W5: 4,900 kubeconfigs were ~3.6 s of the cycle's CPU); no positions are kept here.
import {CORE_SCHEMA, load} from 'js-yaml';
import {isBase64Pem, isHttpsUrl} from '../core/validate.ts';

/** How the kubeconfig's user signs in. `token` is a secret: keep it out of logs and errors. */
export type AksUserAuth =
  | {readonly kind: 'token'; readonly token: string}
  /** Entra ID: kubelogin exec plugin (format=exec) or the legacy `azure` auth-provider (format=azure). */
  | {readonly kind: 'entra'; readonly serverId?: string; readonly tenantId?: string}
  /** A local account with only a client certificate: no bearer token to probe with. */
  | {readonly kind: 'client-certificate'}
  | {readonly kind: 'none'};

/** What discovery keeps from one user kubeconfig. */
export interface AksUserKubeconfig {
  readonly server: string;
  /** Base64 PEM, as the kubeconfig carries it. */
  readonly caData?: string;
  readonly user: AksUserAuth;
}

/** The kubeconfig could not be used. */
export class KubeconfigError extends Error {
  override readonly name = 'KubeconfigError';
}

type Named<T> = {name?: unknown} & T;
interface RawConfig {
  'current-context'?: unknown;
  clusters?: Named<{cluster?: Record<string, unknown>}>[];
  contexts?: Named<{context?: {cluster?: unknown; user?: unknown}}>[];
  users?: Named<{user?: Record<string, unknown>}>[];
}

/** Parses a user kubeconfig (YAML text or bytes). Follows `current-context`, else takes the first entries. */
export function parseAksKubeconfig(input: string | Uint8Array): AksUserKubeconfig {
  const text = typeof input === 'string' ? input : Buffer.from(input).toString('utf8');
  let doc: unknown;
  try {
    doc = load(text, {schema: CORE_SCHEMA});
  } catch (error) {
    // The YAML error quotes the offending line, which may hold the token: keep only its position (0-based in js-yaml).
    const mark = (error as {mark?: {line?: unknown; column?: unknown}}).mark;
    const pos = typeof mark?.line === 'number' && typeof mark.column === 'number' ? {line: mark.line + 1, col: mark.column + 1} : undefined;
    throw new KubeconfigError(`expected a kubeconfig in YAML, got text that does not parse${pos ? ` (line ${pos.line}, column ${pos.col})` : ''}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new KubeconfigError(`expected a kubeconfig mapping, got ${describe(doc)}`);
  const config = doc as RawConfig;
  const clusters = Array.isArray(config.clusters) ? config.clusters : [];
  const users = Array.isArray(config.users) ? config.users : [];
  const contexts = Array.isArray(config.contexts) ? config.contexts : [];
  const context = contexts.find((c) => c.name === config['current-context'])?.context ?? contexts[0]?.context;
  const cluster = (clusters.find((c) => c.name === context?.cluster) ?? clusters[0])?.cluster;
  if (!cluster || typeof cluster !== 'object') throw new KubeconfigError(`expected clusters[0].cluster in the kubeconfig, got ${clusters.length} clusters`);
  const server = cluster['server'];
  if (typeof server !== 'string' || !isHttpsUrl(server)) {
    throw new KubeconfigError(`expected clusters[].cluster.server to be an https URL, got ${typeof server === 'string' ? JSON.stringify(server.slice(0, 200)) : describe(server)}`);
  }
  const ca = cluster['certificate-authority-data'];
  if (ca !== undefined && (typeof ca !== 'string' || !isBase64Pem(ca))) {
    throw new KubeconfigError('expected clusters[].cluster.certificate-authority-data to be base64 PEM, got something else');
  }
  const user = (users.find((u) => u.name === context?.user) ?? users[0])?.user;
  return {server, ...(typeof ca === 'string' ? {caData: ca.replace(/\s+/g, '')} : {}), user: userAuth(user)};
}

function userAuth(user: Record<string, unknown> | undefined): AksUserAuth {
  if (!user || typeof user !== 'object') return {kind: 'none'};
  const token = user['token'];
  if (typeof token === 'string' && token !== '') return {kind: 'token', token};
  const exec = user['exec'] as {args?: unknown} | undefined;
  if (exec && typeof exec === 'object') {
    const args = Array.isArray(exec.args) ? exec.args.filter((a): a is string => typeof a === 'string') : [];
    const serverId = flag(args, '--server-id');
    const tenantId = flag(args, '--tenant-id');
    return {kind: 'entra', ...(serverId ? {serverId} : {}), ...(tenantId ? {tenantId} : {})};
  }
  const provider = user['auth-provider'] as {name?: unknown; config?: Record<string, unknown>} | undefined;
  if (provider && typeof provider === 'object' && provider.name === 'azure') {
    const serverId = provider.config?.['apiserver-id'];
    const tenantId = provider.config?.['tenant-id'];
    return {
      kind: 'entra',
      ...(typeof serverId === 'string' && serverId ? {serverId} : {}),
      ...(typeof tenantId === 'string' && tenantId ? {tenantId} : {}),
    };
  }
  if (typeof user['client-certificate-data'] === 'string') return {kind: 'client-certificate'};
  return {kind: 'none'};
}

/** Value of `--name value` or `--name=value` in an argument list. */
function flag(args: readonly string[], name: string): string | undefined {
  for (const [i, arg] of args.entries()) {
    if (arg === name) return args[i + 1];
    if (arg.startsWith(`${name}=`)) return arg.slice(name.length + 1);
  }
  return undefined;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a mapping' : typeof value;
}
