/**
 * Management groups of the fake ARM: a tree of groups with subscriptions placed in them, and
 * the answer of `GET /providers/Microsoft.Management/managementGroups/{id}/descendants` as ARM
 * gives it: every group and subscription below the group at any depth, one flat list, paged
 * through absolute `nextLink`s carrying `$skiptoken` (lower-case, as the management groups
 * service spells it), each item `{id, type, name, properties: {displayName, parent: {id}}}`.
 */

/** One management group; `parent` undefined = directly under the tenant root group. */
export interface FakeManagementGroup {
  readonly id: string;
  readonly displayName: string;
  readonly parent?: string;
}

/** One item of a descendants answer (before it is turned into JSON). */
export interface FakeDescendant {
  readonly kind: 'group' | 'subscription';
  /** Group id or subscription id. */
  readonly name: string;
  readonly displayName: string;
  /** The group it sits in. */
  readonly parent: string;
}

/** ARM resource id of a management group. */
export function managementGroupId(id: string): string {
  return `/providers/Microsoft.Management/managementGroups/${id}`;
}

/** The management group tree; ids compare case-insensitively, as in ARM. */
export class FakeManagementGroups {
  readonly #groups = new Map<string, FakeManagementGroup>();
  /** Lower-cased subscription id -> lower-cased group id. */
  readonly #placement = new Map<string, string>();
  /** Lower-cased subscription id -> as spelt when placed. */
  readonly #spelling = new Map<string, string>();

  /** Adds a group, under `parent` when given (which must exist). */
  add(id: string, options: {parent?: string; displayName?: string} = {}): FakeManagementGroup {
    if (options.parent !== undefined && !this.#groups.has(options.parent.toLowerCase())) {
      throw new Error(`FakeManagementGroups: expected parent group ${options.parent} to exist, found none`);
    }
    const group: FakeManagementGroup = {id, displayName: options.displayName ?? id, ...(options.parent === undefined ? {} : {parent: this.#groups.get(options.parent.toLowerCase())?.id ?? options.parent})};
    this.#groups.set(id.toLowerCase(), group);
    return group;
  }

  /** Whether the group exists. */
  has(id: string): boolean {
    return this.#groups.has(id.toLowerCase());
  }

  /** Moves a group under another one (or to the top). */
  moveGroup(id: string, parent: string | undefined): void {
    const group = this.#require(id);
    if (parent !== undefined) this.#require(parent);
    this.#groups.set(id.toLowerCase(), {id: group.id, displayName: group.displayName, ...(parent === undefined ? {} : {parent})});
  }

  /** Places a subscription in a group (moving it out of any other); undefined takes it out of every group. */
  placeSubscription(subscriptionId: string, groupId: string | undefined): void {
    const key = subscriptionId.toLowerCase();
    if (groupId === undefined) {
      this.#placement.delete(key);
      this.#spelling.delete(key);
      return;
    }
    this.#require(groupId);
    this.#placement.set(key, groupId.toLowerCase());
    this.#spelling.set(key, subscriptionId);
  }

  /** The group a subscription sits in, if any. */
  groupOf(subscriptionId: string): string | undefined {
    const key = this.#placement.get(subscriptionId.toLowerCase());
    return key === undefined ? undefined : this.#groups.get(key)?.id;
  }

  /** Every group and subscription below `id` at any depth, breadth first; undefined when the group does not exist. */
  descendants(id: string): FakeDescendant[] | undefined {
    const root = this.#groups.get(id.toLowerCase());
    if (root === undefined) return undefined;
    const out: FakeDescendant[] = [];
    const queue = [root];
    for (let group = queue.shift(); group !== undefined; group = queue.shift()) {
      for (const [sub, where] of this.#placement) {
        if (where === group.id.toLowerCase()) {
          const name = this.#spelling.get(sub) ?? sub;
          out.push({kind: 'subscription', name, displayName: `subscription ${name.slice(0, 8)}`, parent: group.id});
        }
      }
      for (const child of this.#groups.values()) {
        if (child.parent?.toLowerCase() === group.id.toLowerCase()) {
          out.push({kind: 'group', name: child.id, displayName: child.displayName, parent: group.id});
          queue.push(child);
        }
      }
    }
    return out;
  }

  #require(id: string): FakeManagementGroup {
    const group = this.#groups.get(id.toLowerCase());
    if (group === undefined) throw new Error(`FakeManagementGroups: expected group ${id} to exist, found none`);
    return group;
  }
}

/** A descendant as the descendants API spells it (`type: "/subscriptions"` for a subscription, as ARM answers today). */
export function descendantJson(d: FakeDescendant): Record<string, unknown> {
  return {
    id: d.kind === 'group' ? managementGroupId(d.name) : `/subscriptions/${d.name}`,
    type: d.kind === 'group' ? 'Microsoft.Management/managementGroups' : '/subscriptions',
    name: d.name,
    properties: {displayName: d.displayName, parent: {id: managementGroupId(d.parent)}},
  };
}

/** One page of descendants, or undefined when `$skiptoken` is not one this fake issued. */
export function descendantsPage(items: readonly FakeDescendant[], url: URL, pageSize: number, baseUrl: string, apiVersion: string): Record<string, unknown> | undefined {
  const token = url.searchParams.get('$skiptoken');
  let offset = 0;
  if (token !== null) {
    const m = /^mg-(\d+)$/.exec(token);
    if (m?.[1] === undefined) return undefined;
    offset = Number(m[1]);
  }
  const body: Record<string, unknown> = {value: items.slice(offset, offset + pageSize).map(descendantJson)};
  body['nextLink'] = offset + pageSize < items.length ? `${baseUrl}${url.pathname}?api-version=${apiVersion}&$skiptoken=mg-${offset + pageSize}` : null;
  return body;
}
