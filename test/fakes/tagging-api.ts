/**
 * The Resource Groups Tagging API as @aws-sdk/client-resource-groups-tagging-api speaks it:
 * AWS JSON 1.1 (`POST /`, `X-Amz-Target: ResourceGroupsTaggingAPI_20170126.<Operation>`,
 * `application/x-amz-json-1.1`, errors as `{"__type", "message"}`). Only `GetResources` for
 * `eks:cluster` is served: the caller's clusters of the signed region that carry at least one
 * tag (as on AWS, a resource that was never tagged is not returned), sorted by ARN, `pageSize`
 * per page (capped by ResourcesPerPage, 1–100), with an opaque PaginationToken bound to
 * (account, region) and an empty PaginationToken on the last page.
 */
import {type ApiResponse, type AwsApi, AwsApiError, type BoundOperation, type CallContext, JSON_API_AUTH_ERROR_CODES} from './aws-api.ts';
import type {WireRequest} from './aws-sigv4.ts';

const JSON_TYPE = 'application/x-amz-json-1.1';
const TARGET_PREFIX = 'ResourceGroupsTaggingAPI_20170126.';

function ok(body: unknown): ApiResponse {
  return {status: 200, contentType: JSON_TYPE, body: JSON.stringify(body)};
}

function parseBody(req: WireRequest): Record<string, unknown> {
  try {
    const parsed = JSON.parse(Buffer.from(req.body).toString('utf8') || '{}') as unknown;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new AwsApiError('InvalidParameterException', 'Request body must be a JSON object', {status: 400});
}

function getResources(req: WireRequest): BoundOperation {
  return {
    name: 'GetResources',
    run(ctx: CallContext) {
      const body = parseBody(req);
      const types = body['ResourceTypeFilters'];
      if (types !== undefined && (!Array.isArray(types) || !types.every((t) => typeof t === 'string'))) {
        throw new AwsApiError('InvalidParameterException', 'ResourceTypeFilters must be a list of strings', {status: 400});
      }
      const perPage = body['ResourcesPerPage'] ?? 50;
      if (typeof perPage !== 'number' || !Number.isInteger(perPage) || perPage < 1 || perPage > 100) {
        throw new AwsApiError('InvalidParameterException', `ResourcesPerPage must be between 1 and 100, got ${JSON.stringify(perPage)}`, {status: 400});
      }
      const scope = `${ctx.caller.account}/${ctx.region}`;
      let after = '';
      const token = body['PaginationToken'];
      if (typeof token === 'string' && token !== '') {
        const decoded = decodeToken(token);
        if (decoded?.scope !== scope) throw new AwsApiError('PaginationTokenExpiredException', 'The pagination token is invalid or expired.', {status: 400});
        after = decoded.after;
      }
      const wantsEks = types === undefined || (types as string[]).some((t) => t === 'eks' || t === 'eks:cluster');
      const tagged = wantsEks
        ? ctx.world
            .clusters(ctx.caller.account, ctx.region)
            .filter((c) => Object.keys(c.tags).length > 0)
            .map((c) => ({ResourceARN: c.arn, Tags: Object.entries(c.tags).map(([Key, Value]) => ({Key, Value}))}))
            .sort((a, b) => (a.ResourceARN < b.ResourceARN ? -1 : a.ResourceARN > b.ResourceARN ? 1 : 0))
        : [];
      const rest = tagged.filter((m) => m.ResourceARN > after);
      const size = Math.min(ctx.pageSize, perPage);
      const page = rest.slice(0, size);
      const last = page.at(-1);
      const next = rest.length > size && last ? encodeToken({scope, after: last.ResourceARN}) : '';
      return ok({PaginationToken: next, ResourceTagMappingList: page});
    },
    malformed: (kind) => (kind === 'invalid-json' ? {status: 200, contentType: JSON_TYPE, body: '{"ResourceTagMappingList": [{"Resou'} : ok({})),
  };
}

function encodeToken(t: {scope: string; after: string}): string {
  return Buffer.from(JSON.stringify(t)).toString('base64url');
}

function decodeToken(token: string): {scope: string; after: string} | undefined {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as {scope?: unknown; after?: unknown};
    if (typeof t.scope === 'string' && typeof t.after === 'string') return {scope: t.scope, after: t.after};
  } catch {
    // not one of ours
  }
  return undefined;
}

function route(req: WireRequest): BoundOperation {
  const raw = req.headers['x-amz-target'];
  const target = Array.isArray(raw) ? raw[0] : raw;
  if (req.method === 'POST' && target === `${TARGET_PREFIX}GetResources`) return getResources(req);
  throw new AwsApiError('UnknownOperationException', `The fake tagging API does not serve ${String(target)}`, {status: 400});
}

/** The fake Resource Groups Tagging API. */
export const taggingApi: AwsApi = {
  service: 'tagging',
  route,
  errorResponse(error) {
    return {
      status: error.status,
      contentType: JSON_TYPE,
      headers: {'x-amzn-ErrorType': error.code},
      body: JSON.stringify({__type: error.code, message: error.message}),
    };
  },
  authErrorCodes: JSON_API_AUTH_ERROR_CODES,
};
