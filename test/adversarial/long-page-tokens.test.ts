/**
 * Bounded memory: a list that pages for ever with fresh, long page tokens. Each list remembers the
 * tokens it has followed, to spot one that comes back; an ARM list kept every `nextLink` whole (an
 * ARM answer may be 32 MiB), Organizations every `NextToken` (its documented maximum is 100,000
 * characters, and a hostile endpoint's is the 8 MiB answer cap), the Account API every region
 * list token. An endpoint or proxy answering page after page with a new megabyte token grew the
 * heap by a megabyte a page until the process was killed — its heartbeats with it — long before
 * the 10,000-page bound. Long tokens are remembered as digests, as EKS `ListClusters` and the tag
 * read already did: the heap held while such a list runs stays flat.
 */
import {randomBytes} from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import {describe, expect, it} from 'vitest';
import {armListPages, type ArmGet} from '../../src/clouds/azure/arm-list.ts';
import {listEnabledRegions, type AccountApi} from '../../src/clouds/aws/account-regions.ts';
import {walkOrganization, type OrganizationsApi} from '../../src/clouds/aws/organization.ts';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Live heap in MiB after full collections. */
function liveHeapMb(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

const PAGES = 150;
/**
 * A fresh token of 1 MiB (distinct bytes each time, so nothing is shared between pages), on the V8
 * heap as a parsed answer's strings are (a buffer's `toString` of that size is an external string).
 */
const longToken = (): string => JSON.parse(`"${randomBytes(2 ** 19).toString('hex')}"`) as string;
/** Live heap growth allowed while the list runs: far below the 150 MiB the tokens themselves would hold. */
const FLAT_MB = 48;

describe('a list paging with fresh megabyte tokens', () => {
  it('ARM (managedClusters, subscriptions, management groups): nextLinks are not held whole', async () => {
    const base = 'https://arm.example/subscriptions/00000000-0000-0000-0000-0000000000aa/providers/Microsoft.ContainerService/managedClusters?api-version=2024-01-01';
    const get: ArmGet = async (url) => {
      const body = JSON.stringify({value: [], nextLink: `${base}&$skiptoken=${longToken()}`});
      return {status: 200, bodyAsText: body, headers: new Map(), request: {url}} as never;
    };
    const before = liveHeapMb();
    let pages = 0;
    let grown = 0;
    for await (const _page of armListPages('managedClusters.list', get, base, new AbortController().signal, '2024-01-01')) {
      if (++pages === PAGES) {
        grown = liveHeapMb() - before;
        break;
      }
    }
    expect(pages).toBe(PAGES);
    expect(grown).toBeLessThan(FLAT_MB);
  });

  it('Organizations: NextTokens are not held whole', async () => {
    let calls = 0;
    let grown = 0;
    let before = 0;
    const client: OrganizationsApi = {
      send: (async (command: {constructor: {name: string}}) => {
        const name = command.constructor.name;
        if (name === 'DescribeOrganizationCommand') return {Organization: {Id: 'o-abcde12345', Arn: 'arn:aws:organizations::111111111111:organization/o-abcde12345'}};
        if (name === 'ListRootsCommand') return {Roots: [{Id: 'r-ab12'}]};
        if (name === 'ListOrganizationalUnitsForParentCommand') return {OrganizationalUnits: []};
        // ListAccountsForParent: a fresh megabyte token every page.
        if (++calls === 1) before = liveHeapMb();
        if (calls === PAGES) {
          grown = liveHeapMb() - before;
          throw Object.assign(new Error('enough'), {name: 'ServiceException'});
        }
        return {Accounts: [], NextToken: longToken()};
      }) as never,
    };
    await expect(walkOrganization(client, {organizationId: 'o-abcde12345', include: ['*'], exclude: []}, {concurrency: 1})).rejects.toThrow();
    expect(calls).toBe(PAGES);
    expect(grown).toBeLessThan(FLAT_MB);
  });

  it('Account ListRegions: tokens are not held whole', async () => {
    let calls = 0;
    let grown = 0;
    let before = 0;
    const client: AccountApi = {
      send: (async () => {
        if (++calls === 1) before = liveHeapMb();
        if (calls === PAGES) {
          grown = liveHeapMb() - before;
          throw Object.assign(new Error('enough'), {name: 'ServiceException'});
        }
        return {Regions: [{RegionName: 'us-east-1'}], NextToken: longToken()};
      }) as never,
    };
    await expect(listEnabledRegions(client)).rejects.toThrow('enough');
    expect(calls).toBe(PAGES);
    expect(grown).toBeLessThan(FLAT_MB);
  });
});
