/**
 * The AWS Account Management API's ListRegions (REST-JSON, `POST /listRegions`) for the AWS fake:
 * the caller's own account's regions with their opt status. An account's enabled regions come
 * from `world.enabledRegions` (default: every region that needs no opt-in); every page is two
 * regions unless the fake's page size says otherwise.
 */
import {type ApiResponse, type AwsApi, AwsApiError, type BoundOperation, type CallContext, JSON_API_AUTH_ERROR_CODES, jsonInput} from './aws-api.ts';
import type {WireRequest} from './aws-sigv4.ts';

const JSON_TYPE = 'application/json';

/** Regions of the aws partition that need no opt-in (ENABLED_BY_DEFAULT). */
export const DEFAULT_REGIONS: readonly string[] = [
  'ap-northeast-1', 'ap-northeast-2', 'ap-northeast-3', 'ap-south-1', 'ap-southeast-1', 'ap-southeast-2', 'ca-central-1',
  'eu-central-1', 'eu-north-1', 'eu-west-1', 'eu-west-2', 'eu-west-3', 'sa-east-1', 'us-east-1', 'us-east-2', 'us-west-1', 'us-west-2',
];

function listRegions(input: Record<string, unknown>, ctx: CallContext): ApiResponse {
  const enabled = ctx.world.enabledRegions.get(ctx.caller.account) ?? DEFAULT_REGIONS;
  const regions = [...enabled].sort().map((name) => ({RegionName: name, RegionOptStatus: DEFAULT_REGIONS.includes(name) ? 'ENABLED_BY_DEFAULT' : 'ENABLED'}));
  const max = typeof input['MaxResults'] === 'number' ? Math.min(input['MaxResults'], ctx.pageSize) : ctx.pageSize;
  const token = input['NextToken'];
  const start = typeof token === 'string' ? Number(Buffer.from(token, 'base64url').toString('utf8').replace(/^regions:/, '')) : 0;
  if (!Number.isInteger(start) || start < 0) throw new AwsApiError('ValidationException', 'The NextToken is not valid.', {status: 400});
  const end = start + max;
  return {
    status: 200,
    contentType: JSON_TYPE,
    body: JSON.stringify({Regions: regions.slice(start, end), ...(end < regions.length ? {NextToken: Buffer.from(`regions:${end}`).toString('base64url')} : {})}),
  };
}

function route(req: WireRequest): BoundOperation {
  if (req.method !== 'POST' || req.rawPath !== '/listRegions') {
    throw new AwsApiError('UnknownOperationException', `The fake Account API serves POST /listRegions, got ${req.method} ${req.rawPath}`, {status: 404});
  }
  const input = jsonInput(req.body, 'ValidationException');
  return {
    name: 'ListRegions',
    run: (ctx) => listRegions(input, ctx),
    malformed: (kind) => ({status: 200, contentType: JSON_TYPE, body: kind === 'invalid-json' ? '{"Regions": [' : '{}'}),
  };
}

/** The fake Account Management API. */
export const accountApi: AwsApi = {
  service: 'account',
  route,
  errorResponse(error) {
    return {status: error.status, contentType: JSON_TYPE, headers: {'x-amzn-ErrorType': error.code}, body: JSON.stringify({message: error.message})};
  },
  authErrorCodes: JSON_API_AUTH_ERROR_CODES,
};
