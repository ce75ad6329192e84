/**
 * The cluster access probe: with a freshly minted token, `GET /version` and one
 * SelfSubjectAccessReview per impersonated resource, over TLS verified only against the
 * cluster CA the cloud API reported. The outcome is a `target_health` whose message tells
 * the operator what to fix. The token travels in one header and nowhere else.
 */
import https from 'node:https';
import type {TargetHealth} from '../../heartbeats/kube-server.ts';
import {systemClock, type Clock} from '../core/clock.ts';
import {redactedStart, redactText} from '../observability/redact.ts';
import {
  apiErrorMessage,
  forbiddenMessage,
  healthyMessage,
  IMPERSONATED_RESOURCES,
  noCredentialsMessage,
  noEndpointMessage,
  tlsMessage,
  unauthorizedMessage,
  unreachableMessage,
  type MessageTarget,
} from './messages.ts';
import {errorMessage} from '../core/errors.ts';

/** Bounded reasons of an unhealthy or unknown probe; metric label values. */
export type ProbeReason = 'unreachable' | 'tls' | 'unauthorized' | 'forbidden' | 'no_credentials' | 'no_endpoint' | 'api_error';

/** Inputs of one probe. */
export interface ProbeOptions extends MessageTarget {
  /** API server URL (`https://...`). */
  readonly endpoint?: string | undefined;
  /** Base64 of the cluster CA PEM, as EKS `certificateAuthority.data` / the AKS kubeconfig carry it. */
  readonly caData?: string | undefined;
  /** Mints (or returns a cached) bearer token; called once per probe. */
  readonly token: () => Promise<string>;
  /** Deadline for the whole probe, token included. */
  readonly timeoutMs: number;
  /** Aborting it cancels the probe: `probeCluster` then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Stamps `transition_timestamp` and runs the deadline; default the system clock. */
  readonly clock?: Clock;
}

interface KubeResponse {
  readonly status: number;
  readonly body: string;
}

const MAX_BODY_BYTES = 1 << 20;
// Node's codes for "the certificate chain does not lead to the CA we trust" and friends.
const CERT_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);
const NETWORK_DETAIL: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'DNS lookup failed temporarily',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
  EPIPE: 'connection closed',
};

