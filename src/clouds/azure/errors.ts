/** Maps Azure SDK and Entra ID errors to the bounded failure reasons used by metrics, logs and /v1/status. */
import type {FailureReason, SourceFailure} from '../../core/types.ts';
import {noAzureCredentialsMessage} from '../../credentials/aks-credential.ts';
import {recordedArmError, type ArmErrorBody} from './pipeline.ts';
import {redactedStart} from '../../observability/redact.ts';

interface AzureErrorShape {
  name?: string;
  code?: string;
  message?: string;
  statusCode?: number;
  response?: {status?: number; headers?: {get(name: string): string | undefined}};
  details?: {error?: {code?: unknown; message?: unknown}};
}

const THROTTLING = new Set(['TooManyRequests', 'SubscriptionRequestsThrottled', 'TenantRequestsThrottled', 'ResourceRequestsThrottled']);
const ACCESS_DENIED = new Set([
  'AuthorizationFailed', 'InvalidAuthenticationToken', 'InvalidAuthenticationTokenTenant', 'AuthenticationFailed',
  'ExpiredAuthenticationToken', 'LinkedAuthorizationFailed', 'Forbidden', 'Unauthorized',
  // @azure/identity: no credential in the chain worked, or Entra ID refused it.
  'CredentialUnavailableError', 'AuthenticationError', 'AggregateAuthenticationError', 'AuthenticationRequiredError',
]);
const NOT_FOUND = new Set(['SubscriptionNotFound', 'ResourceGroupNotFound', 'ResourceNotFound', 'NotFound']);
// ECONNRESET is not here: a peer that cuts the connection answered, it did not time out.
const TIMEOUT = new Set(['AbortError', 'TimeoutError', 'ETIMEDOUT', 'ESOCKETTIMEDOUT', 'GatewayTimeout', 'RequestTimeout']);
const INVALID = new Set(['PARSE_ERROR', 'InvalidResponse', 'SyntaxError']);

/**
 * The error's code as Azure reports it: the ARM error code of the body (`AuthorizationFailed`),
 * else the transport code (`ECONNREFUSED`, `PARSE_ERROR`), else the error's class name.
 */
export function azureErrorCode(error: unknown): string {
  const e = error as AzureErrorShape | undefined;
  if (e?.code && e.code !== 'REQUEST_SEND_ERROR') return e.code;
  const fromBody = armBody(e)?.code;
  if (fromBody) return fromBody;
  if (e?.code) return e.code;
  if (e?.name && e.name !== 'RestError' && e.name !== 'Error') return e.name;
  const status = httpStatus(e);
  return status ? `HTTP${status}` : (e?.name ?? 'Unknown');
}

/** Classifies an Azure error into a bounded reason. */
export function classifyAzureError(error: unknown): FailureReason {
  const e = error as AzureErrorShape | undefined;
  const code = azureErrorCode(error);
  const status = httpStatus(e);
  if (status === 429 || THROTTLING.has(code)) return 'throttled';
  if (status === 401 || status === 403 || ACCESS_DENIED.has(code) || (e?.name !== undefined && ACCESS_DENIED.has(e.name))) return 'access_denied';
  if (TIMEOUT.has(code) || (e?.name !== undefined && TIMEOUT.has(e.name)) || status === 408 || status === 504) return 'timeout';
  if (status === 404 || NOT_FOUND.has(code)) return 'not_found';
  // A body cut off mid-way is a broken connection, not a malformed answer (as on AWS).
  if (code === 'PARSE_ERROR' && /\baborted\b|ECONNRESET|socket hang up/i.test(e?.message ?? '')) return 'other';
  // The SDK refusing a 2xx it did not expect (a 204 for a list) is a malformed answer.
  if (status !== undefined && status >= 200 && status < 300) return 'invalid_response';
  if (INVALID.has(code) || /couldn't paginate|unexpected token|is not valid json|unexpected end of json/i.test(e?.message ?? '')) {
    return 'invalid_response';
  }
  return 'other';
}

/**
 * A printable failure: ARM code, reason, ARM's own message cut to one line (paged calls
 * replace it with "Pagination failed ...", so it is read back from the body), and the
 * `x-ms-request-id` support asks for. Never credentials: ARM error bodies carry none, and a
 * body the SDK could not parse (which may be a credential answer) is never quoted.
 */
export function azureFailure(error: unknown, operation: string): SourceFailure {
  const e = error as AzureErrorShape | undefined;
  const noCredentials = noAzureCredentialsMessage(error);
  const raw = noCredentials ?? armBody(e)?.message ?? e?.message ?? String(error);
  // The SDK's parse error quotes the whole body it could not read: a credential answer's is the user's kubeconfig.
  const oneLine = raw.replace(/ occurred while parsing the response body - [\s\S]*$/, ' occurred while parsing the response body (not shown)').replace(/\s*\n\s*/g, ' ').trim();
  // Redacted before it is cut: a credential cut in two is no longer known by its value.
  const message = redactedStart(oneLine, 300);
  const requestId = e?.response?.headers?.get('x-ms-request-id');
  return {
    reason: classifyAzureError(error),
    code: azureErrorCode(error),
    message,
    operation,
    ...(requestId ? {requestId} : {}),
    ...(noCredentials === undefined ? {} : {noCredentials: true as const}),
  };
}

/** The HTTP status an Azure error carries, if any. */
export function azureErrorStatus(error: unknown): number | undefined {
  return httpStatus(error as AzureErrorShape | undefined);
}

function httpStatus(e: AzureErrorShape | undefined): number | undefined {
  const status = e?.statusCode ?? e?.response?.status;
  return typeof status === 'number' && status > 0 ? status : undefined;
}

/** ARM's `{error: {code, message}}` body of an error answer: from the SDK's `details`, else as the pipeline noted it. */
function armBody(e: AzureErrorShape | undefined): ArmErrorBody | undefined {
  const details = e?.details?.error;
  if (details && (typeof details.code === 'string' || typeof details.message === 'string')) {
    return {
      ...(typeof details.code === 'string' ? {code: details.code} : {}),
      ...(typeof details.message === 'string' ? {message: details.message} : {}),
    };
  }
  return recordedArmError(e);
}
