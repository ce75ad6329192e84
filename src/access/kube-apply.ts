/**
 * Creates or updates cluster-scoped RBAC objects through the Kubernetes API, over HTTPS
 * verified with the cluster's CA, with a bearer token. Idempotent: an object that already
 * says what we want is left alone and reported `unchanged`.
 */
import {request} from 'node:https';
import type {RbacObject} from './rbac.ts';
import {rbacUpToDate} from './rbac.ts';
import {redactedStart} from '../observability/redact.ts';

/** What happened to one object. */
export type ApplyOutcome = 'created' | 'updated' | 'unchanged';

/** A Kubernetes API server and how to authenticate to it. */
export interface KubeTarget {
  /** `https://host[:port]`. */
  readonly server: string;
  /** PEM of the cluster's CA. */
  readonly caPem: string;
  /** Bearer token; a secret, never printed. */
  readonly token: string;
  readonly timeoutMs?: number;
}

/** The API server refused or failed a request; `message` is the server's Status message, never the token. */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  readonly status: number;
  /** Kubernetes Status reason (`Forbidden`, `Invalid` ...) or a Node error code. */
  readonly reason: string;

  constructor(message: string, status: number, reason: string, options?: {cause?: unknown}) {
    super(message, options);
    this.status = status;
    this.reason = reason;
  }
}

const RESOURCE_PATHS: Readonly<Record<RbacObject['kind'], string>> = {
  ClusterRole: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
  ClusterRoleBinding: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
};

/** Makes the object on the cluster look like `desired`: create when missing, update when different. */
export async function applyRbacObject(target: KubeTarget, desired: RbacObject): Promise<ApplyOutcome> {
  const collection = RESOURCE_PATHS[desired.kind];
  const itemPath = `${collection}/${encodeURIComponent(desired.metadata.name)}`;
  const current = await call(target, 'GET', itemPath);
  if (current.status === 404) {
    const created = await call(target, 'POST', collection, desired);
    if (created.status === 409) {
      // Someone created it between our GET and POST: compare with theirs on the next run.
      throw new KubeApiError(`${describe(desired)} was created concurrently; run configure again`, 409, 'AlreadyExists');
    }
    expectOk(created, `create ${describe(desired)}`);
    return 'created';
  }
  expectOk(current, `read ${describe(desired)}`);
  if (rbacUpToDate(desired, current.body)) return 'unchanged';
  if (desired.kind === 'ClusterRoleBinding' && JSON.stringify(current.body['roleRef']) !== JSON.stringify(desired.roleRef)) {
    // roleRef is immutable; replacing a binding someone else made is not ours to decide.
    throw new KubeApiError(
      `${describe(desired)} exists with roleRef ${JSON.stringify(current.body['roleRef'])}, expected ${JSON.stringify(desired.roleRef)}; ` +
        'roleRef cannot change: delete the binding or choose another name',
      409,
      'Conflict',
    );
  }
  const metadata = current.body['metadata'] as {resourceVersion?: string; labels?: Record<string, string>} | undefined;
  const update = {
    ...desired,
    metadata: {
      ...desired.metadata,
      labels: {...metadata?.labels, ...desired.metadata.labels},
      // Optimistic concurrency: refused with 409 if the object changed since we read it.
      ...(metadata?.resourceVersion ? {resourceVersion: metadata.resourceVersion} : {}),
    },
  };
  expectOk(await call(target, 'PUT', itemPath, update), `update ${describe(desired)}`);
  return 'updated';
}

/** `clusterrole kube-discovery`, as kubectl names objects. */
export function describe(object: RbacObject): string {
  return `${object.kind.toLowerCase()} ${object.metadata.name}`;
}

interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

function expectOk(reply: Reply, what: string): void {
  if (reply.status >= 200 && reply.status < 300) return;
  const message = typeof reply.body['message'] === 'string' ? reply.body['message'] : `HTTP ${reply.status}`;
  const reason = typeof reply.body['reason'] === 'string' ? reply.body['reason'] : `HTTP${reply.status}`;
  const hint =
    reply.status === 401
      ? ' (the cluster did not accept the token: check the identity has an access entry or aws-auth mapping)'
      : reply.status === 403
        ? ' (the identity running configure needs permission to manage ClusterRoles and ClusterRoleBindings, e.g. cluster-admin)'
        : '';
  throw new KubeApiError(`cannot ${what}: ${reply.status} ${reason}: ${message}${hint}`, reply.status, reason);
}

function call(target: KubeTarget, method: string, path: string, body?: unknown): Promise<Reply> {
  const url = new URL(path, target.server);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca: target.caPem,
        agent: false,
        timeout: target.timeoutMs ?? 15_000,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${target.token}`,
          'user-agent': 'kube-discovery-configure',
          ...(payload === undefined ? {} : {'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload))}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text ? JSON.parse(text) : {};
          } catch {
            // Redacted before it is cut: a token it echoed, cut in two, would no longer be known by its value.
            parsed = {message: redactedStart(text, 200)};
          }
          const record = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
          resolve({status: res.statusCode ?? 0, body: record});
        });
      },
    );
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${target.timeoutMs ?? 15_000} ms`), {code: 'ETIMEDOUT'})));
    req.on('error', (error: NodeJS.ErrnoException) => {
      reject(new KubeApiError(`cannot reach the Kubernetes API at ${url.origin}: ${error.code ?? ''} ${error.message}`.replace(/\s+/g, ' '), 0, error.code ?? 'Error', {cause: error}));
    });
    req.end(payload);
  });
}

/** Whether the token's identity may `verb` `resource` (a SelfSubjectAccessReview); throws when the API does not answer one. */
export async function canI(target: KubeTarget, verb: string, resource: string, group = ''): Promise<boolean> {
  const review = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {resourceAttributes: {verb, resource, group}},
  };
  const reply = await call(target, 'POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', review);
  expectOk(reply, `create a SelfSubjectAccessReview for ${verb} ${resource}`);
  const allowed = (reply.body['status'] as {allowed?: unknown} | undefined)?.allowed;
  if (typeof allowed !== 'boolean') throw new KubeApiError('SelfSubjectAccessReview answered without status.allowed', reply.status, 'InvalidResponse');
  return allowed;
}
