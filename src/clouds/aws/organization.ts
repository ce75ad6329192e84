/**
 * Walks an AWS organization from the management account (or a delegated administrator):
 * checks the organization id, then follows the OU tree from its roots, every page of every
 * list, and returns the ACTIVE member accounts the matcher's include/exclude select. Any
 * error or malformed page fails the whole walk: a partial account list would look like
 * accounts that left, and deregister their clusters.
 */
import {
  DescribeOrganizationCommand,
  ListAccountsForParentCommand,
  ListOrganizationalUnitsForParentCommand,
  ListRootsCommand,
  type OrganizationsClient,
} from '@aws-sdk/client-organizations';
import PQueue from 'p-queue';
import {pageTokenKey} from '../../core/page-token.ts';
import type {SourceFailure} from '../../core/types.ts';
import {awsFailure} from './errors.ts';
import {partitionOfArn, type AwsPartition} from './regions.ts';

/** The narrow client surface the walk needs; a real OrganizationsClient satisfies it. */
export type OrganizationsApi = Pick<OrganizationsClient, 'send'>;

/** Which organization and which of its OUs (an OU includes its child OUs). */
export interface OrganizationScope {
  readonly organizationId: string;
  /** `["*"]` or OU ids. */
  readonly include: readonly string[];
  readonly exclude: readonly string[];
}

/** One member account the walk selected. */
export interface OrganizationAccount {
  readonly id: string;
  readonly name: string;
  /** Parent chain from the root down to the account's own OU (root id first). */
  readonly path: readonly string[];
}

/** A successful walk. */
export interface OrganizationWalk {
  readonly organizationId: string;
  /** Partition of the organization's ARNs; member role ARNs are built in it. */
  readonly partition: AwsPartition;
  /** Selected ACTIVE accounts, sorted by id. */
  readonly accounts: readonly OrganizationAccount[];
  /** Accounts seen but not ACTIVE (suspended, pending closure ...), by id. */
  readonly inactive: number;
  /**
   * Selected accounts AWS has suspended, sorted: still members, their clusters still exist, but
   * nothing can list them. Their entries are kept (stale), unlike those of accounts being closed.
   */
  readonly suspended: readonly string[];
  /** API calls the walk made (for the bench and debug logs). */
  readonly calls: number;
}

/** The walk failed; `failure` is printable (no credentials) and says which call and why. */
export class OrganizationWalkError extends Error {
  override readonly name = 'OrganizationWalkError';
  readonly failure: SourceFailure;

  constructor(failure: SourceFailure, options?: {cause?: unknown}) {
    super(`${failure.operation}: ${failure.code}: ${failure.message}`, options);
    this.failure = failure;
  }
}

/** Options of `walkOrganization`. */
export interface WalkOptions {
  readonly signal?: AbortSignal;
  /** List calls in flight at once; Organizations allows only a few requests per second per account. */
  readonly concurrency?: number;
}

const ACCOUNT_ID = /^\d{12}$/;
/** Account states (`State`) and statuses (`Status`, older) Organizations documents. */
const ACCOUNT_STATES: ReadonlySet<string> = new Set(['PENDING_ACTIVATION', 'ACTIVE', 'SUSPENDED', 'PENDING_CLOSURE', 'CLOSED']);
const PARENT_ID = /^(?:r-[0-9a-z]{4,32}|ou-[0-9a-z]{4,32}-[a-z0-9]{8,32})$/;
/** Pages per list before it is given up as endless (20 accounts a page: 200,000 accounts under one parent). */
export const MAX_ORGANIZATION_PAGES = 10_000;

function malformed(operation: string, what: string): OrganizationWalkError {
  return new OrganizationWalkError({reason: 'invalid_response', code: 'InvalidResponse', operation, message: `${operation} returned ${what}`});
}

