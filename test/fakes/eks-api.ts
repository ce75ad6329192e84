/**
 * The EKS REST-JSON API as @aws-sdk/client-eks speaks it (paths and members from its
 * schemas): ListClusters, DescribeCluster, CreateAccessEntry, DescribeAccessEntry,
 * ListAccessEntries, DeleteAccessEntry, AssociateAccessPolicy, DisassociateAccessPolicy and
 * ListAssociatedAccessPolicies. Errors carry `x-amzn-ErrorType` and `{"message"}`, which the SDK's
 * REST-JSON error parser reads. Pages hold `pageSize` items (capped by maxResults) and
 * nextToken is opaque, bound to (account, region, cluster) so a token reused elsewhere fails.
 */
import {createHash} from 'node:crypto';
import {type ApiResponse, type AwsApi, AwsApiError, type BoundOperation, type CallContext, JSON_API_AUTH_ERROR_CODES} from './aws-api.ts';
import {parseQuery, type WireRequest} from './aws-sigv4.ts';
import type {FakeAccessEntry, FakeAssociatedPolicy, FakeEksCluster} from './aws-world.ts';

const JSON_TYPE = 'application/json';

function ok(body: unknown): ApiResponse {
  return {status: 200, contentType: JSON_TYPE, body: JSON.stringify(body)};
}

const epochSeconds = (ms: number): number => ms / 1000;

/** The OIDC issuer EKS gives a cluster (`identity.oidc.issuer`): its region's issuer host and an id of 32 hex digits. */
export function eksOidcIssuer(c: Pick<FakeEksCluster, 'arn' | 'region'>): string {
  return `https://oidc.eks.${c.region}.amazonaws.com/id/${createHash('sha256').update(`oidc:${c.arn}`).digest('hex').slice(0, 32).toUpperCase()}`;
}

function clusterJson(c: FakeEksCluster): Record<string, unknown> {
  const shortId = createHash('sha256').update(c.arn).digest('hex').slice(0, 15);
  return {
    name: c.name,
    arn: c.arn,
    createdAt: epochSeconds(c.createdAt),
    version: c.version,
    ...(c.endpoint === undefined ? {} : {endpoint: c.endpoint}),
    roleArn: c.roleArn,
    resourcesVpcConfig: {
      subnetIds: [`subnet-0a${shortId}`, `subnet-0b${shortId}`],
      securityGroupIds: [],
      clusterSecurityGroupId: `sg-0c${shortId}`,
      vpcId: `vpc-0d${shortId}`,
      endpointPublicAccess: true,
      endpointPrivateAccess: false,
      publicAccessCidrs: ['0.0.0.0/0'],
    },
    kubernetesNetworkConfig: {serviceIpv4Cidr: '10.100.0.0/16', ipFamily: 'ipv4'},
    identity: {oidc: {issuer: eksOidcIssuer(c)}},
    status: c.status,
    certificateAuthority: c.caData === undefined ? {} : {data: c.caData},
    platformVersion: c.platformVersion,
    tags: c.tags,
    accessConfig: {authenticationMode: c.authenticationMode, bootstrapClusterCreatorAdminPermissions: true},
  };
}

function accessEntryJson(e: FakeAccessEntry): Record<string, unknown> {
  return {
    clusterName: e.clusterName,
    principalArn: e.principalArn,
    kubernetesGroups: e.kubernetesGroups,
    accessEntryArn: e.accessEntryArn,
    createdAt: epochSeconds(e.createdAt),
    modifiedAt: epochSeconds(e.modifiedAt),
    tags: e.tags,
    username: e.username,
    type: e.type,
  };
}

/** Reads maxResults/nextToken and returns one page of `items` (sorted by `key`) plus the next token. */
function page<T>(
  items: readonly T[],
  key: (item: T) => string,
  rawQuery: string,
  ctx: CallContext,
  scope: string,
): {items: T[]; nextToken?: string} {
  const query = new Map(parseQuery(rawQuery));
  const maxRaw = query.get('maxResults');
  const max = maxRaw === undefined ? 100 : Number(maxRaw);
  if (!Number.isInteger(max) || max < 1 || max > 100) {
    throw new AwsApiError('InvalidParameterException', `maxResults must be an integer between 1 and 100, got ${maxRaw}`);
  }
  const token = query.get('nextToken');
  let after: string | undefined;
  if (token !== undefined) {
    const decoded = decodeToken(token);
    if (decoded?.scope !== `${ctx.caller.account}/${ctx.region}/${scope}`) {
      throw new AwsApiError('InvalidParameterException', 'The nextToken provided is invalid.');
    }
    after = decoded.after;
  }
  const rest = after === undefined ? items : items.filter((i) => key(i) > after);
  const size = Math.min(ctx.pageSize, max);
  const out = rest.slice(0, size);
  const last = out.at(-1);
  return rest.length > size && last !== undefined
    ? {items: out, nextToken: encodeToken({scope: `${ctx.caller.account}/${ctx.region}/${scope}`, after: key(last)})}
    : {items: out};
}

