/**
 * Client options and the three small pipeline policies every Azure client of discovery gets:
 * a per-attempt timeout (the SDK's pager sends pages after the first without the caller's
 * abort signal, so only a timeout bounds a hung page), a cap on how long a 429's Retry-After
 * may make us wait, and a note of ARM's error body (the pager replaces ARM's message with
 * "Pagination failed ...", which tells an operator nothing).
 */
import type {ContainerServiceClientOptionalParams} from '@azure/arm-containerservice';
import {duplicateKey, duplicateKeyProblem} from '../../core/json-keys.ts';

/** A pipeline policy as the Azure clients accept it. */
export type AzurePolicyConfig = NonNullable<ContainerServiceClientOptionalParams['additionalPolicies']>[number];
type Policy = AzurePolicyConfig['policy'];
type PipelineRequest = Parameters<Policy['sendRequest']>[0];

/** Client options shared by the ARM clients (both SDKs accept them); tests point TLS at their fakes. */
export type AzureClientOptions = Pick<ContainerServiceClientOptionalParams, 'tlsOptions' | 'retryOptions' | 'additionalPolicies' | 'httpClient' | 'userAgentOptions' | 'allowInsecureConnection'>;

/** Retry defaults: the SDK retries 429 (honouring Retry-After), 408, 5xx and transport errors. */
export const DEFAULT_RETRY_OPTIONS = {maxRetries: 5, retryDelayInMs: 1_000, maxRetryDelayInMs: 30_000} as const;

/** ARM error code and message of one failed request. */
export interface ArmErrorBody {
  readonly code?: string;
  readonly message?: string;
}

// Keyed by the request object the SDK's RestError carries, so nothing outlives the error.
const errorBodies = new WeakMap<object, ArmErrorBody>();

/** The ARM error body recorded for the request an SDK error carries, if any. */
export function recordedArmError(error: unknown): ArmErrorBody | undefined {
  const request = (error as {request?: unknown} | undefined)?.request;
  return request && typeof request === 'object' ? errorBodies.get(request) : undefined;
}

/** Options of {@link discoveryPolicies}. */
export interface DiscoveryPolicyOptions {
  /** Per-attempt timeout until response headers arrive. Default 30 s. */
  readonly requestTimeoutMs?: number;
  /** Longest Retry-After honoured; a longer one fails the call as throttled at once. Default 60 s. */
  readonly maxRetryAfterMs?: number;
}

/** The policies described at the top of this file. */
export function discoveryPolicies(options: DiscoveryPolicyOptions = {}): AzurePolicyConfig[] {
  const timeoutMs = options.requestTimeoutMs ?? 30_000;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  return [
    {
      position: 'perCall',
      policy: {
        name: 'kubeDiscoveryTimeout',
        sendRequest(request, next) {
          if (!request.timeout) request.timeout = timeoutMs;
          return next(request);
        },
      },
    },
    {
      // perCall: it judges the answer the retries ended with.
      position: 'perCall',
      policy: {
        name: 'kubeDiscoveryListShape',
        async sendRequest(request, next) {
          const response = await next(request);
          if (request.method === 'GET' && response.status >= 200 && response.status < 300 && !checkedByCaller.has(request) && isListPath(request.url)) {
            const problem = listShapeProblem(response.status, response.bodyAsText);
            if (problem) throw Object.assign(new Error(`ARM answered ${new URL(request.url).pathname} with ${problem}`), {name: 'InvalidResponse', code: 'InvalidResponse', statusCode: response.status});
          }
          return response;
        },
      },
    },
    {
      position: 'perRetry',
      policy: {
        name: 'kubeDiscoveryArmErrors',
        async sendRequest(request, next) {
          const response = await next(request);
          if (response.status >= 400) {
            noteErrorBody(request, response.bodyAsText);
            if (response.status === 429 && retryAfterMs(response.headers) > maxRetryAfterMs) {
              // Without the header the SDK's retry policy does not wait: the 429 surfaces as throttled.
              for (const name of ['retry-after', 'retry-after-ms', 'x-ms-retry-after-ms']) response.headers.delete(name);
            }
          }
          return response;
        },
      },
    },
  ];
}

const LIST_PATHS = [
  /\/subscriptions\/?$/i, /\/providers\/Microsoft\.ContainerService\/managedClusters\/?$/i, /\/providers\/Microsoft\.Authorization\/roleAssignments\/?$/i,
  /\/providers\/Microsoft\.Management\/managementGroups\/[^/]+\/descendants\/?$/i,
];

