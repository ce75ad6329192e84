/**
 * `kube-discovery kubeconfig [--server URL | -c FILE] [-o FILE] [--labels k=v,...] [--token-file F]`:
 * a kubeconfig with one cluster, user and context per discovered kube_server. Users are exec
 * credential plugins calling this CLI's `token` command, so the file never holds a token.
 */
import {randomBytes} from 'node:crypto';
import {open, realpath, rename, rm} from 'node:fs/promises';
import {fileURLToPath} from 'node:url';
import {stringify} from 'yaml';
import {kubeServerPrefix, parseKubeServers, type KubeAccess, type KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock} from '../core/clock.ts';
import {matchesSelector, parseLabelSelector} from '../http/label-selector.ts';
import {createBackend} from '../registry/index.ts';
import {listKubeServers, resolveToken, serverUrl} from './client.ts';
import {oneLine, usageError, withConfig} from './common.ts';
import {parseFlags} from './flags.ts';
import type {CliIo, Command} from './io.ts';
import {wantsHelp} from './usage.ts';
import {errorMessage} from '../core/errors.ts';

/** Where `--server` points by default (else `KUBE_DISCOVERY_SERVER`): the service's default listen address. */
export const DEFAULT_SERVER = 'http://127.0.0.1:3000';
/** Absolute path of the CLI entry point, so the exec plugin works without a global install. */
export const MAIN_PATH = fileURLToPath(new URL('./main.ts', import.meta.url));

const EXEC_API_VERSION = 'client.authentication.k8s.io/v1beta1';

const USAGE = `usage: kube-discovery kubeconfig [--server URL | -c FILE] [-o FILE] [--labels k=v,...] [--token-file FILE] [--exec-command PATH] [--exec-env NAME=VALUE]...
Writes a kubeconfig with a context per discovered cluster (stdout, or FILE with mode 0600).
  --server URL        the service's HTTP API (default ${DEFAULT_SERVER})
  -c FILE             read the registry named by this config file instead
  --labels k=v,...    only clusters with all of these labels
  --token-file FILE   bearer token for the API (else KUBE_DISCOVERY_TOKEN)
  --exec-command PATH credential plugin command (default: this node and CLI, by absolute path)
  --exec-env NAME=VALUE
                      environment for the plugin (repeatable), e.g. AWS_PROFILE=prod
  -h, --help          this help
`;

/** How the exec plugin entries invoke the `token` command. */
export interface ExecInvocation {
  /** Absolute path of the program kubectl runs. */
  readonly command: string;
  /** Arguments before `token ...` (the script path when the command is node). */
  readonly prefixArgs: readonly string[];
  /** Extra environment kubectl gives the plugin (`--exec-env`), e.g. a profile or a test cloud's endpoints. */
  readonly env?: Readonly<Record<string, string>>;
}

/** A kube_server left out of the kubeconfig, and why. */
export interface SkippedServer {
  readonly name: string;
  readonly reason: string;
}

/** The kubeconfig document (the fields kubectl reads). */
export interface KubeconfigDocument {
  readonly apiVersion: 'v1';
  readonly kind: 'Config';
  readonly preferences: Record<string, never>;
  readonly clusters: readonly {readonly name: string; readonly cluster: {readonly server: string; readonly 'certificate-authority-data': string}}[];
  readonly users: readonly {readonly name: string; readonly user: {readonly exec: Readonly<Record<string, unknown>>}}[];
  readonly contexts: readonly {readonly name: string; readonly context: {readonly cluster: string; readonly user: string}}[];
  readonly 'current-context'?: string;
}

/** The default invocation: this Node binary running this CLI's entry point. */
export function selfInvocation(): ExecInvocation {
  return {command: process.execPath, prefixArgs: [MAIN_PATH]};
}

/** The `token` command arguments for a cluster's access. */
export function tokenArgs(access: KubeAccess): string[] {
  if (access.kind === 'eks') {
    return [
      'token', 'eks',
      '--cluster-name', access.cluster_name,
      '--region', access.region,
      ...(access.role_arn ? ['--role-arn', access.role_arn] : []),
      ...(access.external_id ? ['--external-id', access.external_id] : []),
    ];
  }
  return [
    'token', 'aks',
    ...(access.server_id ? ['--server-id', access.server_id] : []),
    ...(access.cloud && access.cloud !== 'AzurePublicCloud' ? ['--environment', access.cloud] : []),
    '--subscription', access.subscription_id,
    '--resource-group', access.resource_group,
    '--name', access.resource_name,
  ];
}

/** Builds the kubeconfig for `servers` (in order; the first is the current context). */
export function buildKubeconfig(servers: readonly KubeServer[], exec: ExecInvocation): {document: KubeconfigDocument; skipped: SkippedServer[]} {
  const skipped: SkippedServer[] = [];
  const clusters: KubeconfigDocument['clusters'][number][] = [];
  const users: KubeconfigDocument['users'][number][] = [];
  const contexts: KubeconfigDocument['contexts'][number][] = [];
  const seen = new Set<string>();
  for (const server of servers) {
    const name = server.metadata.name;
    const {endpoint, ca_data: caData, access} = server.status ?? {};
    const missing = [endpoint ? '' : 'endpoint', caData ? '' : 'CA', access ? '' : 'access information'].filter(Boolean);
    if (seen.has(name)) {
      skipped.push({name, reason: 'a cluster of the same name is already in the kubeconfig'});
      continue;
    }
    if (!endpoint || !caData || !access || missing.length > 0) {
      skipped.push({name, reason: `no ${missing.join(', ')} recorded yet`});
      continue;
    }
    seen.add(name);
    clusters.push({name, cluster: {server: endpoint, 'certificate-authority-data': caData}});
    users.push({
      name,
      user: {
        exec: {
          apiVersion: EXEC_API_VERSION,
          command: exec.command,
          args: [...exec.prefixArgs, ...tokenArgs(access)],
          env: exec.env && Object.keys(exec.env).length > 0 ? Object.entries(exec.env).map(([name, value]) => ({name, value})) : null,
          installHint: 'the kube-discovery CLI (and its Node.js runtime) must be installed at the path in `command`; regenerate with `kube-discovery kubeconfig`',
          interactiveMode: 'Never',
          provideClusterInfo: false,
        },
      },
    });
    contexts.push({name, context: {cluster: name, user: name}});
  }
  const first = contexts[0]?.name;
  return {
    document: {apiVersion: 'v1', kind: 'Config', preferences: {}, clusters, users, contexts, ...(first ? {'current-context': first} : {})},
    skipped,
  };
}

