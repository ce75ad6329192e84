/** How a list remembers the page tokens it has followed, to spot one that comes back. */
import {createHash} from 'node:crypto';

/**
 * The key a followed page token is remembered by: itself when short, else its SHA-256. A list that
 * pages for ever with fresh long tokens (an ARM nextLink may be 32 MiB) must not hold them all.
 */
export function pageTokenKey(token: string): string {
  return token.length > 256 ? createHash('sha256').update(token).digest('base64') : token;
}
