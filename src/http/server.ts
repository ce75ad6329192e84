/**
 * The JSON HTTP API: health, readiness, metrics, the kube_server inventory
 * with label selectors and pagination, a server-sent-event watch, per-source status,
 * and a manual discovery trigger. Errors map to HTTP status in one place.
 */
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http';
import type {AddressInfo} from 'node:net';
import {systemClock} from '../core/clock.ts';
import {AuthenticationError, InputError, NotFoundError, UnavailableError} from '../core/errors.ts';
import type {Inventory} from '../inventory/inventory.ts';
import type {Logger} from '../observability/logger.ts';
import {redactText} from '../observability/redact.ts';
import type {Authenticator} from './auth.ts';
import {DEFAULT_WATCH_LIMITS, WatchStreams, type WatchLimits, type WatchStats} from './watch.ts';
import {exposedMemoryReclaim, type MemoryReclaim} from './watch-reclaim.ts';
import {matchesSelector, parseLabelSelector} from './label-selector.ts';

/** Readiness as /readyz reports it. */
export interface Readiness {
  readonly ready: boolean;
  /** `ready`, `degraded` (serving the cached inventory while the backend is unreachable) or `not_ready`. */
  readonly status: 'ready' | 'degraded' | 'not_ready';
  readonly reason?: string;
}

/** What the server serves. */
export interface HttpServerOptions {
  readonly listenAddr: string;
  readonly inventory: Inventory;
  readonly readiness: () => Promise<Readiness>;
  readonly status: () => unknown;
  readonly metrics?: () => Promise<{contentType: string; body: string}>;
  /** Runs a discovery cycle now; undefined on replicas that don't run cycles. */
  readonly trigger?: () => {accepted: boolean; reason?: string};
  readonly auth?: Authenticator;
  readonly logger?: Logger;
  /** Interval of SSE keep-alive comments. */
  readonly sseKeepaliveMs?: number;
  /** Serve only /metrics, /healthz and /readyz (the separate `metrics.listen_addr` listener). */
  readonly metricsOnly?: boolean;
  /** Bounds of /v1/watch (defaults: DEFAULT_WATCH_LIMITS). */
  readonly watch?: Partial<WatchLimits>;
  /**
   * The memory-reducing collection once a burst of watchers has left (watch-reclaim.ts);
   * default V8's under `--expose-gc` on the system clock, else none. `null`: none.
   */
  readonly memoryReclaim?: MemoryReclaim | null;
  /** Whether a discovery cycle runs now: the default memory reclaim waits for its end. */
  readonly cycleRunning?: () => boolean;
}

/** A listening API server. */
export interface HttpServer {
  readonly url: string;
  /** What /v1/watch clients hold right now. */
  watchStats(): WatchStats;
  close(): Promise<void>;
}

const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 100;

