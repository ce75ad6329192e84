/**
 * `kube-discovery ls [--server URL] [-l k=v,...] [-o table|wide|name|json|yaml] [--show-labels]`,
 * like `kubectl get` and `tsh kube ls`: the columns an operator scans first (name, cloud,
 * region, health, stale, age), labels only on request, and a table that fits the terminal.
 */
import {stringify} from 'yaml';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {systemClock, type Clock} from '../core/clock.ts';
import {builtInClouds} from '../clouds/index.ts';
import {matchesSelector, parseLabelSelector} from '../http/label-selector.ts';
import {listKubeServers, resolveToken, serverUrl} from './client.ts';
import {oneLine, usageError} from './common.ts';
import {parseFlags} from './flags.ts';
import type {Command} from './io.ts';
import {formatLabels} from './table.ts';
import {errorMessage} from '../core/errors.ts';

/** Default API address: the service's default listen address. */
export const DEFAULT_SERVER = 'http://127.0.0.1:3000';

/** Output formats of `ls -o`. */
export const LS_OUTPUTS = ['table', 'wide', 'name', 'json', 'yaml'] as const;
type LsOutput = (typeof LS_OUTPUTS)[number];

/** Width the table fits in when the terminal's is unknown (`COLUMNS` overrides). */
export const DEFAULT_WIDTH = 120;

/** Injected dependencies of `ls`; only tests change them. */
export interface LsDeps {
  readonly clock?: Clock;
}

/** Builds the `ls` command. Exit 0, 1 when the API cannot be read, 2 for usage errors. */
export function lsCommand(deps: LsDeps = {}): Command {
  const clock = deps.clock ?? systemClock;
  return async (argv, io) => {
    const flags = parseFlags(
      io,
      'ls',
      argv,
      {
        server: {type: 'string'},
        selector: {type: 'string', short: 'l'},
        labels: {type: 'string'},
        output: {type: 'string', short: 'o'},
        'show-labels': {type: 'boolean', default: false},
        'token-file': {type: 'string'},
      },
      {hint: ' (see kube-discovery ls --help)'},
    );
    if (typeof flags === 'number') return flags;
    const {values} = flags;
    const output = values.output ?? (io.isTty ? 'table' : 'json');
    if (!(LS_OUTPUTS as readonly string[]).includes(output)) return usageError(io, 'ls', `expected --output to be one of ${LS_OUTPUTS.join(', ')}, got ${JSON.stringify(output)}`);
    if (values.selector !== undefined && values.labels !== undefined) return usageError(io, 'ls', 'use either -l/--selector or --labels, not both');
    const selector = values.selector ?? values.labels;
    let wanted: [string, string][];
    try {
      wanted = parseLabelSelector(selector ?? null);
    } catch (error) {
      return usageError(io, 'ls', errorMessage(error));
    }
    const server = serverUrl(values.server ?? io.env['KUBE_DISCOVERY_SERVER'] ?? DEFAULT_SERVER);
    if (!server.ok) return usageError(io, 'ls', server.message);
    let items: KubeServer[];
    try {
      const token = await resolveToken(values['token-file'], io.env);
      // The API filters too; filtering here as well covers servers that ignore `labels`.
      items = (await listKubeServers({server: server.url, ...(token ? {token} : {}), ...(selector ? {labels: selector} : {})})).filter((s) => matchesSelector(s, wanted));
    } catch (error) {
      io.stderr(`kube-discovery ls: ${oneLine(error, io)}\n`);
      return 1;
    }
    const now = clock.now();
    switch (output as LsOutput) {
      case 'json':
        io.stdout(`${JSON.stringify(items.map((s) => summary(s)), null, 2)}\n`);
        return 0;
      case 'yaml':
        io.stdout(stringify(items.map((s) => summary(s)), {lineWidth: 0}));
        return 0;
      case 'name':
        io.stdout(items.map((s) => `kube_server/${s.metadata.name}\n`).join(''));
        return 0;
      default: {
        if (items.length === 0) {
          io.stderr(
            `No clusters found at ${server.url}${selector ? ` matching ${selector}` : ''}. ` +
              `A service that just started may still be in its first cycle: see ${new URL('/v1/status', server.url).href}\n`,
          );
          return 0;
        }
        const width = Number(io.env['COLUMNS']) > 0 ? Number(io.env['COLUMNS']) : DEFAULT_WIDTH;
        io.stdout(renderLsTable(items, {now, labels: output === 'wide' || values['show-labels'], width}));
        return 0;
      }
    }
  };
}

