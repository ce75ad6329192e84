/**
 * AWS Organizations for the AWS fake: a mutable organization (roots, nested OUs, accounts with
 * a status) and the JSON-1.1 API the real @aws-sdk/client-organizations speaks (`POST /`,
 * `X-Amz-Target: AWSOrganizationsV20161128.<Operation>`, errors as `{"__type", "Message"}`).
 * Only the management account (or a delegated administrator) may list; every list pages.
 *
 *   const org = new FakeOrganization({managementAccount: '111111111111'});
 *   const prod = org.addUnit('prod');                 // under the root
 *   org.addAccount('222222222222', {parent: prod});
 *   world.organization = org;
 */
import {createHash} from 'node:crypto';
import {type ApiResponse, type AwsApi, AwsApiError, type BoundOperation, type CallContext, JSON_API_AUTH_ERROR_CODES, jsonInput} from './aws-api.ts';
import type {WireRequest} from './aws-sigv4.ts';

/** Member account states as Organizations reports them. */
export type FakeAccountStatus = 'ACTIVE' | 'SUSPENDED' | 'PENDING_CLOSURE';

interface Unit {
  readonly id: string;
  readonly name: string;
  parent: string;
}

interface Member {
  readonly id: string;
  readonly name: string;
  parent: string;
  status: FakeAccountStatus;
  readonly joinedAt: number;
}

function hashed(text: string, length: number): string {
  return createHash('sha256').update(text).digest('hex').slice(0, length);
}

/** One organization; ids are derived from the management account so runs are reproducible. */
export class FakeOrganization {
  readonly id: string;
  readonly rootId: string;
  readonly managementAccount: string;
  readonly partition: string;
  /** Accounts registered as delegated administrators: they may list like the management account. */
  readonly delegatedAdministrators = new Set<string>();
  readonly #units = new Map<string, Unit>();
  readonly #members = new Map<string, Member>();

  constructor(init: {managementAccount: string; id?: string; partition?: string}) {
    this.managementAccount = init.managementAccount;
    this.partition = init.partition ?? 'aws';
    this.id = init.id ?? `o-${hashed(`org/${init.managementAccount}`, 10)}`;
    this.rootId = `r-${hashed(`root/${this.id}`, 4)}`;
    this.addAccount(init.managementAccount, {name: 'management'});
  }

