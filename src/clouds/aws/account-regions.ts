/**
 * The regions a member account has enabled (`account:ListRegions`, Account Management API), for
 * organization matchers with `regions: ["*"]`: opt-in regions differ by account, and listing EKS
 * in regions an account never enabled is wasted calls. Resolved with the member role, cached per
 * account and refreshed periodically; when the answer cannot be had (no permission, error,
 * malformed page) the caller falls back to every region of the partition, where "not enabled"
 * answers are skipped quietly.
 */
import {ListRegionsCommand, type AccountClient} from '@aws-sdk/client-account';
import {pageTokenKey} from '../../core/page-token.ts';

/** The narrow client surface needed; a real AccountClient satisfies it. */
export type AccountApi = Pick<AccountClient, 'send'>;

const REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;

/** Every enabled region of the calling account, every page; throws on an error or a malformed page. */
export async function listEnabledRegions(client: AccountApi, signal?: AbortSignal): Promise<string[]> {
  const regions: string[] = [];
  const seen = new Set<string>();
  let token: string | undefined;
  do {
    const page = await client.send(
      new ListRegionsCommand({MaxResults: 50, NextToken: token, RegionOptStatusContains: ['ENABLED', 'ENABLED_BY_DEFAULT']}),
      signal ? {abortSignal: signal} : {},
    );
    // Malformed is not empty: an answer without its list must not mean "no regions".
    if (!Array.isArray(page.Regions)) throw Object.assign(new Error('ListRegions returned a page without a Regions list'), {name: 'InvalidResponse'});
    for (const region of page.Regions) {
      if (typeof region.RegionName !== 'string' || !REGION.test(region.RegionName)) {
        throw Object.assign(new Error('ListRegions returned a region without a valid name'), {name: 'InvalidResponse'});
      }
      regions.push(region.RegionName);
    }
    token = page.NextToken ?? undefined;
    if (token !== undefined) {
      // Remembered by digest when long: fresh long tokens page after page must not pile up here.
      const key = pageTokenKey(token);
      if (seen.has(key)) throw Object.assign(new Error('ListRegions returned a repeated NextToken'), {name: 'InvalidResponse'});
      seen.add(key);
    }
  } while (token !== undefined);
  if (regions.length === 0) throw Object.assign(new Error('ListRegions returned no enabled region'), {name: 'InvalidResponse'});
  return [...new Set(regions)].sort();
}
