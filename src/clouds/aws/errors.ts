/** Maps AWS SDK errors to the bounded failure reasons used by metrics, logs and /v1/status. */
import type {FailureReason, SourceFailure} from '../../core/types.ts';
import {redactedStart} from '../../observability/redact.ts';

interface SdkErrorShape {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: {httpStatusCode?: number; requestId?: string};
  $retryable?: {throttling?: boolean};
}

const THROTTLING = new Set([
  'ThrottlingException', 'Throttling', 'TooManyRequestsException', 'RequestLimitExceeded',
  'RequestThrottled', 'RequestThrottledException', 'SlowDown', 'PriorRequestNotComplete',
]);
const ACCESS_DENIED = new Set([
  'AccessDeniedException', 'AccessDenied', 'UnauthorizedOperation', 'UnrecognizedClientException',
  'InvalidClientTokenId', 'ExpiredTokenException', 'ExpiredToken', 'InvalidSignatureException',
  'SignatureDoesNotMatch', 'AuthFailure', 'CredentialsProviderError',
]);
// ECONNRESET is not here: a peer that cuts the connection answered, it did not time out.
const TIMEOUT = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException', 'AbortError', 'ETIMEDOUT', 'ESOCKETTIMEDOUT']);
const CONNECTION_CUT = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ECONNABORTED']);
const INVALID = new Set(['InvalidResponse', 'SyntaxError', 'SerializationException', 'Deserialization']);

/** An answer whose shape is wrong: the source fails as `invalid_response`, it is never read as empty. */
export function invalidResponse(message: string): Error {
  return Object.assign(new Error(message), {name: 'InvalidResponse'});
}

/**
 * Codes an opt-in region answers with when the account has not enabled it: the
 * region's STS does not know the credentials. Discovery skips such regions quietly.
 */
export const REGION_NOT_ENABLED_CODES: ReadonlySet<string> = new Set([
  'UnrecognizedClientException', 'InvalidClientTokenId', 'OptInRequired',
]);

/** The error's code as AWS reports it (`ThrottlingException`, `AccessDeniedException` ...). */
export function awsErrorCode(error: unknown): string {
  const e = error as SdkErrorShape | undefined;
  // Our credential wrapper keeps the AWS code (AccessDenied, CredentialsProviderError) in `code`.
  if (e?.name === 'AwsCredentialError' && e.code) return e.code;
  return e?.name ?? e?.code ?? 'Unknown';
}

/** Classifies an AWS SDK error into a bounded reason. */
export function classifyAwsError(error: unknown): FailureReason {
  const e = error as SdkErrorShape | undefined;
  const code = awsErrorCode(error);
  if (THROTTLING.has(code) || e?.$retryable?.throttling === true) return 'throttled';
  if (ACCESS_DENIED.has(code)) return 'access_denied';
  // smithy names a reset connection `TimeoutError` (code ECONNRESET): the peer answered by hanging up.
  if (e?.code !== undefined && CONNECTION_CUT.has(e.code)) return 'other';
  if (TIMEOUT.has(code) || (e?.code !== undefined && TIMEOUT.has(e.code))) return 'timeout';
  if (code === 'ResourceNotFoundException') return 'not_found';
  const status = e?.$metadata?.httpStatusCode;
  // An error status whose body is not AWS's JSON (a proxy's HTML page) is that error, not a malformed answer.
  if (INVALID.has(code) && (status === undefined || status < 300)) return 'invalid_response';
  if (status === 429) return 'throttled';
  if (status === 403 || status === 401) return 'access_denied';
  if ((status === undefined || status < 300) && /deseriali[sz]|unexpected token|is not valid json|expected .* got/i.test(e?.message ?? '')) return 'invalid_response';
  return 'other';
}

/** A printable failure: code, reason, a message cut to one line, the request id; never credentials. */
export function awsFailure(error: unknown, operation: string): SourceFailure {
  const e = error as SdkErrorShape | undefined;
  // Cloud messages reach /v1/status and CLI output: strip anything credential-shaped first.
  const message = redactedStart((e?.message ?? String(error)).split('\n')[0] ?? '', 300);
  const requestId = e?.$metadata?.requestId;
  const code = awsErrorCode(error);
  return {
    reason: classifyAwsError(error),
    code,
    message,
    operation,
    ...(requestId ? {requestId} : {}),
    // The SDK's provider chain and our credential wrapper both name "nothing found" this way.
    ...(code === 'CredentialsProviderError' ? {noCredentials: true as const} : {}),
  };
}
