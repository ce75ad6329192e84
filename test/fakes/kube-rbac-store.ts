/**
 * In-memory ClusterRoles and ClusterRoleBindings with the create / get / list / update /
 * delete semantics of kube-apiserver (AlreadyExists, NotFound, resourceVersion conflicts,
 * immutable roleRef), so `configure --apply` meets the answers a real cluster gives.
 */
import {randomUUID} from 'node:crypto';
import type {KubeStatusDetails} from './kube-status.ts';
import {failureStatus, successStatus} from './kube-status.ts';

/** The cluster-scoped RBAC resources the fake stores. */
export type RbacResource = 'clusterroles' | 'clusterrolebindings';

/** A stored object: metadata is filled in by the store. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly uid: string;
    readonly resourceVersion: string;
    readonly creationTimestamp: string;
    readonly [key: string]: unknown;
  };
  readonly [key: string]: unknown;
}

/** An HTTP answer of the store. */
export interface StoreAnswer {
  readonly status: number;
  readonly body: unknown;
}

/** The RBAC API group served by the store. */
export const RBAC_GROUP = 'rbac.authorization.k8s.io';
const API_VERSION = `${RBAC_GROUP}/v1`;
const kinds: Readonly<Record<RbacResource, string>> = {clusterroles: 'ClusterRole', clusterrolebindings: 'ClusterRoleBinding'};

/** ClusterRoles and ClusterRoleBindings of one fake cluster. */
export class KubeRbacStore {
  #resourceVersion = 1000;
  readonly #objects: Record<RbacResource, Map<string, KubeObject>> = {clusterroles: new Map(), clusterrolebindings: new Map()};

  /** The stored object, for assertions. */
  get(resource: RbacResource, name: string): KubeObject | undefined {
    return this.#objects[resource].get(name);
  }