/** Probes one cluster; resolves with its health, rejects only when `signal` aborts. */
export async function probeCluster(options: ProbeOptions): Promise<TargetHealth> {
  const clock = options.clock ?? systemClock;
  const at = (): string => new Date(clock.now()).toISOString();
  const result = (status: TargetHealth['status'], reason: ProbeReason | undefined, message: string): TargetHealth => ({
    status,
    ...(reason ? {reason} : {}),
    // Last line of defence: nothing token-like leaves the probe, whatever a server or SDK said.
    message: redactText(message),
    transition_timestamp: at(),
  });

  const {endpoint, caData} = options;
  if (!endpoint || !caData) {
    const missing = [endpoint ? '' : 'endpoint', caData ? '' : 'certificate authority'].filter(Boolean).join(' or ');
    return result('unknown', 'no_endpoint', noEndpointMessage(options, missing));
  }
  let base: URL;
  try {
    base = new URL(endpoint);
  } catch {
    return result('unknown', 'no_endpoint', noEndpointMessage(options, `valid endpoint (got ${JSON.stringify(endpoint)})`));
  }
  if (base.protocol !== 'https:') {
    return result('unhealthy', 'tls', tlsMessage(options, endpoint, `expected an https:// endpoint, got ${base.protocol}//`));
  }
  const caPem = Buffer.from(caData, 'base64').toString('utf8');
  if (!caPem.includes('-----BEGIN CERTIFICATE-----')) {
    return result('unhealthy', 'tls', tlsMessage(options, endpoint, 'the reported CA data is not a base64 PEM certificate'));
  }

  const deadline = new AbortController();
  let timedOut = false;
  const cancelTimer = clock.setTimeout(() => {
    timedOut = true;
    deadline.abort(new Error(`no answer within ${options.timeoutMs} ms`));
  }, options.timeoutMs);
  const onCallerAbort = (): void => deadline.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onCallerAbort, {once: true});
  // One agent per probe: the SSARs reuse the connection /version opened, and nothing of this
  // cluster's trust (its CA) leaks into another probe's connections.
  const agent = new https.Agent({ca: caPem, keepAlive: true, maxSockets: IMPERSONATED_RESOURCES.length});
  try {
    if (options.signal?.aborted) throw options.signal.reason;

    let token: string;
    try {
      token = await untilAborted(options.token(), deadline.signal);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      const detail = timedOut ? `no token within ${options.timeoutMs} ms` : messageOf(error);
      return result('unhealthy', 'no_credentials', noCredentialsMessage(options, detail));
    }

    const call = (method: 'GET' | 'POST', path: string, body?: unknown): Promise<KubeResponse> =>
      kubeRequest(agent, joinPath(base, path), {method, token, body, signal: deadline.signal});
    const failed = (error: unknown): TargetHealth => {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timedOut) return result('unhealthy', 'unreachable', unreachableMessage(options, endpoint, `no answer within ${options.timeoutMs} ms`));
      const code = (error as NodeJS.ErrnoException).code ?? '';
      if (CERT_ERRORS.has(code) || code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) {
        return result('unhealthy', 'tls', tlsMessage(options, endpoint, `${code}: ${messageOf(error)}`));
      }
      const detail = NETWORK_DETAIL[code] ?? messageOf(error);
      return result('unhealthy', 'unreachable', unreachableMessage(options, endpoint, code ? `${detail} (${code})` : detail));
    };

    let version: KubeResponse;
    try {
      version = await call('GET', '/version');
    } catch (error) {
      return failed(error);
    }
    if (version.status === 401) return result('unhealthy', 'unauthorized', unauthorizedMessage(options));
    if (version.status === 403) {
      return result('unhealthy', 'forbidden', forbiddenMessage(options, 'get on the non-resource URL /version', statusMessage(version.body)));
    }
    if (version.status !== 200) {
      return result('unhealthy', 'api_error', apiErrorMessage(options, endpoint, `GET /version answered ${version.status}${describeBody(version.body)}`));
    }
    const gitVersion = gitVersionOf(version.body);

    let reviews: KubeResponse[];
    try {
      reviews = await Promise.all(IMPERSONATED_RESOURCES.map((resource) => call('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', reviewOf(resource))));
    } catch (error) {
      return failed(error);
    }
    if (reviews.some((r) => r.status === 401)) return result('unhealthy', 'unauthorized', unauthorizedMessage(options));
    const refused = reviews.find((r) => r.status === 403);
    if (refused) {
      return result('unhealthy', 'forbidden', forbiddenMessage(options, 'create on selfsubjectaccessreviews (authorization.k8s.io), which every authenticated user normally has', statusMessage(refused.body)));
    }
    const denied: string[] = [];
    for (const [i, review] of reviews.entries()) {
      const resource = IMPERSONATED_RESOURCES[i] ?? '';
      const allowed = allowedOf(review);
      if (allowed === undefined) {
        return result('unhealthy', 'api_error', apiErrorMessage(options, endpoint, `SelfSubjectAccessReview for impersonate ${resource} answered ${review.status}${describeBody(review.body)}`));
      }
      if (!allowed) denied.push(resource);
    }
    if (denied.length > 0) return result('unhealthy', 'forbidden', forbiddenMessage(options, `impersonate on ${denied.join(', ')}`));
    return result('healthy', undefined, healthyMessage(options, gitVersion));
  } finally {
    cancelTimer();
    options.signal?.removeEventListener('abort', onCallerAbort);
    agent.destroy();
  }
}

/** One request; the token goes into the Authorization header only. */
function kubeRequest(agent: https.Agent, url: URL, init: {method: string; token: string; body?: unknown; signal: AbortSignal}): Promise<KubeResponse> {
  const payload = init.body === undefined ? undefined : JSON.stringify(init.body);
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: init.method,
        agent,
        signal: init.signal,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${init.token}`,
          'user-agent': 'kube-discovery-probe',
          ...(payload === undefined ? {} : {'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload))}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) {
            res.destroy(new Error(`response larger than ${MAX_BODY_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => resolve({status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8')}));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Settles like `promise`, or rejects when `signal` aborts first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, {once: true});
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

function joinPath(base: URL, path: string): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  return url;
}

function reviewOf(resource: string): unknown {
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {resourceAttributes: {verb: 'impersonate', group: '', resource}},
  };
}

function parse(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

function allowedOf(review: KubeResponse): boolean | undefined {
  if (review.status !== 200 && review.status !== 201) return undefined;
  const allowed = (parse(review.body) as {status?: {allowed?: unknown}} | undefined)?.status?.allowed;
  return typeof allowed === 'boolean' ? allowed : undefined;
}

function gitVersionOf(body: string): string | undefined {
  const v = (parse(body) as {gitVersion?: unknown} | undefined)?.gitVersion;
  return typeof v === 'string' ? v : undefined;
}

/**
 * The `message` of a Kubernetes Status body, if it is one, redacted before it is cut
 * (redactedStart): a token the server echoed must not stay half.
 */
function statusMessage(body: string): string | undefined {
  const m = (parse(body) as {kind?: unknown; message?: unknown} | undefined)?.message;
  return typeof m === 'string' && m ? redactedStart(m, 300) : undefined;
}

function describeBody(body: string): string {
  const message = statusMessage(body) ?? redactedStart(body.trim(), 200);
  return message ? `: ${message}` : '';
}

function messageOf(error: unknown): string {
  return errorMessage(error).replace(/\s*\n\s*/g, ' ').trim() || 'unknown error';
}