function isListPath(url: string): boolean {
  const path = new URL(url).pathname;
  return LIST_PATHS.some((p) => p.test(path));
}

// Requests whose caller parses and checks the list page itself (see arm-list.ts): parsing it here too doubled the work.
const checkedByCaller = new WeakSet<object>();

/** Marks a request whose list page the caller checks with {@link parseListPage}, so the shape policy does not parse it again. */
export function shapeCheckedByCaller(request: object): void {
  checkedByCaller.add(request);
}

/** A well-formed ARM list page: its resources (each a JSON object) and the link to the next page. */
export interface ListPage {
  readonly value: readonly Record<string, unknown>[];
  readonly nextLink: string | undefined;
}

/**
 * Malformed is not empty: the SDK reads a list page without `value` as an empty page, which
 * would deregister every cluster of the subscription; a page with a key given twice is malformed
 * too (src/core/json-keys.ts). Says what is wrong, or undefined.
 */
export function listShapeProblem(status: number, text: string | null | undefined): string | undefined {
  const page = parseListPage(status, text);
  return 'problem' in page ? page.problem : undefined;
}

/** Parses one list page strictly (one JSON.parse): the page, or what is wrong with it. */
export function parseListPage(status: number, text: string | null | undefined): ListPage | {readonly problem: string} {
  if (status !== 200) return {problem: `status ${status} instead of a 200 list page`};
  if (!text) return {problem: 'an empty body instead of a list page'};
  // JSON.parse keeps the last of two equal keys: a second `"value":[]` or `"nextLink":null` would read as an empty or last page.
  const key = duplicateKey(text);
  if (key !== undefined) return {problem: duplicateKeyProblem(key)};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return {problem: 'a body that is not JSON'};
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return {problem: 'a body that is not a JSON object'};
  // ARM names a failure in `error`; a page carrying one (with or without a value) is no page of the list.
  if (Object.hasOwn(body, 'error')) return {problem: 'a 200 list page that carries an error'};
  const {value, nextLink} = body as {value?: unknown; nextLink?: unknown};
  if (!Array.isArray(value)) return {problem: `a page whose value is ${value === undefined ? 'missing' : value === null ? 'null' : `a ${typeof value}`}`};
  for (const v of value as unknown[]) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {problem: 'a page whose value holds something that is not a resource'};
  }
  if (nextLink !== undefined && nextLink !== null && typeof nextLink !== 'string') return {problem: 'a page whose nextLink is not a string'};
  // An empty nextLink is the last page, as the SDK reads it.
  return {value: value as Record<string, unknown>[], nextLink: typeof nextLink === 'string' && nextLink !== '' ? nextLink : undefined};
}

function noteErrorBody(request: PipelineRequest, text: string | null | undefined): void {
  if (!text) return;
  try {
    const err = (JSON.parse(text) as {error?: {code?: unknown; message?: unknown}}).error;
    if (!err || typeof err !== 'object') return;
    errorBodies.set(request, {
      ...(typeof err.code === 'string' ? {code: err.code} : {}),
      ...(typeof err.message === 'string' ? {message: err.message} : {}),
    });
  } catch {
    // Not ARM's JSON (a proxy's HTML page ...): the status code has to do.
  }
}

function retryAfterMs(headers: {get(name: string): string | undefined}): number {
  const ms = Number(headers.get('retry-after-ms') ?? headers.get('x-ms-retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const value = headers.get('retry-after');
  if (value === undefined) return 0;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isFinite(date) ? date - Date.now() : 0;
}

/** Options for one ARM client: endpoint, the cloud's token scope, sane retries and the policies above. */
export function armClientOptions(endpoint: string, scope: string, extra: AzureClientOptions = {}, policies: DiscoveryPolicyOptions = {}) {
  const insecure = endpoint.startsWith('http://');
  return {
    ...extra,
    endpoint,
    retryOptions: {...DEFAULT_RETRY_OPTIONS, ...extra.retryOptions},
    additionalPolicies: [...discoveryPolicies(policies), ...(extra.additionalPolicies ?? [])],
    // The schema allows http only for a loopback host (a local fake or a tunnel).
    ...(insecure ? {allowInsecureConnection: true} : {}),
    // @azure/arm-containerservice reads `credentials.scopes`; @azure/arm-resources-subscriptions `credentialScopes`.
    credentials: {scopes: [scope]},
    credentialScopes: [scope],
  };
}
