/**
 * Who may call /v1/*: bearer tokens listed in a file (compared in constant time), and, in
 * Kubernetes, service-account tokens checked with a TokenReview and limited to an
 * allow-list of `namespace:serviceaccount` (the RFD on Kubernetes joining).
 */
import {createHash, timingSafeEqual} from 'node:crypto';
import {readFile, stat} from 'node:fs/promises';
import type {Clock} from '../core/clock.ts';
import {registerSecret} from '../observability/redact.ts';
import {postTokenReview} from './token-review-call.ts';

/** Decides whether a request's Authorization header is allowed. */
export type Authenticator = (authorization: string | undefined) => Promise<boolean>;

/** Reviews a service-account token; resolves to `namespace:serviceaccount` when authenticated. */
export type TokenReviewer = (token: string) => Promise<string | undefined>;

/** Options of createAuthenticator. */
export interface AuthOptions {
  readonly tokenFile?: string;
  readonly allowedServiceAccounts?: readonly string[];
  readonly tokenReview?: TokenReviewer;
  /** Reviews tokens of discovered clusters (`cluster/namespace:serviceaccount` entries); resolves to an identity only when allowed. */
  readonly clusterTokenReview?: TokenReviewer;
  readonly clock: Clock;
  /** How long a TokenReview verdict is reused. */
  readonly reviewCacheMs?: number;
  /**
   * The token file became unreadable (error) or readable again (undefined): called once per
   * change, for one log line. Meanwhile file tokens are refused (401), never a 500.
   */
  readonly onTokenFileChange?: (error: Error | undefined) => void;
}

/** Reads the bearer tokens of a token file (one per line, `#` comments) and registers them for redaction. */
export async function readTokenFile(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8');
  const tokens = text.split('\n').map((t) => t.trim()).filter((t) => t !== '' && !t.startsWith('#'));
  for (const token of tokens) registerSecret(token);
  return tokens;
}

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Builds the authenticator; `undefined` when no auth is configured (the API is then open, on loopback by default). */
export function createAuthenticator(options: AuthOptions): Authenticator | undefined {
  if (!options.tokenFile && !options.allowedServiceAccounts?.length) return undefined;
  let cached: {mtimeMs: number; digests: Buffer[]} | undefined;
  const reviews = new Map<string, {allowed: boolean; until: number}>();

  let failing = false;

  async function fileTokens(): Promise<Buffer[]> {
    if (!options.tokenFile) return [];
    try {
      const info = await stat(options.tokenFile);
      // Re-read when the file changes, so tokens rotate without a restart.
      if (!cached || cached.mtimeMs !== info.mtimeMs) {
        cached = {mtimeMs: info.mtimeMs, digests: (await readTokenFile(options.tokenFile)).map(digest)};
      }
      if (failing) {
        failing = false;
        options.onTokenFileChange?.(undefined);
      }
      return cached.digests;
    } catch (error) {
      // A vanished file allows nobody (401) rather than failing every request (500); said once.
      cached = undefined;
      if (!failing) {
        failing = true;
        options.onTokenFileChange?.(error as Error);
      }
      return [];
    }
  }

  return async (authorization) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    const token = match?.[1];
    if (!token) return false;
    const presented = digest(token);
    // Compare against every token so timing says nothing about which one matched.
    let ok = false;
    for (const known of await fileTokens()) ok = timingSafeEqual(known, presented) || ok;
    if (ok) return true;
    if ((!options.tokenReview && !options.clusterTokenReview) || !options.allowedServiceAccounts?.length) return false;
    const key = presented.toString('hex');
    const now = options.clock.now();
    const hit = reviews.get(key);
    if (hit && hit.until > now) return hit.allowed;
    const identity = await options.tokenReview?.(token).catch(() => undefined);
    let allowed = identity !== undefined && options.allowedServiceAccounts.includes(identity);
    if (!allowed && options.clusterTokenReview) allowed = (await options.clusterTokenReview(token).catch(() => undefined)) !== undefined;
    if (reviews.size > 10_000) reviews.clear();
    reviews.set(key, {allowed, until: now + (options.reviewCacheMs ?? 60_000)});
    return allowed;
  };
}

/** In-cluster TokenReview against the Kubernetes API, with the pod's own service-account credentials. */
export function inClusterTokenReviewer(options: {
  readonly apiServer: string;
  readonly caPem: string;
  readonly bearer: () => Promise<string>;
  readonly timeoutMs?: number;
}): TokenReviewer {
  return async (token) => postTokenReview({apiServer: options.apiServer, ca: options.caPem, bearer: await options.bearer(), token, timeoutMs: options.timeoutMs ?? 5000, what: 'TokenReview'});
}

/** The reviewer for the pod this runs in, or undefined outside Kubernetes. */
export async function podTokenReviewer(env: Readonly<Record<string, string | undefined>>): Promise<TokenReviewer | undefined> {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'] ?? '443';
  if (!host) return undefined;
  const dir = '/var/run/secrets/kubernetes.io/serviceaccount';
  const caPem = await readFile(`${dir}/ca.crt`, 'utf8').catch(() => undefined);
  if (!caPem) return undefined;
  const apiServer = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return inClusterTokenReviewer({apiServer, caPem, bearer: async () => (await readFile(`${dir}/token`, 'utf8')).trim()});
}
