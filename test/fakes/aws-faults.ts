/**
 * Fault and latency hooks of the AWS fakes. A hook sees each authenticated request's
 * (service, operation, region, account) and may answer it with an error, a malformed body,
 * silence, or what a region not enabled for the account answers.
 */
import type {FakeAwsService} from './aws-stats.ts';

/** What a fault hook is told about a request. */
export interface FaultContext {
  readonly service: FakeAwsService;
  readonly operation: string;
  readonly region: string;
  readonly account: string;
}

/** How to spoil one request. */
export type FaultAction =
  /** An AWS error; status defaults from the code (429 for throttling, 403 for access denied ...). */
  | {readonly code: string; readonly status?: number; readonly message?: string}
  /** A 200 the SDK cannot use: `invalid-json` (default; broken JSON/XML) or `missing-fields` (valid but empty). */
  | {readonly malformed: true | 'invalid-json' | 'missing-fields'}
  /** Never answer; the request stays open until the client gives up. */
  | {readonly hang: true}
  /** Answer like a region that is not enabled (opted in) for the account. */
  | {readonly optInRequired: true};

/** Decides, per request, whether to spoil it. */
export type FaultHook = (ctx: FaultContext) => FaultAction | undefined;

/** Extra delay before answering: one value, per region (`'*'` = others), or computed per request. */
export type Latency = number | Readonly<Record<string, number>> | ((ctx: FaultContext) => number);

/** Resolves the configured latency for one request, in ms. */
export function latencyFor(latency: Latency | undefined, ctx: FaultContext): number {
  if (latency === undefined) return 0;
  if (typeof latency === 'number') return latency;
  if (typeof latency === 'function') return latency(ctx);
  return latency[ctx.region] ?? latency['*'] ?? 0;
}

const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  ThrottlingException: 429,
  TooManyRequestsException: 429,
  Throttling: 400,
  AccessDeniedException: 403,
  AccessDenied: 403,
  UnrecognizedClientException: 403,
  ResourceNotFoundException: 404,
  InvalidParameterException: 400,
  InvalidRequestException: 400,
  ResourceInUseException: 409,
  ServiceUnavailableException: 503,
  ServiceUnavailable: 503,
  ServerException: 500,
  InternalFailure: 500,
};

/** HTTP status AWS sends with an error code (500 for codes it does not know). */
export function statusForCode(code: string): number {
  return STATUS_BY_CODE[code] ?? 500;
}

function matches(ctx: FaultContext, filter: Partial<FaultContext>): boolean {
  return (Object.keys(filter) as Array<keyof FaultContext>).every((k) => filter[k] === undefined || filter[k] === ctx[k]);
}

/** Every request to `region` (optionally only matching `filter`) fails with `code`. */
export function failRegion(region: string, code = 'ServiceUnavailableException', filter: Partial<FaultContext> = {}): FaultHook {
  return (ctx) => (ctx.region === region && matches(ctx, filter) ? {code} : undefined);
}

/** The first `n` requests matching `filter` are throttled (ThrottlingException on EKS, Throttling on STS). */
export function throttleFirst(n: number, filter: Partial<FaultContext> = {}): FaultHook {
  let left = n;
  return (ctx) => {
    if (left <= 0 || !matches(ctx, filter)) return undefined;
    left--;
    return ctx.service === 'sts' ? {code: 'Throttling'} : {code: 'ThrottlingException'};
  };
}

/** Requests to `region` (of `account`, when given) are answered as from a region not enabled for the account. */
export function regionNotEnabled(region: string, account?: string): FaultHook {
  return (ctx) => (ctx.region === region && (account === undefined || ctx.account === account) ? {optInRequired: true} : undefined);
}

/** The first hook that returns an action wins. */
export function combineFaults(...hooks: ReadonlyArray<FaultHook | undefined>): FaultHook {
  return (ctx) => {
    for (const hook of hooks) {
      const action = hook?.(ctx);
      if (action) return action;
    }
    return undefined;
  };
}
