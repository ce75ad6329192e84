/**
 * The STS query API (form-encoded request, XML answer) as @aws-sdk/client-sts speaks it:
 * GetCallerIdentity (also as the presigned GET an EKS bearer token carries) and AssumeRole
 * with trust and ExternalId checks. Errors are `<ErrorResponse><Error>` documents.
 */
import {AwsApiError, type ApiResponse, type AwsApi, type BoundOperation, type CallContext} from './aws-api.ts';
import {parseQuery, type WireRequest} from './aws-sigv4.ts';
import {parseRoleArn} from './aws-world.ts';

const XMLNS = 'https://sts.amazonaws.com/doc/2011-06-15/';
const XML_TYPE = 'text/xml';

/** Escapes text for an XML element. */
function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function xmlOk(action: string, result: string, requestId: string): ApiResponse {
  return {
    status: 200,
    contentType: XML_TYPE,
    body:
      `<${action}Response xmlns="${XMLNS}">\n  <${action}Result>${result}</${action}Result>\n` +
      `  <ResponseMetadata><RequestId>${requestId}</RequestId></ResponseMetadata>\n</${action}Response>\n`,
  };
}

function getCallerIdentity(ctx: CallContext): ApiResponse {
  const c = ctx.caller;
  return xmlOk(
    'GetCallerIdentity',
    `<Arn>${esc(c.arn)}</Arn><UserId>${esc(c.userId)}</UserId><Account>${c.account}</Account>`,
    ctx.requestId,
  );
}

function assumeRole(params: ReadonlyMap<string, string>, ctx: CallContext): ApiResponse {
  const roleArn = params.get('RoleArn') ?? '';
  const sessionName = params.get('RoleSessionName') ?? '';
  if (!parseRoleArn(roleArn)) throw new AwsApiError('ValidationError', `RoleArn must be an IAM role ARN, got ${JSON.stringify(roleArn)}`, {status: 400});
  if (!/^[\w+=,.@-]{2,64}$/.test(sessionName)) {
    throw new AwsApiError('ValidationError', `RoleSessionName must be 2-64 characters of [\\w+=,.@-], got ${JSON.stringify(sessionName)}`, {status: 400});
  }
  const durationRaw = params.get('DurationSeconds');
  const duration = durationRaw === undefined ? 3600 : Number(durationRaw);
  const denied = new AwsApiError('AccessDenied', `User: ${ctx.caller.arn} is not authorized to perform: sts:AssumeRole on resource: ${roleArn}`);
  const role = ctx.world.role(roleArn);
  if (!role || !role.trust.includes(ctx.caller.account)) throw denied;
  if (role.externalId !== undefined && params.get('ExternalId') !== role.externalId) throw denied;
  const max = role.maxSessionDurationSeconds ?? 3600;
  if (!Number.isInteger(duration) || duration < 900 || duration > max) {
    throw new AwsApiError(
      'ValidationError',
      `The requested DurationSeconds exceeds the MaxSessionDuration set for this role: expected 900..${max}, got ${durationRaw}`,
      {status: 400},
    );
  }
  const creds = ctx.world.issueRoleCredentials(roleArn, sessionName, duration);
  const roleId = creds.userId;
  return xmlOk(
    'AssumeRole',
    `<AssumedRoleUser><AssumedRoleId>${esc(roleId)}</AssumedRoleId><Arn>${esc(creds.arn)}</Arn></AssumedRoleUser>` +
      `<Credentials><AccessKeyId>${creds.accessKeyId}</AccessKeyId><SecretAccessKey>${esc(creds.secretAccessKey)}</SecretAccessKey>` +
      `<SessionToken>${esc(creds.sessionToken ?? '')}</SessionToken>` +
      // Whole seconds, as STS writes it.
      `<Expiration>${new Date(creds.expiresAt ?? 0).toISOString().replace(/\.\d{3}Z$/, 'Z')}</Expiration></Credentials>`,
    ctx.requestId,
  );
}

function route(req: WireRequest): BoundOperation {
  if (req.rawPath !== '/' || (req.method !== 'POST' && req.method !== 'GET')) {
    throw new AwsApiError('InvalidAction', `The fake STS serves GET and POST on '/', got ${req.method} ${req.rawPath}`, {status: 400});
  }
  const pairs = req.method === 'POST' ? [...new URLSearchParams(Buffer.from(req.body).toString('utf8'))] : parseQuery(req.rawQuery);
  const params = new Map(pairs);
  const action = params.get('Action');
  const bind = (name: string, run: (ctx: CallContext) => ApiResponse): BoundOperation => ({
    name,
    run,
    malformed: (kind, ctx) =>
      kind === 'invalid-json'
        ? {status: 200, contentType: XML_TYPE, body: `<${name}Response xmlns="${XMLNS}"><${name}Result><Arn>`}
        : xmlOk(name, '', ctx.requestId),
  });
  if (action === 'GetCallerIdentity') return bind(action, getCallerIdentity);
  // A presigned GET may only ask who the signer is, never for new credentials.
  if (action === 'AssumeRole' && req.method === 'POST') return bind(action, (ctx) => assumeRole(params, ctx));
  throw new AwsApiError('InvalidAction', `Could not find operation ${action ?? '(no Action)'} for version ${params.get('Version') ?? '?'}`, {status: 400});
}

/** The fake STS API. */
export const stsApi: AwsApi = {
  service: 'sts',
  route,
  errorResponse(error, requestId) {
    const type = error.status >= 500 ? 'Receiver' : 'Sender';
    return {
      status: error.status,
      contentType: XML_TYPE,
      body:
        `<ErrorResponse xmlns="${XMLNS}">\n  <Error><Type>${type}</Type><Code>${esc(error.code)}</Code>` +
        `<Message>${esc(error.message)}</Message></Error>\n  <RequestId>${requestId}</RequestId>\n</ErrorResponse>\n`,
    };
  },
  authErrorCodes: {
    'missing': 'MissingAuthenticationToken',
    'malformed': 'IncompleteSignature',
    'unknown-key': 'InvalidClientTokenId',
    'bad-signature': 'SignatureDoesNotMatch',
    'expired': 'ExpiredToken',
    'opt-in-required': 'InvalidClientTokenId',
  },
};
