/**
 * The contract between the AWS fake server (aws-server.ts) and one API (eks-api.ts,
 * sts-api.ts): the server authenticates, counts, delays and spoils requests; an API only
 * routes a request to an operation, runs it against the world and formats its errors.
 */
import type {FakeAwsWorld, ResolvedCredentials} from './aws-world.ts';
import {statusForCode} from './aws-faults.ts';
import type {AuthFailureKind, WireRequest} from './aws-sigv4.ts';
import type {FakeAwsService} from './aws-stats.ts';

/** An AWS error answer; the API's protocol decides how it looks on the wire. */
export class AwsApiError extends Error {
  override readonly name = 'AwsApiError';
  readonly code: string;
  readonly status: number;
  /** Extra members of a REST-JSON error body (e.g. `clusterName`). */
  readonly fields: Readonly<Record<string, string>>;

  constructor(code: string, message: string, options: {status?: number; fields?: Record<string, string>} = {}) {
    super(message);
    this.code = code;
    this.status = options.status ?? statusForCode(code);
    this.fields = options.fields ?? {};
  }
}

/** A complete answer. */
export interface ApiResponse {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  /** Extra response headers (e.g. `x-amzn-ErrorType`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** What an operation may use while running. */
export interface CallContext {
  readonly world: FakeAwsWorld;
  readonly caller: ResolvedCredentials;
  readonly region: string;
  readonly requestId: string;
  /** Items per page of list operations. */
  readonly pageSize: number;
}

/** A request routed to one operation, ready to run. */
export interface BoundOperation {
  /** The SDK's operation name (`ListClusters`, `AssumeRole` ...). */
  readonly name: string;
  /** Runs it; throws AwsApiError for error answers. */
  run(ctx: CallContext): ApiResponse;
  /** A 200 the SDK cannot use. */
  malformed(kind: 'invalid-json' | 'missing-fields', ctx: CallContext): ApiResponse;
}

/** One AWS API served by the fake. */
export interface AwsApi {
  readonly service: FakeAwsService;
  /** Finds the operation; throws AwsApiError when there is none. */
  route(req: WireRequest): BoundOperation;
  /** Formats an error the way this API's protocol does. */
  errorResponse(error: AwsApiError, requestId: string): ApiResponse;
  /** Error code this API answers per authentication failure, and for a region not enabled. */
  readonly authErrorCodes: Readonly<Record<AuthFailureKind | 'opt-in-required', string>>;
}

/** The authentication error codes of the JSON-protocol APIs (EKS, Organizations, tagging, Account). */
export const JSON_API_AUTH_ERROR_CODES: AwsApi['authErrorCodes'] = {
  'missing': 'MissingAuthenticationTokenException',
  'malformed': 'IncompleteSignatureException',
  'unknown-key': 'UnrecognizedClientException',
  'bad-signature': 'InvalidSignatureException',
  'expired': 'ExpiredTokenException',
  'opt-in-required': 'UnrecognizedClientException',
};

/** A JSON-protocol request's input; an unparsable body is the error `code` (400), as the real API answers. */
export function jsonInput(body: Uint8Array, code: string): Record<string, unknown> {
  try {
    const text = Buffer.from(body).toString('utf8');
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    throw new AwsApiError(code, 'Request body is not JSON', {status: 400});
  }
}
