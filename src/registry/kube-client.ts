/**
 * A small REST client for the Kubernetes API on top of `@kubernetes/client-node`'s KubeConfig
 * (kubeconfig files, in-cluster service account, exec plugins, client certificates) and its
 * Watch. Requests go through one priority queue bounded by QPS/burst, so a cycle's batch of
 * writes never delays a keepalive, and each request has a deadline: a hung API server fails
 * the call instead of blocking it forever.
 */
import PQueue from 'p-queue';
import {fetch} from 'undici';
import type {KubeConfig} from '@kubernetes/client-node/dist/config.js';
import {errorMessage} from '../core/errors.ts';
import {registerSecret} from '../observability/redact.ts';
import {duplicateKey, duplicateKeyProblem} from '../core/json-keys.ts';

/** Where the client finds its cluster and credentials. */
export interface KubeClientOptions {
  /** Path of a kubeconfig file; absent: $KUBECONFIG, ~/.kube/config, then the in-cluster service account. */
  readonly kubeconfig?: string;
  /** Kubeconfig context; default the file's current-context. */
  readonly context?: string;
  /** Average requests per second to the API server (client-go's default is 5; ours 20). */
  readonly qps?: number;
  /** Requests allowed at once above the average. */
  readonly burst?: number;
  /** Deadline of one request, ms. */
  readonly requestTimeoutMs?: number;
  /** In-cluster only: prefix of the service-account directory (tests). */
  readonly inClusterPathPrefix?: string;
}

/** A failed API call: HTTP status and the Status reason (`Conflict`, `NotFound`, `Expired` ...). */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  readonly status: number;
  readonly reason: string;
  constructor(status: number, reason: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
    this.reason = reason;
  }
}

/** One request. */
export interface KubeRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: unknown;
  readonly contentType?: string;
  /** Higher runs first when the rate limit queues requests (keepalives use 10). */
  readonly priority?: number;
  /**
   * The answer is a list that decides what exists: a key given twice in it or in its `metadata`
   * (`items`, `continue`) fails it as malformed instead of JSON.parse keeping the last (src/core/json-keys.ts).
   */
  readonly list?: boolean;
  /**
   * Called right before the request is sent, after any wait in the rate-limit queue; what it throws
   * fails the call unsent (a deposed leader's fence, see WriteOptions.fence).
   */
  readonly guard?: () => void;
}

/** A watch event as the API server streams it. */
export interface KubeWatchEvent {
  readonly type: string;
  readonly object: unknown;
}

/** A running watch. */
export interface KubeWatchHandle {
  abort(): void;
}

/** The calls the registry backend and the election need. */
export interface KubeClient {
  /** Server URL, for messages. */
  readonly server: string;
  /** Default namespace of the kubeconfig context (or the in-cluster namespace file). */
  readonly namespace: string | undefined;
  /** Sends one request; resolves with the parsed JSON body, throws KubeApiError for a non-2xx answer. */
  request(req: KubeRequest): Promise<unknown>;
  /** Streams a watch; `done` runs once when the stream ends for any reason. */
  watch(path: string, query: Readonly<Record<string, string>>, onEvent: (event: KubeWatchEvent) => void, done: (err: unknown) => void): Promise<KubeWatchHandle>;
}

/** The objects of a list answer judged for keys given twice besides the list itself: its `metadata` holds `continue`. */
const LIST_OBJECTS = ['metadata'];

/** Defaults of the client options. */
export const KUBE_CLIENT_DEFAULTS = {qps: 20, burst: 40, requestTimeoutMs: 30_000} as const;

