/**
 * Page edges of the organization-wide lists, at the SDK command level (aws-sdk-client-mock):
 * an empty page that still carries a token is followed, a token that comes back fails the walk
 * instead of ending it short, a page without its list is malformed, an account changing state
 * while the walk runs is judged by its ACTIVE record, and an empty or refused region list is never
 * read as "no regions". Each case either finds everything or throws; none returns a short list.
 */
import {ListRegionsCommand, AccountClient} from '@aws-sdk/client-account';
import {
  DescribeOrganizationCommand,
  ListAccountsForParentCommand,
  ListOrganizationalUnitsForParentCommand,
  ListRootsCommand,
  OrganizationsClient,
  TooManyRequestsException,
} from '@aws-sdk/client-organizations';
import {mockClient} from 'aws-sdk-client-mock';
import {afterEach, describe, expect, it} from 'vitest';
import {listEnabledRegions} from '../../src/clouds/aws/account-regions.ts';
import {walkOrganization, type OrganizationWalk} from '../../src/clouds/aws/organization.ts';

const ORG = 'o-abcde12345';
const ROOT = 'r-ab12';
const OU = 'ou-ab12-11111111';
const credentials = {accessKeyId: 'AKIDPAGES', secretAccessKey: 'pages-secret'};

const organizations = mockClient(OrganizationsClient);
const account = mockClient(AccountClient);
afterEach(() => {
  organizations.reset();
  account.reset();
});

const active = (id: string) => ({Id: id, Name: `a-${id}`, State: 'ACTIVE' as const, Status: 'ACTIVE' as const});

/** One root, one OU under it; the OU's accounts come from `pages` (keyed by the NextToken asked with). */
function world(pages: Record<string, object>): void {
  organizations.on(DescribeOrganizationCommand).resolves({Organization: {Id: ORG, Arn: `arn:aws:organizations::111111111111:organization/${ORG}`}});
  organizations.on(ListRootsCommand).resolves({Roots: [{Id: ROOT}]});
  organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: ROOT}).resolves({OrganizationalUnits: [{Id: OU}]});
  organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: OU}).resolves({OrganizationalUnits: []});
  organizations.on(ListAccountsForParentCommand, {ParentId: ROOT}).resolves({Accounts: [active('111111111111')]});
  organizations.on(ListAccountsForParentCommand, {ParentId: OU}).callsFake((input: {NextToken?: string}) => pages[input.NextToken ?? ''] ?? {Accounts: []});
}

function walk(): Promise<OrganizationWalk> {
  return walkOrganization(new OrganizationsClient({region: 'us-east-1', credentials, maxAttempts: 1}), {organizationId: ORG, include: ['*'], exclude: []});
}

