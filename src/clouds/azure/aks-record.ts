/**
 * Reads the fields discovery uses from one managed cluster of an ARM list page, as ARM sends it
 * (`properties.provisioningState`, `properties.aadProfile.enableAzureRBAC` ...), checking each
 * one's JSON type. A field of the wrong type makes the record malformed — its entry is kept,
 * stale — never "absent": a `tags` that is a string, or an `aadProfile` that is a number, must
 * not silently change how the cluster is labelled or signed in to.
 */
import type {MalformedCluster} from '../../core/types.ts';
import {isHttpsUrl} from '../../core/validate.ts';
import type {AksClusterRef} from '../../credentials/aks-local-accounts.ts';

/** What discovery reads of a managed cluster record; names as the SDK's model spells them. */
export interface AksRecord {
  /** Judged by the fetcher (name rules, resource id, location, states): raw as listed. */
  readonly id: unknown;
  readonly name: unknown;
  readonly location: unknown;
  readonly provisioningState: unknown;
  /** `properties.powerState.code`. */
  readonly powerState: unknown;
  readonly tags: Readonly<Record<string, string>>;
  readonly eTag?: string;
  /** `identity.tenantId`. */
  readonly identityTenantId?: string;
  readonly kubernetesVersion?: string;
  readonly currentKubernetesVersion?: string;
  readonly fqdn?: string;
  readonly privateFqdn?: string;
  readonly aadProfile?: {readonly managed?: boolean; readonly enableAzureRbac?: boolean; readonly tenantID?: string; readonly serverAppID?: string};
  readonly disableLocalAccounts?: boolean;
  /** `properties.oidcIssuerProfile.issuerURL` when it is an https URL (read leniently: it decides no existence). */
  readonly oidcIssuerURL?: string;
}

const CLUSTER_ID = /^\/subscriptions\/([^/]+)\/resourcegroups\/([^/]+)\/providers\/microsoft\.containerservice\/managedclusters\/([^/]+)$/i;

/** Subscription (lower case), resource group (as given) and name of a managed cluster resource id. */
export function parseClusterId(id: unknown): AksClusterRef | undefined {
  const m = typeof id === 'string' ? CLUSTER_ID.exec(id) : null;
  if (!m?.[1] || !m[2] || !m[3]) return undefined;
  return {subscriptionId: m[1].toLowerCase(), resourceGroup: decode(m[2]), name: decode(m[3])};
}

/** The name a malformed record is reported (and its entry kept) by: `name` when it is one, else the id's last segment. */
export function reportedName(name: unknown, id: unknown, valid: (name: string) => boolean): string {
  const listed = typeof name === 'string' ? name : '';
  return valid(listed) ? listed : (parseClusterId(id)?.name ?? (listed || '(unnamed)'));
}

/** A JSON value type as a message says it. */
function jsonType(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

type JsonObject = Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Thrown inside {@link readAksRecord} for a field of the wrong type; becomes the record's malformed reason. */
class WrongType extends Error {}

/** An optional field: absent or null is undefined, the wrong type throws WrongType. */
function optional(holder: JsonObject, key: string, path: string, type: 'string'): string | undefined;
function optional(holder: JsonObject, key: string, path: string, type: 'boolean'): boolean | undefined;
function optional(holder: JsonObject, key: string, path: string, type: 'string' | 'boolean'): string | boolean | undefined {
  const value = holder[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== type) throw new WrongType(`${path} is ${jsonType(value)}, not a ${type}`);
  return value as string | boolean;
}

function optionalObject(holder: JsonObject, key: string, path: string): JsonObject | undefined {
  const value = holder[key];
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw new WrongType(`${path} is ${jsonType(value)}, not an object`);
  return value;
}

/**
 * The record of one listed item (the page check made sure it is a JSON object), or why it is
 * malformed. `valid` is the fetcher's cluster name rule (for the name a malformed record is reported by).
 */
export function readAksRecord(item: JsonObject, sourceId: string, valid: (name: string) => boolean): AksRecord | MalformedCluster {
  try {
    const properties = optionalObject(item, 'properties', 'properties') ?? {};
    const power = optionalObject(properties, 'powerState', 'properties.powerState');
    const aad = optionalObject(properties, 'aadProfile', 'properties.aadProfile');
    const identity = optionalObject(item, 'identity', 'identity');
    const rawTags = optionalObject(item, 'tags', 'tags');
    const tags: Record<string, string> = {};
    // ARM tags map to strings: a value of another type is a malformed record, never a missing tag
    // (dropping it could un-match the cluster, or lose its name tag and rename it).
    if (rawTags) {
      for (const key in rawTags) {
        const value = rawTags[key];
        if (typeof value !== 'string') throw new WrongType(`tags.${key.slice(0, 60)} is ${jsonType(value)}, not a string`);
        // U+FFFD is what bytes that were not UTF-8 decode to: the tag is not the one ARM holds.
        if (key.includes('\uFFFD') || value.includes('\uFFFD')) throw new WrongType(`tags.${key.slice(0, 60)} holds bytes that are not UTF-8`);
        tags[key] = value;
      }
    }
    const record: Mutable<AksRecord> = {
      id: item['id'],
      name: item['name'],
      location: item['location'],
      provisioningState: properties['provisioningState'],
      powerState: power?.['code'],
      tags,
    };
    // Only the fields present are set: the record's shape is what the listing said.
    set(record, 'eTag', optional(item, 'eTag', 'eTag', 'string'));
    if (identity) set(record, 'identityTenantId', optional(identity, 'tenantId', 'identity.tenantId', 'string'));
    set(record, 'kubernetesVersion', optional(properties, 'kubernetesVersion', 'properties.kubernetesVersion', 'string'));
    set(record, 'currentKubernetesVersion', optional(properties, 'currentKubernetesVersion', 'properties.currentKubernetesVersion', 'string'));
    set(record, 'fqdn', optional(properties, 'fqdn', 'properties.fqdn', 'string'));
    set(record, 'privateFqdn', optional(properties, 'privateFQDN', 'properties.privateFQDN', 'string'));
    set(record, 'disableLocalAccounts', optional(properties, 'disableLocalAccounts', 'properties.disableLocalAccounts', 'boolean'));
    // Only the token review reads the issuer (to send a token to the cluster that issued it): an
    // unusable one is left out rather than making the record malformed.
    const issuerProfile = properties['oidcIssuerProfile'];
    const issuer = isObject(issuerProfile) ? issuerProfile['issuerURL'] : undefined;
    if (typeof issuer === 'string' && isHttpsUrl(issuer)) record.oidcIssuerURL = issuer;
    if (aad) {
      const profile: Mutable<NonNullable<AksRecord['aadProfile']>> = {};
      set(profile, 'managed', optional(aad, 'managed', 'properties.aadProfile.managed', 'boolean'));
      set(profile, 'enableAzureRbac', optional(aad, 'enableAzureRBAC', 'properties.aadProfile.enableAzureRBAC', 'boolean'));
      set(profile, 'tenantID', optional(aad, 'tenantID', 'properties.aadProfile.tenantID', 'string'));
      set(profile, 'serverAppID', optional(aad, 'serverAppID', 'properties.aadProfile.serverAppID', 'string'));
      record.aadProfile = profile;
    }
    return record;
  } catch (error) {
    if (!(error instanceof WrongType)) throw error;
    return {name: reportedName(item['name'], item['id'], valid), sourceId, reason: error.message};
  }
}

type Mutable<T> = {-readonly [K in keyof T]: T[K]};

function set<T extends object, K extends keyof T>(target: T, key: K, value: T[K] | undefined): void {
  if (value !== undefined) target[key] = value;
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
