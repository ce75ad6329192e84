/**
 * Counts and times every HTTP attempt an Azure SDK client makes, retries included, as an
 * `@azure/core-rest-pipeline` policy added per retry. Typed structurally (the real
 * PipelinePolicy satisfies it) so observability does not import the SDK (SDK imports stay in src/clouds and src/credentials).
 */
import type {Metrics} from './metrics.ts';

/** What the policy reads of a pipeline request. */
export interface AzureRequestShape {
  readonly url: string;
  readonly method: string;
}

/** What the policy reads of a pipeline response. */
export interface AzureResponseShape {
  readonly status: number;
  readonly headers: {get(name: string): string | undefined};
  readonly bodyAsText?: string | null;
}

/** A pipeline policy (structurally `PipelinePolicy` of @azure/core-rest-pipeline). */
export interface AzureMetricsPolicy {
  readonly name: string;
  sendRequest<Req extends AzureRequestShape, Res extends AzureResponseShape>(request: Req, next: (request: Req) => Promise<Res>): Promise<Res>;
}

/** Name of the policy in the pipeline. */
export const AZURE_METRICS_POLICY = 'kubeDiscoveryMetricsPolicy';

const VERBS: Readonly<Record<string, string>> = {GET: 'Get', PUT: 'CreateOrUpdate', PATCH: 'Update', DELETE: 'Delete', POST: 'Action', HEAD: 'CheckExistence'};

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}

/**
 * The (service, operation) of an ARM request, named like the REST API's operation ids with
 * every id stripped: `GET /subscriptions/{s}/providers/Microsoft.ContainerService/managedClusters`
 * is (`containerservice`, `ManagedClusters_List`); nextLink pages map to the same operation.
 */
export function armOperation(method: string, url: string): {service: string; operation: string} {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return {service: 'unknown', operation: 'unknown'};
  }
  if (/\/oauth2\//i.test(path)) return {service: 'entra', operation: 'Token'};
  const raw = path.split('/').filter(Boolean);
  let service = 'resources';
  const items: string[] = [];
  for (let i = 0; i < raw.length; i++) {
    const segment = raw[i] ?? '';
    if (segment.toLowerCase() === 'providers' && items.length % 2 === 0 && raw[i + 1] !== undefined) {
      service = (raw[i + 1] ?? '').replace(/^microsoft\./i, '').toLowerCase();
      i++;
      continue;
    }
    items.push(segment);
  }
  if (items.length === 0) return {service, operation: 'unknown'};
  const upper = method.toUpperCase();
  const inResourceGroup = items.some((s, i) => i % 2 === 0 && i < items.length - 1 && s.toLowerCase() === 'resourcegroups');
  let type: string;
  let verb: string;
  if (items.length % 2 === 1 && upper === 'POST' && items.length >= 3) {
    type = items[items.length - 3] ?? '';
    verb = capitalize(items[items.length - 1] ?? '');
  } else if (items.length % 2 === 1) {
    type = items[items.length - 1] ?? '';
    verb = inResourceGroup && type.toLowerCase() !== 'resourcegroups' ? 'ListByResourceGroup' : 'List';
  } else {
    type = items[items.length - 2] ?? '';
    verb = VERBS[upper] ?? capitalize(upper.toLowerCase());
  }
  return {service, operation: `${capitalize(type)}_${verb}`};
}

/** The code of a failed ARM answer: `error.code` of the body, else `x-ms-error-code`, else `HTTP_<status>`. */
export function armErrorCode(response: AzureResponseShape): string {
  try {
    const body = JSON.parse(response.bodyAsText ?? '') as {error?: {code?: unknown}; code?: unknown};
    const code = body.error?.code ?? body.code;
    if (typeof code === 'string' && code !== '') return code;
  } catch {
    // Not JSON (a proxy's HTML page, an empty 429): fall through to headers and status.
  }
  return response.headers.get('x-ms-error-code') ?? `HTTP_${response.status}`;
}

/** Distinct GET URLs without query kept by {@link operationOf}; past it the cache starts over. */
const OPERATION_CACHE_SIZE = 4096;
const operations = new Map<string, {service: string; operation: string}>();

/**
 * {@link armOperation}, remembered by method and URL without its query (which never changes the
 * operation): a steady cycle calls the same list URL of every subscription again, and parsing
 * each one was a measurable part of a W5 cycle's 500 calls.
 */
function operationOf(method: string, url: string): {service: string; operation: string} {
  // Not remembered: POSTs name one cluster each (listClusterUserCredential), and a cold cycle's
  // thousands of them filled the cache, which then started over without the list URLs every steady cycle repeats.
  if (method !== 'GET') return armOperation(method, url);
  const query = url.indexOf('?');
  const key = `${method} ${query < 0 ? url : url.slice(0, query)}`;
  let found = operations.get(key);
  if (found === undefined) {
    if (operations.size >= OPERATION_CACHE_SIZE) operations.clear();
    found = armOperation(method, url);
    operations.set(key, found);
  }
  return found;
}

/** The metrics policy; add it with position `perRetry` so every attempt is counted. */
export function azureMetricsPolicy(metrics: Pick<Metrics, 'cloudApiCall'>): AzureMetricsPolicy {
  return {
    name: AZURE_METRICS_POLICY,
    async sendRequest(request, next) {
      const {service, operation} = operationOf(request.method, request.url);
      const started = performance.now();
      const seconds = (): number => (performance.now() - started) / 1000;
      try {
        const response = await next(request);
        const ok = response.status < 400;
        metrics.cloudApiCall({
          service,
          operation,
          code: ok ? 'OK' : armErrorCode(response),
          durationSeconds: seconds(),
          throttled: response.status === 429,
        });
        return response;
      } catch (error) {
        const code = (error as {code?: unknown}).code;
        metrics.cloudApiCall({service, operation, code: typeof code === 'string' ? code : 'Error', durationSeconds: seconds(), throttled: false});
        throw error;
      }
    },
  };
}

/** `additionalPolicies` for an Azure SDK client's options: the metrics policy, once per retry. */
export function azureMetricsPolicies(metrics: Pick<Metrics, 'cloudApiCall'>): {policy: AzureMetricsPolicy; position: 'perRetry'}[] {
  return [{policy: azureMetricsPolicy(metrics), position: 'perRetry'}];
}