  /** Adds an OU under `parent` (default the root) and returns its id (`ou-<root>-<8>`). */
  addUnit(name: string, parent: string = this.rootId): string {
    this.#parent(parent);
    const id = `ou-${this.rootId.slice(2)}-${hashed(`ou/${this.id}/${parent}/${name}/${this.#units.size}`, 8)}`;
    this.#units.set(id, {id, name, parent});
    return id;
  }

  /** Adds (invites) an account into `parent` (default the root). */
  addAccount(id: string, init: {parent?: string; name?: string; status?: FakeAccountStatus} = {}): void {
    if (!/^\d{12}$/.test(id)) throw new Error(`expected a 12-digit account id, got ${JSON.stringify(id)}`);
    const parent = init.parent ?? this.rootId;
    this.#parent(parent);
    this.#members.set(id, {id, name: init.name ?? `account-${id}`, parent, status: init.status ?? 'ACTIVE', joinedAt: Date.UTC(2024, 0, 1)});
  }

  /** Moves an account to another parent. */
  moveAccount(id: string, parent: string): void {
    this.#parent(parent);
    this.#member(id).parent = parent;
  }

  /** Sets an account's status (SUSPENDED accounts are listed but not usable). */
  setStatus(id: string, status: FakeAccountStatus): void {
    this.#member(id).status = status;
  }

  /** Removes an account from the organization (it left); returns whether it was a member. */
  removeAccount(id: string): boolean {
    return this.#members.delete(id);
  }

  /** Whether an account is a member. */
  has(id: string): boolean {
    return this.#members.has(id);
  }

  /** Child OUs of a parent, in creation order. */
  unitsOf(parent: string): {Id: string; Arn: string; Name: string}[] {
    this.#parent(parent);
    return [...this.#units.values()]
      .filter((u) => u.parent === parent)
      .map((u) => ({Id: u.id, Arn: `arn:${this.partition}:organizations::${this.managementAccount}:ou/${this.id}/${u.id}`, Name: u.name}));
  }

  /** Accounts directly under a parent, by id. */
  accountsOf(parent: string): Member[] {
    this.#parent(parent);
    return [...this.#members.values()].filter((m) => m.parent === parent).sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Whether `account` may call the List operations. */
  mayList(account: string): boolean {
    return account === this.managementAccount || this.delegatedAdministrators.has(account);
  }

  #parent(id: string): void {
    if (id !== this.rootId && !this.#units.has(id)) throw new AwsApiError('ParentNotFoundException', `parent ${id} does not exist`, {status: 400});
  }

  #member(id: string): Member {
    const member = this.#members.get(id);
    if (!member) throw new Error(`account ${id} is not in organization ${this.id}`);
    return member;
  }
}

const JSON_TYPE = 'application/x-amz-json-1.1';
const TARGET_PREFIX = 'AWSOrganizationsV20161128.';

function ok(body: unknown): ApiResponse {
  return {status: 200, contentType: JSON_TYPE, body: JSON.stringify(body)};
}

/** The organization the caller belongs to; AWSOrganizationsNotInUseException otherwise. */
function orgOf(ctx: CallContext): FakeOrganization {
  const org = ctx.world.organization;
  if (!org?.has(ctx.caller.account)) {
    throw new AwsApiError('AWSOrganizationsNotInUseException', 'Your account is not a member of an organization.', {status: 400});
  }
  return org;
}

function listingOrg(ctx: CallContext): FakeOrganization {
  const org = orgOf(ctx);
  if (!org.mayList(ctx.caller.account)) {
    throw new AwsApiError('AccessDeniedException', 'You don\'t have permissions to access this resource.', {status: 400});
  }
  return org;
}

/** One page of `items` from the opaque token (an offset) of the request. */
function page<T>(items: readonly T[], input: Record<string, unknown>, ctx: CallContext, key: string, scope: string): ApiResponse {
  const max = typeof input['MaxResults'] === 'number' ? Math.min(input['MaxResults'], ctx.pageSize) : ctx.pageSize;
  const token = input['NextToken'];
  let start = 0;
  if (token !== undefined && token !== null) {
    const m = typeof token === 'string' ? new RegExp(`^${scope}:(\\d+)$`).exec(Buffer.from(token, 'base64url').toString('utf8')) : null;
    if (!m?.[1]) throw new AwsApiError('InvalidInputException', 'The NextToken is not valid.', {status: 400});
    start = Number(m[1]);
  }
  const end = start + max;
  return ok({[key]: items.slice(start, end), ...(end < items.length ? {NextToken: Buffer.from(`${scope}:${end}`).toString('base64url')} : {})});
}

function parentId(input: Record<string, unknown>): string {
  const id = input['ParentId'];
  if (typeof id !== 'string') throw new AwsApiError('InvalidInputException', 'ParentId is required.', {status: 400});
  return id;
}

const OPERATIONS: Readonly<Record<string, (input: Record<string, unknown>, ctx: CallContext) => ApiResponse>> = {
  DescribeOrganization(_input, ctx) {
    const org = orgOf(ctx);
    return ok({
      Organization: {
        Id: org.id,
        Arn: `arn:${org.partition}:organizations::${org.managementAccount}:organization/${org.id}`,
        FeatureSet: 'ALL',
        MasterAccountArn: `arn:${org.partition}:organizations::${org.managementAccount}:account/${org.id}/${org.managementAccount}`,
        MasterAccountId: org.managementAccount,
        MasterAccountEmail: `admin+${org.managementAccount}@example.com`,
      },
    });
  },
  ListRoots(input, ctx) {
    const org = listingOrg(ctx);
    const roots = [{Id: org.rootId, Arn: `arn:${org.partition}:organizations::${org.managementAccount}:root/${org.id}/${org.rootId}`, Name: 'Root', PolicyTypes: []}];
    return page(roots, input, ctx, 'Roots', 'roots');
  },
  ListOrganizationalUnitsForParent(input, ctx) {
    const org = listingOrg(ctx);
    const parent = parentId(input);
    return page(org.unitsOf(parent), input, ctx, 'OrganizationalUnits', `ous/${parent}`);
  },
  ListAccountsForParent(input, ctx) {
    const org = listingOrg(ctx);
    const parent = parentId(input);
    const accounts = org.accountsOf(parent).map((m) => ({
      Id: m.id,
      Arn: `arn:${org.partition}:organizations::${org.managementAccount}:account/${org.id}/${m.id}`,
      Email: `aws+${m.id}@example.com`,
      Name: m.name,
      Status: m.status === 'ACTIVE' ? 'ACTIVE' : m.status === 'SUSPENDED' ? 'SUSPENDED' : 'PENDING_CLOSURE',
      State: m.status,
      JoinedMethod: 'INVITED',
      JoinedTimestamp: m.joinedAt / 1000,
    }));
    return page(accounts, input, ctx, 'Accounts', `accounts/${parent}`);
  },
};

function route(req: WireRequest): BoundOperation {
  const target = req.headers['x-amz-target'];
  const name = typeof target === 'string' && target.startsWith(TARGET_PREFIX) ? target.slice(TARGET_PREFIX.length) : '';
  const run = OPERATIONS[name];
  if (req.method !== 'POST' || req.rawPath !== '/' || !run) {
    throw new AwsApiError('UnknownOperationException', `The fake Organizations does not serve ${req.method} ${req.rawPath} ${String(target)}`, {status: 400});
  }
  const input = jsonInput(req.body, 'SerializationException');
  return {
    name,
    run: (ctx) => run(input, ctx),
    malformed: (kind) => ({status: 200, contentType: JSON_TYPE, body: kind === 'invalid-json' ? '{"Accounts": [' : '{}'}),
  };
}

/** The fake Organizations API. */
export const organizationsApi: AwsApi = {
  service: 'organizations',
  route,
  errorResponse(error) {
    return {status: error.status, contentType: JSON_TYPE, body: JSON.stringify({__type: error.code, Message: error.message})};
  },
  authErrorCodes: JSON_API_AUTH_ERROR_CODES,
};