/** Builds a client; loads `@kubernetes/client-node` on first use (it costs ~80 MB RSS, see README). */
export async function createKubeClient(options: KubeClientOptions = {}): Promise<KubeClient> {
  const {KubeConfig: KubeConfigClass} = await import('@kubernetes/client-node/dist/config.js');
  const {Watch} = await import('@kubernetes/client-node/dist/watch.js');
  const {RequestContext, HttpMethod} = await import('@kubernetes/client-node/dist/gen/http/http.js');
  const load = (): KubeConfig => {
    const kc = new KubeConfigClass();
    if (options.inClusterPathPrefix !== undefined) kc.loadFromCluster(options.inClusterPathPrefix);
    else if (options.kubeconfig !== undefined) kc.loadFromFile(options.kubeconfig);
    else kc.loadFromDefault();
    if (options.context !== undefined) kc.setCurrentContext(options.context);
    return kc;
  };
  let kc = load();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubernetes storage: the kubeconfig has no current cluster; expected a context naming a cluster');
  const server = cluster.server.replace(/\/$/, '');
  const namespace = kc.getContextObject(kc.getCurrentContext())?.namespace;
  const qps = options.qps ?? KUBE_CLIENT_DEFAULTS.qps;
  const burst = options.burst ?? KUBE_CLIENT_DEFAULTS.burst;
  const timeoutMs = options.requestTimeoutMs ?? KUBE_CLIENT_DEFAULTS.requestTimeoutMs;
  if (!(qps > 0) || !(burst >= 1)) throw new RangeError(`Expected qps > 0 and burst >= 1, got qps ${qps}, burst ${burst}`);
  // A window of `burst` requests every burst/qps seconds: qps on average, at most `burst` at once.
  const queue = new PQueue({intervalCap: burst, interval: Math.max(1, Math.round((burst / qps) * 1000)), carryoverIntervalCount: true});

  const send = async (req: KubeRequest, retryAuth: boolean): Promise<unknown> => {
    const url = new URL(server + req.path);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const ctx = new RequestContext(url.toString(), HttpMethod[req.method]);
    await kc.applySecurityAuthentication(ctx);
    const headers: Record<string, string> = {...ctx.getHeaders(), accept: 'application/json'};
    // Whatever credential the kubeconfig gave (static token, service-account token, exec plugin) is redacted by value.
    registerSecret(/^Bearer\s+(.+)$/i.exec(headers['Authorization'] ?? headers['authorization'] ?? '')?.[1]);
    if (req.body !== undefined) headers['content-type'] = req.contentType ?? 'application/json';
    let res;
    let text: string;
    try {
      res = await fetch(url, {
        method: req.method,
        headers,
        ...(req.body === undefined ? {} : {body: JSON.stringify(req.body)}),
        dispatcher: ctx.getDispatcher() as never,
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const reason = err instanceof Error && err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : errorMessage(err);
      throw new KubeApiError(0, 'Unreachable', `${req.method} ${req.path}: ${reason}`, {cause: err});
    }
    if (res.status === 401 && retryAuth) {
      // A rotated service-account token or an expired exec credential: reload and try once more.
      kc = load();
      return send(req, false);
    }
    if (req.list && res.status >= 200 && res.status <= 299) {
      // The API server answers a list 200: a 206 is part of one, a 203 one a proxy rewrote; read as the list, it would lack entries that exist.
      if (res.status !== 200) throw new KubeApiError(res.status, 'Malformed', `${req.method} ${req.path}: HTTP ${res.status} instead of the 200 a list is answered with`);
      const key = duplicateKey(text, LIST_OBJECTS);
      if (key !== undefined) throw new KubeApiError(res.status, 'Malformed', `${req.method} ${req.path}: ${duplicateKeyProblem(key)}`);
    }
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new KubeApiError(res.status, 'Malformed', `${req.method} ${req.path}: HTTP ${res.status} with a body that is not JSON`);
    }
    if (res.status < 200 || res.status > 299) {
      const status = body as {reason?: unknown; message?: unknown} | undefined;
      const reason = typeof status?.reason === 'string' ? status.reason : `HTTP${res.status}`;
      const message = typeof status?.message === 'string' ? status.message : `HTTP ${res.status}`;
      throw new KubeApiError(res.status, reason, `${req.method} ${req.path}: ${message}`);
    }
    return body;
  };

  return {
    server,
    namespace,
    request: (req) => queue.add(() => {
      req.guard?.();
      return send(req, true);
    }, {priority: req.priority ?? 0}),
    async watch(path, query, onEvent, done) {
      const watch = new Watch(kc);
      const controller = await watch.watch(path, query, (type, object) => onEvent({type, object}), done);
      return {abort: () => controller.abort()};
    },
  };
}
