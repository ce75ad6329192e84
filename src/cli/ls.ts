/** `kube-discovery ls [--server URL] [--labels k=v,...] [--output json|table]`, like `tsh kube ls`. */
import {parseArgs} from 'node:util';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {listKubeServers, resolveToken} from './client.ts';
import {usageError} from './common.ts';
import type {Command} from './io.ts';
import {formatLabels, renderTable} from './table.ts';

/** Default API address: the service's default listen address. */
export const DEFAULT_SERVER = 'http://127.0.0.1:3000';

/** Lists discovered clusters. Exit 0, 1 when the API cannot be read, 2 for usage errors. */
export const runLs: Command = async (argv, io) => {
  let values;
  try {
    ({values} = parseArgs({
      args: [...argv],
      options: {
        server: {type: 'string'},
        labels: {type: 'string'},
        output: {type: 'string', short: 'o'},
        'token-file': {type: 'string'},
      },
      strict: true,
    }));
  } catch (error) {
    return usageError(io, 'ls', (error as Error).message);
  }
  const output = values.output ?? (io.isTty ? 'table' : 'json');
  if (output !== 'json' && output !== 'table') return usageError(io, 'ls', `--output must be json or table, got ${JSON.stringify(output)}`);
  const server = values.server ?? io.env['KUBE_DISCOVERY_SERVER'] ?? DEFAULT_SERVER;
  let items: KubeServer[];
  try {
    const token = await resolveToken(values['token-file'], io.env);
    items = await listKubeServers({server, ...(token ? {token} : {}), ...(values.labels ? {labels: values.labels} : {})});
  } catch (error) {
    io.stderr(`kube-discovery ls: ${(error as Error).message}\n`);
    return 1;
  }
  if (output === 'json') {
    io.stdout(`${JSON.stringify(items.map(summary), null, 2)}\n`);
    return 0;
  }
  io.stdout(renderTable(['Cluster Name', 'Labels', 'Health'], items.map((s) => [s.metadata.name, formatLabels(s.spec.cluster.metadata.labels), health(s)])));
  return 0;
};

function health(s: KubeServer): string {
  const h = s.status?.target_health;
  const base = h ? `${h.status}${h.reason && h.status !== 'healthy' ? ` (${h.reason})` : ''}` : 'unknown';
  return s.status?.stale ? `${base}, stale` : base;
}

function summary(s: KubeServer): unknown {
  return {
    name: s.metadata.name,
    labels: s.spec.cluster.metadata.labels,
    health: s.status?.target_health ?? {status: 'unknown'},
    stale: s.status?.stale ?? false,
    expires: s.metadata.expires,
  };
}