/** `kube-discovery ls ...` with the real clock. */
export const runLs: Command = lsCommand();

/** The `ls` table: key columns sized to content, then shrunk (labels first, then names) to fit `width`. */
export function renderLsTable(items: readonly KubeServer[], options: {now: number; labels: boolean; width: number}): string {
  const header = ['NAME', 'CLOUD', 'REGION', 'HEALTH', 'STALE', 'AGE', ...(options.labels ? ['LABELS'] : [])];
  const rows = items.map((s) => [
    s.metadata.name,
    cloudOf(s),
    regionOf(s),
    health(s),
    s.status?.stale ? 'yes' : 'no',
    age(s.status?.discovered_at, options.now),
    ...(options.labels ? [tableLabels(s.spec.cluster.metadata.labels)] : []),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const gap = 3;
  const total = (): number => widths.reduce((a, b) => a + b, 0) + gap * (widths.length - 1);
  // Shrink the flexible columns in this order, never below a readable minimum.
  for (const [column, minimum] of [[6, 30], [0, 40], [6, 16], [0, 24], [3, 12], [2, 10]] as const) {
    const current = widths[column];
    if (current === undefined || total() <= options.width) continue;
    widths[column] = Math.max(minimum, current - (total() - options.width));
  }
  const line = (cells: readonly string[]): string =>
    cells.map((c, i) => (i === 0 ? truncateMiddle(c, widths[i] ?? 0) : truncateEnd(c, widths[i] ?? 0)).padEnd(widths[i] ?? 0)).join(' '.repeat(gap)).trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

// Labels every entry carries or that repeat a column are noise in a table (json and yaml keep them).
const HIDDEN_LABEL_PREFIXES = ['teleport.internal/', 'teleport.dev/'];
const HIDDEN_LABELS: ReadonlySet<string> = new Set(['region', 'account-id', 'subscription-id', 'resource-group']);

function tableLabels(labels: Readonly<Record<string, string>>): string {
  return formatLabels(Object.fromEntries(Object.entries(labels).filter(([k]) => !HIDDEN_LABELS.has(k))), HIDDEN_LABEL_PREFIXES);
}

// The document's cloud block says where the cluster is (its cloud module reads it); labels are the fallback.
function cloudOf(s: KubeServer): string {
  return builtInClouds.registeredCluster(s)?.module.cloud ?? s.spec.cluster.metadata.labels['teleport.dev/cloud'] ?? '-';
}

function regionOf(s: KubeServer): string {
  return builtInClouds.registeredCluster(s)?.cluster.region ?? s.spec.cluster.metadata.labels['region'] ?? '-';
}

function health(s: KubeServer): string {
  const h = s.status?.target_health;
  if (!h) return 'unknown';
  return `${h.status}${h.reason && h.status !== 'healthy' ? ` (${h.reason})` : ''}`;
}

/** kubectl-style age: 45s, 12m, 5h, 3d; `-` when the entry predates the record of it. */
export function age(since: string | undefined, now: number): string {
  const at = since ? Date.parse(since) : Number.NaN;
  if (!Number.isFinite(at)) return '-';
  const s = Math.max(0, Math.floor((now - at) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** Keeps both ends of a name (cluster name and account or subscription) when it must be cut. */
function truncateMiddle(text: string, width: number): string {
  if (text.length <= width) return text;
  const head = Math.ceil((width - 1) / 2);
  return `${text.slice(0, head)}…${text.slice(text.length - (width - 1 - head))}`;
}

function truncateEnd(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, width - 1)}…`;
}

function summary(s: KubeServer): unknown {
  return {
    name: s.metadata.name,
    cloud: cloudOf(s),
    region: regionOf(s),
    health: s.status?.target_health ?? {status: 'unknown'},
    stale: s.status?.stale ?? false,
    ...(s.status?.stale_reason ? {stale_reason: s.status.stale_reason} : {}),
    ...(s.status?.discovered_at ? {discovered_at: s.status.discovered_at} : {}),
    labels: s.spec.cluster.metadata.labels,
    expires: s.metadata.expires,
  };
}
