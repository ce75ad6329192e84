/**
 * Walks Azure management groups: for each group of an `azure:` matcher's `management_groups`,
 * `GET .../managementGroups/{id}/descendants` to the last page (every nested group and
 * subscription below it, flat) and returns the subscription ids found, de-duplicated. Any error
 * or malformed record fails the whole walk: a partial list would look like subscriptions that
 * left the group, and deregister their clusters.
 */
import type {SourceFailure} from '../../core/types.ts';
import {azureFailure} from './errors.ts';

/**
 * Every page of a group's descendants as ARM's JSON, to the last page, checked as every list is
 * (arm-list.ts: a malformed page, a repeated nextLink or an endless list throws). The SDK's
 * pager parsed each page three times and mapped every record to a model, every cycle.
 */
export type DescendantPages = (group: string, signal: AbortSignal) => AsyncIterable<readonly Record<string, unknown>[]>;

/** The api-version of the descendants list: the one @azure/arm-managementgroups 2.0 sends. */
export const MANAGEMENT_GROUPS_API_VERSION = '2021-04-01';

/** A successful walk. */
export interface ManagementGroupWalk {
  /** Lower-cased subscription ids under the groups (at any depth), sorted. */
  readonly subscriptions: readonly string[];
  /** Nested groups seen below the named ones. */
  readonly nestedGroups: number;
  /** Pages read (for the bench and debug logs). */
  readonly pages: number;
}

/** The operation name failures and logs use. */
export const DESCENDANTS_OPERATION = 'ManagementGroups.GetDescendants';

/** The walk failed; `failure` names the group, the call and why (never credentials). */
export class ManagementGroupWalkError extends Error {
  override readonly name = 'ManagementGroupWalkError';
  readonly failure: SourceFailure;

  constructor(failure: SourceFailure, options?: {cause?: unknown}) {
    super(`${failure.operation}: ${failure.code}: ${failure.message}`, options);
    this.failure = failure;
  }
}

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const GROUP_TYPE = 'microsoft.management/managementgroups';
// ARM answers `/subscriptions`; the 2023-04-01 examples spell it as the nested resource type.
const SUBSCRIPTION_TYPES: ReadonlySet<string> = new Set(['/subscriptions', 'microsoft.management/managementgroups/subscriptions']);

function malformed(group: string, what: string): ManagementGroupWalkError {
  return new ManagementGroupWalkError({
    reason: 'invalid_response',
    code: 'InvalidResponse',
    operation: DESCENDANTS_OPERATION,
    message: `the descendants of management group ${group} held ${what}`,
  });
}

/** The subscription id of a descendant that is a subscription, undefined for a group; throws on anything it cannot judge. */
function subscriptionOf(group: string, item: unknown): string | undefined {
  if (typeof item !== 'object' || item === null) throw malformed(group, 'an item that is not an object');
  const {type, id, name} = item as {type?: unknown; id?: unknown; name?: unknown};
  const kind = typeof type === 'string' ? type.toLowerCase() : undefined;
  if (kind === GROUP_TYPE) return undefined;
  if (kind === undefined || !SUBSCRIPTION_TYPES.has(kind)) {
    // Neither a group nor a subscription: dropping it might drop a subscription, so it is not skipped.
    throw malformed(group, `an item of type ${JSON.stringify(type)?.slice(0, 60) ?? 'undefined'}, neither a management group nor a subscription`);
  }
  const subscription = typeof name === 'string' && GUID.test(name) ? name : typeof id === 'string' ? /\/subscriptions\/([^/]+)$/i.exec(id)?.[1] : undefined;
  if (subscription === undefined || !GUID.test(subscription)) throw malformed(group, 'a subscription without a subscription id');
  return subscription.toLowerCase();
}

/** Walks the groups (in parallel); throws ManagementGroupWalkError, never returns a partial list. */
export async function walkManagementGroups(pagesOf: DescendantPages, groups: readonly string[], options: {signal?: AbortSignal} = {}): Promise<ManagementGroupWalk> {
  const subscriptions = new Set<string>();
  let nestedGroups = 0;
  let pages = 0;
  await Promise.all(
    groups.map(async (group) => {
      try {
        for await (const page of pagesOf(group, options.signal ?? new AbortController().signal)) {
          pages++;
          for (const item of page) {
            const sub = subscriptionOf(group, item);
            if (sub === undefined) nestedGroups++;
            else subscriptions.add(sub);
          }
        }
      } catch (error) {
        if (error instanceof ManagementGroupWalkError) throw error;
        const failure = azureFailure(error, DESCENDANTS_OPERATION);
        throw new ManagementGroupWalkError({...failure, message: `management group ${group}: ${failure.message}`.slice(0, 300)}, {cause: error});
      }
    }),
  );
  return {subscriptions: [...subscriptions].sort(), nestedGroups, pages};
}

/**
 * The targets of a `management_groups` matcher: every subscription the walk found, with the
 * state and tenant the subscriptions list gave it. One the list showed in a state that cannot
 * be listed (Disabled, Deleted) is left out (the caller keeps a Disabled one's entries); one the
 * list did not show at all (the identity sees the group but holds no role on it) is kept, so its
 * AKS listing fails as that subscription's own source instead of its clusters being deregistered.
 */
export function scopeToManagementGroups<T extends {readonly subscriptionId: string}>(walk: ManagementGroupWalk, listable: readonly T[], listed: ReadonlySet<string>): (T | {subscriptionId: string})[] {
  const byId = new Map(listable.map((t) => [t.subscriptionId.toLowerCase(), t]));
  return walk.subscriptions.filter((id) => byId.has(id) || !listed.has(id)).map((id) => byId.get(id) ?? {subscriptionId: id});
}