/** Walks the organization; throws OrganizationWalkError, never returns a partial list. */
export async function walkOrganization(client: OrganizationsApi, scope: OrganizationScope, options: WalkOptions = {}): Promise<OrganizationWalk> {
  const signal = options.signal;
  let calls = 0;
  // One untyped door for the five commands; each caller states the shape it validates.
  const untypedSend = client.send.bind(client) as unknown as (command: unknown, options: unknown) => Promise<unknown>;
  const send = async <T>(operation: string, command: unknown): Promise<T> => {
    calls++;
    try {
      return (await untypedSend(command, signal ? {abortSignal: signal} : {})) as T;
    } catch (error) {
      throw new OrganizationWalkError(awsFailure(error, operation), {cause: error});
    }
  };

  const described = await send<{Organization?: {Id?: unknown; MasterAccountArn?: unknown; Arn?: unknown}}>(
    'DescribeOrganization',
    new DescribeOrganizationCommand({}),
  );
  const org = described.Organization;
  if (typeof org?.Id !== 'string') throw malformed('DescribeOrganization', 'no organization id');
  if (org.Id !== scope.organizationId) {
    throw new OrganizationWalkError({
      reason: 'other',
      code: 'OrganizationMismatch',
      operation: 'DescribeOrganization',
      message: `the credentials belong to organization ${org.Id}, the matcher names ${scope.organizationId}; nothing under this matcher is changed`,
    });
  }
  const arn = typeof org.Arn === 'string' ? org.Arn : typeof org.MasterAccountArn === 'string' ? org.MasterAccountArn : '';
  const partition = partitionOfArn(arn) ?? 'aws';

  const queue = new PQueue({concurrency: options.concurrency ?? 4});
  const listAll = async <T>(operation: string, key: string, page: (token: string | undefined) => unknown): Promise<T[]> => {
    const items: T[] = [];
    const seen = new Set<string>();
    let token: string | undefined;
    let pages = 0;
    do {
      if (++pages > MAX_ORGANIZATION_PAGES) throw malformed(operation, `more than ${MAX_ORGANIZATION_PAGES} pages`);
      const out = await queue.add(() => send<Record<string, unknown>>(operation, page(token)));
      const list = out[key];
      // Malformed is not empty: a page without its list fails the walk.
      if (!Array.isArray(list)) throw malformed(operation, `a page without a ${key} list`);
      for (const item of list as T[]) items.push(item);
      const next = out['NextToken'];
      if (next !== undefined && next !== null && typeof next !== 'string') throw malformed(operation, 'a NextToken that is not a string');
      token = next || undefined;
      if (token !== undefined) {
        // Remembered by digest when long: fresh long tokens page after page must not pile up here.
        const key = pageTokenKey(token);
        if (seen.has(key)) throw malformed(operation, 'a repeated NextToken');
        seen.add(key);
      }
    } while (token !== undefined);
    return items;
  };

  const roots = await listAll<{Id?: unknown}>('ListRoots', 'Roots', (NextToken) => new ListRootsCommand({NextToken}));
  if (roots.length === 0) throw malformed('ListRoots', 'no root');
  const wildcard = scope.include.includes('*');
  const include = new Set(scope.include);
  const exclude = new Set(scope.exclude);
  const accounts = new Map<string, OrganizationAccount>();
  let inactive = 0;
  const suspended = new Set<string>();
  // Each parent is visited once: an OU listed twice (under its own child, or under two parents)
  // is no tree, and following it would walk for ever.
  const visited = new Set<string>();

  // Visits one parent: its accounts when it lies inside an included subtree, then its child OUs.
  const visit = async (parentId: string, path: readonly string[], included: boolean): Promise<void> => {
    if (visited.has(parentId)) throw malformed('ListOrganizationalUnitsForParent', `OU ${parentId} twice in the tree (under ${path.at(-2) ?? 'the root'} too)`);
    visited.add(parentId);
    const tasks: Promise<void>[] = [];
    if (included) {
      tasks.push(
        listAll<{Id?: unknown; Name?: unknown; Status?: unknown; State?: unknown}>('ListAccountsForParent', 'Accounts', (NextToken) =>
          new ListAccountsForParentCommand({ParentId: parentId, NextToken}),
        ).then((list) => {
          for (const account of list) {
            if (typeof account.Id !== 'string' || !ACCOUNT_ID.test(account.Id)) throw malformed('ListAccountsForParent', `an account without a 12-digit Id`);
            // `State` replaces the older `Status`; either says ACTIVE for a usable account. A record
            // with neither in a documented value cannot be judged: "not ACTIVE" would deregister its clusters.
            const state = ACCOUNT_STATES.has(account.State as string) ? account.State : ACCOUNT_STATES.has(account.Status as string) ? account.Status : undefined;
            if (state === undefined) throw malformed('ListAccountsForParent', `account ${account.Id} without a State or Status Organizations documents`);
            if (state !== 'ACTIVE') {
              inactive++;
              if (state === 'SUSPENDED') suspended.add(account.Id);
              continue;
            }
            accounts.set(account.Id, {id: account.Id, name: typeof account.Name === 'string' ? account.Name : '', path});
          }
        }),
      );
    }
    tasks.push(
      listAll<{Id?: unknown}>('ListOrganizationalUnitsForParent', 'OrganizationalUnits', (NextToken) =>
        new ListOrganizationalUnitsForParentCommand({ParentId: parentId, NextToken}),
      ).then(async (units) => {
        const children: Promise<void>[] = [];
        for (const unit of units) {
          if (typeof unit.Id !== 'string' || !PARENT_ID.test(unit.Id)) throw malformed('ListOrganizationalUnitsForParent', 'an OU without a valid Id');
          // An excluded OU is not walked at all: nothing below it is selected.
          if (exclude.has(unit.Id)) continue;
          children.push(visit(unit.Id, [...path, unit.Id], included || include.has(unit.Id)));
        }
        await Promise.all(children);
      }),
    );
    await Promise.all(tasks);
  };

  await Promise.all(
    roots.map((root) => {
      if (typeof root.Id !== 'string' || !PARENT_ID.test(root.Id)) throw malformed('ListRoots', 'a root without a valid Id');
      return visit(root.Id, [root.Id], wildcard);
    }),
  );
  return {
    organizationId: org.Id,
    partition,
    accounts: [...accounts.values()].sort((a, b) => a.id.localeCompare(b.id)),
    inactive,
    // Seen ACTIVE in another listing of this walk (a state change while it ran): listed as ACTIVE.
    suspended: [...suspended].filter((id) => !accounts.has(id)).sort(),
    calls,
  };
}