function encodeToken(t: {scope: string; after: string}): string {
  return Buffer.from(JSON.stringify(t)).toString('base64url');
}

function decodeToken(token: string): {scope: string; after: string} | undefined {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (typeof t === 'object' && t !== null && 'scope' in t && 'after' in t && typeof t.scope === 'string' && typeof t.after === 'string') {
      return {scope: t.scope, after: t.after};
    }
  } catch {
    // fall through: not a token of ours
  }
  return undefined;
}

function findCluster(ctx: CallContext, name: string): FakeEksCluster {
  const cluster = ctx.world.cluster(ctx.caller.account, ctx.region, name);
  if (!cluster) {
    throw new AwsApiError('ResourceNotFoundException', `No cluster found for name: ${name}.`, {fields: {clusterName: name}});
  }
  return cluster;
}

function parseJsonBody(req: WireRequest): Record<string, unknown> {
  try {
    const parsed = JSON.parse(Buffer.from(req.body).toString('utf8') || '{}') as unknown;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new AwsApiError('InvalidParameterException', 'Request body must be a JSON object');
}

function stringList(value: unknown, member: string): string[] {
  if (value === undefined) return [];
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value;
  throw new AwsApiError('InvalidParameterException', `${member} must be a list of strings`);
}

function operation(name: string, run: (ctx: CallContext) => ApiResponse, missingFields: (ctx: CallContext) => unknown = () => ({})): BoundOperation {
  return {
    name,
    run,
    malformed: (kind, ctx) =>
      kind === 'invalid-json'
        ? {status: 200, contentType: JSON_TYPE, body: '{"cluster": {"name": "trunc'}
        : ok(missingFields(ctx)),
  };
}

function route(req: WireRequest): BoundOperation {
  let segments: string[];
  try {
    segments = req.rawPath.split('/').slice(1).map(decodeURIComponent);
  } catch {
    throw unknownOperation(req);
  }
  const [root, clusterName, sub, principalArn, policies, policyArn, extra] = segments;
  if (root !== 'clusters' || extra !== undefined) throw unknownOperation(req);
  if (policies !== undefined) {
    if (sub !== 'access-entries' || policies !== 'access-policies' || clusterName === undefined || principalArn === undefined) throw unknownOperation(req);
    return accessPolicyRoute(req, clusterName, principalArn, policyArn);
  }
  if (clusterName === undefined || clusterName === '') {
    if (req.method !== 'GET') throw unknownOperation(req);
    return operation('ListClusters', (ctx) => {
      const clusters = ctx.world.clusters(ctx.caller.account, ctx.region).map((c) => c.name);
      const p = page(clusters, (n) => n, req.rawQuery, ctx, 'clusters');
      return ok({clusters: p.items, ...(p.nextToken ? {nextToken: p.nextToken} : {})});
    });
  }
  if (sub === undefined) {
    if (req.method !== 'GET') throw unknownOperation(req);
    return operation(
      'DescribeCluster',
      (ctx) => ok({cluster: clusterJson(findCluster(ctx, clusterName))}),
      () => ({cluster: {name: clusterName}}),
    );
  }
  if (sub !== 'access-entries') throw unknownOperation(req);
  if (principalArn !== undefined) {
    if (req.method === 'DELETE') {
      return operation('DeleteAccessEntry', (ctx) => {
        findEntry(ctx, clusterName, principalArn);
        ctx.world.removeAccessEntry(ctx.caller.account, ctx.region, clusterName, principalArn);
        return ok({});
      });
    }
    if (req.method !== 'GET') throw unknownOperation(req);
    return operation('DescribeAccessEntry', (ctx) => {
      const entry = findCluster(ctx, clusterName).accessEntries.get(principalArn);
      if (!entry) {
        throw new AwsApiError(
          'ResourceNotFoundException',
          `The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'.`,
        );
      }
      return ok({accessEntry: accessEntryJson(entry)});
    });
  }
  if (req.method === 'GET') {
    return operation('ListAccessEntries', (ctx) => {
      const arns = [...findCluster(ctx, clusterName).accessEntries.keys()].sort();
      const p = page(arns, (a) => a, req.rawQuery, ctx, `access-entries/${clusterName}`);
      return ok({accessEntries: p.items, ...(p.nextToken ? {nextToken: p.nextToken} : {})});
    });
  }
  if (req.method !== 'POST') throw unknownOperation(req);
  return operation('CreateAccessEntry', (ctx) => {
    const cluster = findCluster(ctx, clusterName);
    const body = parseJsonBody(req);
    const principal = body['principalArn'];
    if (typeof principal !== 'string' || !principal.startsWith('arn:')) {
      throw new AwsApiError('InvalidParameterException', `principalArn must be an IAM principal ARN, got ${JSON.stringify(principal)}`);
    }
    if (cluster.authenticationMode === 'CONFIG_MAP') {
      throw new AwsApiError(
        'InvalidRequestException',
        "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.",
      );
    }
    if (cluster.accessEntries.has(principal)) {
      throw new AwsApiError('ResourceInUseException', 'The specified access entry resource is already in use on this cluster.');
    }
    const type = body['type'];
    const username = body['username'];
    const tags = body['tags'];
    const entry = ctx.world.addAccessEntry(ctx.caller.account, ctx.region, clusterName, {
      principalArn: principal,
      kubernetesGroups: stringList(body['kubernetesGroups'], 'kubernetesGroups'),
      ...(typeof type === 'string' ? {type} : {}),
      ...(typeof username === 'string' ? {username} : {}),
      ...(typeof tags === 'object' && tags !== null ? {tags: tags as Record<string, string>} : {}),
    });
    return ok({accessEntry: accessEntryJson(entry)});
  });
}

function findEntry(ctx: CallContext, clusterName: string, principalArn: string): FakeAccessEntry {
  const entry = findCluster(ctx, clusterName).accessEntries.get(principalArn);
  if (!entry) {
    throw new AwsApiError('ResourceNotFoundException', `The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'.`);
  }
  return entry;
}

function policyJson(p: FakeAssociatedPolicy): Record<string, unknown> {
  return {policyArn: p.policyArn, accessScope: p.accessScope, associatedAt: epochSeconds(p.associatedAt), modifiedAt: epochSeconds(p.modifiedAt)};
}

/** `/clusters/{name}/access-entries/{principalArn}/access-policies[/{policyArn}]`. */
function accessPolicyRoute(req: WireRequest, clusterName: string, principalArn: string, policyArn: string | undefined): BoundOperation {
  if (policyArn !== undefined) {
    if (req.method !== 'DELETE') throw unknownOperation(req);
    return operation('DisassociateAccessPolicy', (ctx) => {
      const entry = findEntry(ctx, clusterName, principalArn);
      if (!entry.accessPolicies.has(policyArn)) {
        throw new AwsApiError('ResourceNotFoundException', `The specified policyArn ${policyArn} is not associated with the access entry.`);
      }
      ctx.world.disassociateAccessPolicy(ctx.caller.account, ctx.region, clusterName, principalArn, policyArn);
      return ok({});
    });
  }
  if (req.method === 'GET') {
    return operation(
      'ListAssociatedAccessPolicies',
      (ctx) => {
        const policies = [...findEntry(ctx, clusterName, principalArn).accessPolicies.values()].sort((a, b) => a.policyArn.localeCompare(b.policyArn));
        const p = page(policies, (x) => x.policyArn, req.rawQuery, ctx, `access-policies/${clusterName}/${principalArn}`);
        return ok({clusterName, principalArn, associatedAccessPolicies: p.items.map(policyJson), ...(p.nextToken ? {nextToken: p.nextToken} : {})});
      },
      () => ({clusterName, principalArn}),
    );
  }
  if (req.method !== 'POST') throw unknownOperation(req);
  return operation(
    'AssociateAccessPolicy',
    (ctx) => {
      findEntry(ctx, clusterName, principalArn);
      const body = parseJsonBody(req);
      const policy = body['policyArn'];
      if (typeof policy !== 'string' || !/^arn:[\w-]+:eks::aws:cluster-access-policy\/\w+$/.test(policy)) {
        throw new AwsApiError('InvalidParameterException', `policyArn must be an EKS access policy ARN, got ${JSON.stringify(policy)}`);
      }
      const scope = body['accessScope'] as {type?: unknown; namespaces?: unknown} | undefined;
      if (scope?.type !== 'cluster' && scope?.type !== 'namespace') {
        throw new AwsApiError('InvalidParameterException', 'accessScope.type must be cluster or namespace');
      }
      const associated = ctx.world.associateAccessPolicy(ctx.caller.account, ctx.region, clusterName, principalArn, {
        policyArn: policy,
        accessScope: {type: scope.type, namespaces: stringList(scope.namespaces, 'accessScope.namespaces')},
      });
      return ok({clusterName, principalArn, associatedAccessPolicy: policyJson(associated)});
    },
    () => ({clusterName, principalArn}),
  );
}

function unknownOperation(req: WireRequest): AwsApiError {
  return new AwsApiError('UnknownOperationException', `The fake EKS does not serve ${req.method} ${req.rawPath}`, {status: 404});
}

/** The fake EKS API. */
export const eksApi: AwsApi = {
  service: 'eks',
  route,
  errorResponse(error) {
    return {
      status: error.status,
      contentType: JSON_TYPE,
      headers: {'x-amzn-ErrorType': error.code},
      body: JSON.stringify({...error.fields, message: error.message}),
    };
  },
  authErrorCodes: JSON_API_AUTH_ERROR_CODES,
};