describe('organization walk pages', () => {
  it('follows an empty page that carries a NextToken to the accounts after it', async () => {
    world({'': {Accounts: [], NextToken: 't1'}, t1: {Accounts: [active('222222222222')], NextToken: 't2'}, t2: {Accounts: [active('333333333333')]}});
    expect((await walk()).accounts.map((a) => a.id)).toEqual(['111111111111', '222222222222', '333333333333']);
  });

  it('fails on a NextToken given twice instead of ending the list short', async () => {
    world({'': {Accounts: [active('222222222222')], NextToken: 't1'}, t1: {Accounts: [], NextToken: 't1'}});
    await expect(walk()).rejects.toMatchObject({failure: {reason: 'invalid_response', operation: 'ListAccountsForParent', message: expect.stringContaining('repeated NextToken') as unknown}});
  });

  it('fails on a page without its Accounts list (an empty 200 reads as one)', async () => {
    world({'': {Accounts: [active('222222222222')], NextToken: 't1'}, t1: {}});
    await expect(walk()).rejects.toMatchObject({failure: {reason: 'invalid_response', operation: 'ListAccountsForParent'}});
  });

  it('fails, throttled, when Organizations throttles past the retries', async () => {
    world({});
    organizations.on(ListAccountsForParentCommand, {ParentId: OU}).rejects(new TooManyRequestsException({message: 'slow down', $metadata: {httpStatusCode: 400}}));
    await expect(walk()).rejects.toMatchObject({failure: {reason: 'throttled', operation: 'ListAccountsForParent'}});
  });

  it('fails on an OU listed under its own child or under two parents (no tree) instead of walking it again', async () => {
    world({});
    organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: OU}).resolves({OrganizationalUnits: [{Id: OU}]});
    await expect(walk()).rejects.toMatchObject({failure: {reason: 'invalid_response', message: expect.stringContaining(`OU ${OU} twice`) as unknown}});
    const other = 'ou-ab12-22222222';
    organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: ROOT}).resolves({OrganizationalUnits: [{Id: OU}, {Id: other}]});
    organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: OU}).resolves({OrganizationalUnits: []});
    organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: other}).resolves({OrganizationalUnits: [{Id: OU}]});
    organizations.on(ListAccountsForParentCommand, {ParentId: other}).resolves({Accounts: []});
    await expect(walk()).rejects.toMatchObject({failure: {reason: 'invalid_response'}});
  });

  it('fails on a ListRoots answer without a root instead of walking nothing', async () => {
    world({});
    organizations.on(ListRootsCommand).resolves({Roots: []});
    await expect(walk()).rejects.toMatchObject({failure: {reason: 'invalid_response', operation: 'ListRoots'}});
  });

  it('walks every root of an answer with two, and an account listed under two OUs once', async () => {
    world({'': {Accounts: [active('222222222222'), active('111111111111')]}});
    const second = 'r-cd34';
    organizations.on(ListRootsCommand).resolves({Roots: [{Id: ROOT}, {Id: second}]});
    organizations.on(ListOrganizationalUnitsForParentCommand, {ParentId: second}).resolves({OrganizationalUnits: []});
    organizations.on(ListAccountsForParentCommand, {ParentId: second}).resolves({Accounts: [active('333333333333'), active('222222222222')]});
    expect((await walk()).accounts.map((a) => a.id)).toEqual(['111111111111', '222222222222', '333333333333']);
  });

  it('an account seen ACTIVE in one listing and SUSPENDED in another (changed while the walk ran) is ACTIVE', async () => {
    world({'': {Accounts: [active('222222222222')]}});
    organizations.on(ListAccountsForParentCommand, {ParentId: ROOT}).resolves({Accounts: [active('111111111111'), {Id: '222222222222', State: 'SUSPENDED' as const, Status: 'SUSPENDED' as const}]});
    const result = await walk();
    expect(result.accounts.map((a) => a.id)).toEqual(['111111111111', '222222222222']);
    expect(result.suspended).toEqual([]);
  });
});

describe('enabled regions of a member account', () => {
  const client = (): AccountClient => new AccountClient({region: 'us-east-1', credentials, maxAttempts: 1});

  it('follows an empty page with a NextToken', async () => {
    account.on(ListRegionsCommand).callsFake((input: {NextToken?: string}) =>
      input.NextToken === undefined ? {Regions: [], NextToken: 'r1'} : {Regions: [{RegionName: 'eu-west-1'}, {RegionName: 'us-east-1'}]});
    expect(await listEnabledRegions(client())).toEqual(['eu-west-1', 'us-east-1']);
  });

  it('throws on a later page that fails, or a NextToken given twice, instead of returning the first page alone', async () => {
    account.on(ListRegionsCommand).callsFake((input: {NextToken?: string}) => {
      if (input.NextToken === undefined) return {Regions: [{RegionName: 'us-east-1'}], NextToken: 'r1'};
      throw Object.assign(new Error('denied'), {name: 'AccessDeniedException', $metadata: {httpStatusCode: 403}});
    });
    await expect(listEnabledRegions(client())).rejects.toThrow(/denied/);
    account.on(ListRegionsCommand).callsFake((input: {NextToken?: string}) => ({Regions: input.NextToken ? [] : [{RegionName: 'us-east-1'}], NextToken: 'r1'}));
    await expect(listEnabledRegions(client())).rejects.toThrow(/repeated NextToken/);
  });

  it('throws on an answer with no region at all, or without its list, so the caller falls back to every region', async () => {
    account.on(ListRegionsCommand).resolves({Regions: []});
    await expect(listEnabledRegions(client())).rejects.toThrow(/no enabled region/);
    account.on(ListRegionsCommand).resolves({});
    await expect(listEnabledRegions(client())).rejects.toThrow(/without a Regions list/);
  });
});