/** Starts the API server on `listenAddr` (`host:port`; port 0 picks a free one). */
export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const watchers = new WatchStreams(
    options.inventory,
    {...DEFAULT_WATCH_LIMITS, ...(options.sseKeepaliveMs === undefined ? {} : {keepaliveMs: options.sseKeepaliveMs}), ...options.watch},
    matchesSelector,
    options.memoryReclaim === null ? undefined : (options.memoryReclaim ?? defaultMemoryReclaim(options.logger, options.cycleRunning)),
  );
  const server: Server = createServer((req, res) => {
    handle(req, res, options, watchers).catch((error: unknown) => sendError(res, error, options.logger));
  });
  const {host, port} = splitHostPort(options.listenAddr);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    watchStats: () => watchers.stats(),
    async close() {
      watchers.closeAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** V8's memory-reducing collection on the system clock, when the process may call it; each run logged with its pause and what it returned. */
function defaultMemoryReclaim(logger: Logger | undefined, cycleRunning: (() => boolean) | undefined): MemoryReclaim | undefined {
  const reclaim = exposedMemoryReclaim();
  if (reclaim === undefined) return undefined;
  const run = (): void => {
    const rss = process.memoryUsage.rss();
    const started = performance.now();
    reclaim();
    const mb = (bytes: number): number => Math.round(bytes / 104_857.6) / 10;
    logger?.info({event: 'watch_memory_reclaimed', pause_ms: Math.round(performance.now() - started), rss_before_mb: mb(rss), rss_after_mb: mb(process.memoryUsage.rss())}, 'watchers left: memory returned to the system');
  };
  return {run, clock: systemClock, ...(cycleRunning ? {deferWhile: cycleRunning} : {})};
}

/** `host:port` → parts; `[::1]:3000` works too. */
export function splitHostPort(addr: string): {host: string; port: number} {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(addr);
  if (!m) throw new InputError(`listen address: expected host:port, found ${JSON.stringify(addr)}`);
  return {host: m[1] ?? '', port: Number(m[2])};
}

async function handle(req: IncomingMessage, res: ServerResponse, options: HttpServerOptions, watchers: WatchStreams): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const path = url.pathname;
  const method = req.method ?? 'GET';

  if (path === '/healthz') return sendJson(res, 200, {status: 'ok'});
  if (path === '/readyz') {
    const r = await options.readiness();
    return sendJson(res, r.ready ? 200 : 503, r);
  }
  if (path === '/metrics' && options.metrics) {
    const m = await options.metrics();
    res.writeHead(200, {'content-type': m.contentType});
    res.end(m.body);
    return;
  }
  if (!path.startsWith('/v1/') || options.metricsOnly) throw new NotFoundError(`no such endpoint ${path}`);
  if (options.auth && !(await options.auth(req.headers.authorization))) {
    throw new AuthenticationError('a valid bearer token is required');
  }

  // An inventory never read is not an empty one: an empty list, a 404 or a snapshot of nothing would
  // tell every reader its clusters are gone. Until the first listing succeeds, the inventory says nothing.
  if (method === 'GET' && (path === '/v1/watch' || path === '/v1/kube_servers' || path.startsWith('/v1/kube_servers/')) && !options.inventory.synced) {
    throw new UnavailableError('not_synced', 'the registry has not been read yet since this replica started; retry later (the reason is in /v1/status)');
  }

  if (path === '/v1/kube_servers' && method === 'GET') {
    const selector = parseLabelSelector(url.searchParams.get('labels'));
    const limit = parseLimit(url.searchParams.get('limit'));
    const after = decodePageToken(url.searchParams.get('next_page_token'));
    const all = options.inventory.list().filter((s) => matchesSelector(s, selector) && (after === undefined || s.metadata.name > after));
    const items = all.slice(0, limit);
    const last = items.at(-1);
    return sendJson(res, 200, {items, ...(all.length > limit && last ? {next_page_token: encodePageToken(last.metadata.name)} : {})});
  }
  const one = /^\/v1\/kube_servers\/([^/]+)$/.exec(path);
  if (one && method === 'GET') {
    let name: string;
    try {
      name = decodeURIComponent(one[1] ?? '');
    } catch {
      throw new InputError(`kube_server name: not valid percent-encoding: ${JSON.stringify(one[1])}`);
    }
    const item = options.inventory.get(name);
    if (!item) throw new NotFoundError(`kube_server ${JSON.stringify(name)} not found`);
    return sendJson(res, 200, item);
  }
  if (path === '/v1/status' && method === 'GET') return sendJson(res, 200, options.status());
  if (path === '/v1/watch' && method === 'GET') {
    const auth = options.auth;
    const authorization = req.headers.authorization;
    return watchers.open(req, res, parseLabelSelector(url.searchParams.get('labels')), auth ? () => auth(authorization) : undefined);
  }
  if (path === '/v1/discover' && method === 'POST') {
    if (!options.trigger) return sendJson(res, 409, {error: 'conflict', message: 'this replica does not run discovery (not the leader)'});
    const r = options.trigger();
    return sendJson(res, r.accepted ? 202 : 409, r.accepted ? {triggered: true} : {error: 'conflict', message: r.reason});
  }
  // A known endpoint asked with the wrong method is a 405 naming the right one, not a 404.
  const allowed = allowedMethods(path);
  if (allowed) {
    res.setHeader('allow', allowed);
    return sendJson(res, 405, {error: 'method_not_allowed', message: `${method} ${path} is not supported; allowed: ${allowed}`});
  }
  throw new NotFoundError(`no such endpoint ${method} ${path}`);
}

/** The methods a `/v1` path answers, for the `Allow` header of a 405; undefined for an unknown path. */
function allowedMethods(path: string): string | undefined {
  if (path === '/v1/kube_servers' || /^\/v1\/kube_servers\/[^/]+$/.test(path) || path === '/v1/status' || path === '/v1/watch') return 'GET';
  if (path === '/v1/discover') return 'POST';
  return undefined;
}

function parseLimit(text: string | null): number {
  if (text === null) return DEFAULT_LIMIT;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT) throw new InputError(`limit: expected an integer from 1 to ${MAX_LIMIT}, found ${JSON.stringify(text)}`);
  return n;
}

function encodePageToken(name: string): string {
  return Buffer.from(name, 'utf8').toString('base64url');
}

function decodePageToken(token: string | null): string | undefined {
  if (!token) return undefined;
  const name = Buffer.from(token, 'base64url').toString('utf8');
  if (name === '' || encodePageToken(name) !== token) throw new InputError('next_page_token: not a token this server issued');
  return name;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {'content-type': 'application/json', 'content-length': Buffer.byteLength(text)});
  res.end(text);
}

/** The one place errors become HTTP answers; unexpected errors never leak their message. */
function sendError(res: ServerResponse, error: unknown, logger: Logger | undefined): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  if (error instanceof InputError) return sendJson(res, 400, {error: 'bad_request', message: redactText(error.message)});
  if (error instanceof NotFoundError) return sendJson(res, 404, {error: 'not_found', message: redactText(error.message)});
  if (error instanceof UnavailableError) {
    res.setHeader('retry-after', '5');
    return sendJson(res, 503, {error: error.code, message: error.message});
  }
  if (error instanceof AuthenticationError) {
    res.setHeader('www-authenticate', 'Bearer');
    return sendJson(res, 401, {error: 'unauthorized', message: error.message});
  }
  logger?.error({err: error}, 'HTTP handler failed');
  return sendJson(res, 500, {error: 'internal', message: 'internal error; see the service log'});
}