  /** All stored objects of a resource, sorted by name like the API server lists them. */
  list(resource: RbacResource): KubeObject[] {
    return [...this.#objects[resource].values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  }

  /** `GET .../{resource}`. */
  handleList(resource: RbacResource): StoreAnswer {
    // Items of a typed list carry no kind/apiVersion on the wire.
    const items = this.list(resource).map(({apiVersion: _a, kind: _k, ...rest}) => rest);
    return {status: 200, body: {kind: `${kinds[resource]}List`, apiVersion: API_VERSION, metadata: {resourceVersion: String(this.#resourceVersion)}, items}};
  }

  /** `GET .../{resource}/{name}`. */
  handleGet(resource: RbacResource, name: string): StoreAnswer {
    const obj = this.#objects[resource].get(name);
    return obj === undefined ? notFound(resource, name) : {status: 200, body: obj};
  }

  /** `POST .../{resource}`. */
  handleCreate(resource: RbacResource, body: unknown, dryRun: boolean): StoreAnswer {
    const invalid = validate(resource, body);
    if (invalid !== undefined) return invalid;
    const input = body as Record<string, unknown> & {metadata: Record<string, unknown> & {name: string}};
    const name = input.metadata.name;
    if (this.#objects[resource].has(name)) {
      return {status: 409, body: failureStatus(409, 'AlreadyExists', `${resource}.${RBAC_GROUP} "${name}" already exists`, details(resource, name))};
    }
    const obj = this.#build(resource, input, {uid: randomUUID(), creationTimestamp: timestamp()}, dryRun);
    if (!dryRun) this.#objects[resource].set(name, obj);
    return {status: 201, body: obj};
  }

  /** `PUT .../{resource}/{name}`: updates, or creates when missing (RBAC allows create-on-update). */
  handleUpdate(resource: RbacResource, name: string, body: unknown, dryRun: boolean): StoreAnswer {
    const invalid = validate(resource, body);
    if (invalid !== undefined) return invalid;
    const input = body as Record<string, unknown> & {metadata: Record<string, unknown> & {name: string}};
    if (input.metadata.name !== name) {
      return {status: 400, body: failureStatus(400, 'BadRequest', `the name of the object (${input.metadata.name}) does not match the name on the URL (${name})`)};
    }
    const current = this.#objects[resource].get(name);
    if (current === undefined) {
      const obj = this.#build(resource, input, {uid: randomUUID(), creationTimestamp: timestamp()}, dryRun);
      if (!dryRun) this.#objects[resource].set(name, obj);
      return {status: 201, body: obj};
    }
    const rv = input.metadata['resourceVersion'];
    if (rv !== undefined && rv !== '' && rv !== current.metadata.resourceVersion) {
      return {status: 409, body: failureStatus(409, 'Conflict',
        `Operation cannot be fulfilled on ${resource}.${RBAC_GROUP} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        details(resource, name))};
    }
    if (resource === 'clusterrolebindings' && JSON.stringify(input['roleRef']) !== JSON.stringify(current['roleRef'])) {
      return invalidStatus(resource, name, 'roleRef', 'Invalid value: cannot change roleRef');
    }
    const obj = this.#build(resource, input, {uid: current.metadata.uid, creationTimestamp: current.metadata.creationTimestamp}, dryRun);
    if (!dryRun) this.#objects[resource].set(name, obj);
    return {status: 200, body: obj};
  }

  /** `DELETE .../{resource}/{name}`. */
  handleDelete(resource: RbacResource, name: string, dryRun: boolean): StoreAnswer {
    const current = this.#objects[resource].get(name);
    if (current === undefined) return notFound(resource, name);
    if (!dryRun) this.#objects[resource].delete(name);
    return {status: 200, body: successStatus({...details(resource, name), uid: current.metadata.uid})};
  }

  #build(resource: RbacResource, input: Record<string, unknown> & {metadata: Record<string, unknown> & {name: string}},
    identity: {uid: string; creationTimestamp: string}, dryRun: boolean): KubeObject {
    if (!dryRun) this.#resourceVersion += 1;
    const {apiVersion: _a, kind: _k, metadata, ...rest} = input;
    return {
      apiVersion: API_VERSION,
      kind: kinds[resource],
      metadata: {...metadata, ...identity, name: metadata.name, resourceVersion: String(this.#resourceVersion)},
      ...rest,
    };
  }
}

function validate(resource: RbacResource, body: unknown): StoreAnswer | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return {status: 400, body: failureStatus(400, 'BadRequest', 'the body of the request was in an unknown format - accepted media types include: application/json')};
  }
  const obj = body as Record<string, unknown>;
  if (obj['kind'] !== undefined && obj['kind'] !== kinds[resource]) {
    return {status: 400, body: failureStatus(400, 'BadRequest', `the kind in the data (${String(obj['kind'])}) does not match the expected kind (${kinds[resource]})`)};
  }
  if (obj['apiVersion'] !== undefined && obj['apiVersion'] !== API_VERSION) {
    return {status: 400, body: failureStatus(400, 'BadRequest', `the API version in the data (${String(obj['apiVersion'])}) does not match the expected API version (${API_VERSION})`)};
  }
  const metadata = obj['metadata'];
  const name = typeof metadata === 'object' && metadata !== null ? (metadata as Record<string, unknown>)['name'] : undefined;
  if (typeof name !== 'string' || name === '') {
    return invalidStatus(resource, '', 'metadata.name', 'Required value: name or generateName is required');
  }
  if (resource === 'clusterrolebindings') {
    const ref = obj['roleRef'] as Record<string, unknown> | undefined;
    if (typeof ref?.['kind'] !== 'string' || typeof ref['name'] !== 'string' || ref['apiGroup'] !== RBAC_GROUP) {
      return invalidStatus(resource, name, 'roleRef', `Required value: roleRef needs kind, name and apiGroup "${RBAC_GROUP}"`);
    }
  }
  return undefined;
}

function invalidStatus(resource: RbacResource, name: string, field: string, message: string): StoreAnswer {
  const reason = message.startsWith('Required') ? 'FieldValueRequired' : 'FieldValueInvalid';
  return {status: 422, body: failureStatus(422, 'Invalid', `${kinds[resource]}.${RBAC_GROUP} "${name}" is invalid: ${field}: ${message}`,
    {...details(resource, name), kind: kinds[resource], causes: [{reason, message, field}]})};
}

function notFound(resource: RbacResource, name: string): StoreAnswer {
  return {status: 404, body: failureStatus(404, 'NotFound', `${resource}.${RBAC_GROUP} "${name}" not found`, details(resource, name))};
}

function details(resource: RbacResource, name: string): KubeStatusDetails {
  return {name, group: RBAC_GROUP, kind: resource};
}

/** RFC 3339 without fractions, as Kubernetes writes creationTimestamp. */
function timestamp(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}