/**
 * Writes `text` to `path` readable by the owner only. The text goes to a new file beside the
 * target (a symlink's target: the link stays) and is renamed over it, so a write that fails (a full
 * volume) leaves the previous kubeconfig whole; the new file is the owner's only from its creation.
 */
export async function writePrivateFile(path: string, text: string): Promise<void> {
  const target = await realpath(path).catch(() => path);
  const scratch = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(scratch, 'wx', 0o600);
  try {
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(scratch, target);
  } catch (error) {
    await rm(scratch, {force: true});
    throw error;
  }
}

/** `kube-discovery kubeconfig ...`: exit 0, 1 when the clusters cannot be read, 2 for usage errors. */
export const runKubeconfig: Command = async (argv, io) => {
  if (wantsHelp(argv)) {
    io.stdout(USAGE);
    return 0;
  }
  const flags = parseFlags(
    io,
    'kubeconfig',
    argv,
    {
      server: {type: 'string'},
      config: {type: 'string', short: 'c'},
      output: {type: 'string', short: 'o'},
      labels: {type: 'string'},
      'token-file': {type: 'string'},
      'exec-command': {type: 'string'},
      'exec-env': {type: 'string', multiple: true},
      help: {type: 'boolean', short: 'h'},
    },
    {hint: `\n${USAGE}`},
  );
  if (typeof flags === 'number') return flags;
  const {values} = flags;
  if (values.help) {
    io.stdout(USAGE);
    return 0;
  }
  if (values.server !== undefined && values.config !== undefined) return usageError(io, 'kubeconfig', 'use either --server URL or -c FILE, not both');
  let selector: [string, string][];
  try {
    selector = parseLabelSelector(values.labels ?? null);
  } catch (error) {
    return usageError(io, 'kubeconfig', errorMessage(error));
  }
  const env: Record<string, string> = {};
  for (const pair of values['exec-env'] ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(pair.slice(0, eq))) return usageError(io, 'kubeconfig', `expected --exec-env NAME=VALUE, got ${JSON.stringify(pair)}`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const exec: ExecInvocation = {...(values['exec-command'] ? {command: values['exec-command'], prefixArgs: []} : selfInvocation()), env};
  const output = values.output;

  const emit = async (servers: readonly KubeServer[]): Promise<number> => {
    // The API filters too; filtering here as well covers -c and servers that ignore `labels`.
    const {document, skipped} = buildKubeconfig(servers.filter((s) => matchesSelector(s, selector)), exec);
    for (const s of skipped) io.stderr(`kube-discovery kubeconfig: skipping ${s.name}: ${s.reason}\n`);
    const text = stringify(document, {lineWidth: 0});
    const count = document.contexts.length;
    if (count === 0) io.stderr('kube-discovery kubeconfig: no cluster matched; the kubeconfig has no contexts\n');
    if (output === undefined) {
      io.stdout(text);
      return 0;
    }
    await writePrivateFile(output, text);
    io.stderr(`kube-discovery kubeconfig: wrote ${count} context${count === 1 ? '' : 's'} to ${output}\n`);
    return 0;
  };

  if (values.config !== undefined) return fromRegistry(io, values.config, emit);
  const server = serverUrl(values.server ?? io.env['KUBE_DISCOVERY_SERVER'] ?? DEFAULT_SERVER);
  if (!server.ok) return usageError(io, 'kubeconfig', server.message);
  let servers: KubeServer[];
  try {
    const token = await resolveToken(values['token-file'], io.env);
    servers = await listKubeServers({server: server.url, ...(token ? {token} : {}), ...(values.labels ? {labels: values.labels} : {})});
  } catch (error) {
    io.stderr(`kube-discovery kubeconfig: ${oneLine(error, io)}\n`);
    return 1;
  }
  return emit(servers);
};

/** Lists the discovery group's kube_servers straight from the registry the config names. */
function fromRegistry(io: CliIo, path: string, emit: (servers: readonly KubeServer[]) => Promise<number>): Promise<number> {
  return withConfig(io, 'kubeconfig', path, async (config) => {
    // A memory registry opened here is a new, empty one: its kubeconfig would have no contexts and replace the good one.
    if (config.storage.type === 'memory') return usageError(io, 'kubeconfig', 'storage type memory lives inside the running service; use --server URL instead');
    const backend = await createBackend(config.storage, {clock: systemClock});
    let servers: KubeServer[];
    try {
      const items = await backend.list(kubeServerPrefix(config.discovery_service.discovery_group));
      servers = parseKubeServers(items, (key, error) => io.stderr(`kube-discovery kubeconfig: skipping unreadable entry ${key}: ${error.message}\n`));
    } finally {
      await backend.close();
    }
    return emit(servers);
  });
}

