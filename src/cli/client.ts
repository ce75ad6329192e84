/** A small client of the HTTP API for the CLI (`ls`, `kubeconfig`). */
import {readFile} from 'node:fs/promises';
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {errorMessage} from '../core/errors.ts';
import {hideUrlUserInfo, registerSecret} from '../observability/redact.ts';

/** Where and how to reach the API. */
export interface ApiClientOptions {
  readonly server: string;
  readonly token?: string;
}

/** `--server` checked: an http(s) URL, or a usage message suggesting one (`localhost:3000` parses as a URL of scheme `localhost:`). */
export function serverUrl(text: string): {ok: true; url: string} | {ok: false; message: string} {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  // A password in the address would be quoted by every error about it (fetch refuses such a URL
  // anyway): refused up front, the address quoted without it, and the token options named instead.
  if (url && (url.username !== '' || url.password !== '')) {
    return {ok: false, message: `expected --server without user info (a name or password before @), got ${JSON.stringify(hideUrlUserInfo(text))}; pass the API's bearer token with --token-file or $KUBE_DISCOVERY_TOKEN`};
  }
  if (url && (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname) return {ok: true, url: text};
  const hint = /^[\w.-]+:\d+$|^[\w.-]+$|^\[[\d:a-f]+\]:\d+$/i.test(text) ? `; did you mean http://${text}?` : '';
  return {ok: false, message: `expected --server to be an http:// or https:// URL, got ${JSON.stringify(hideUrlUserInfo(text))}${hint}`};
}

/** The bearer token from `--token-file` or `KUBE_DISCOVERY_TOKEN`. */
export async function resolveToken(tokenFile: string | undefined, env: Readonly<Record<string, string | undefined>>): Promise<string | undefined> {
  const token = tokenFile ? (await readFile(tokenFile, 'utf8')).trim() : env['KUBE_DISCOVERY_TOKEN'] || undefined;
  // A server (or a proxy before it) may quote the token it was sent in its error answer, which the CLI prints.
  registerSecret(token);
  return token;
}

/** Lists every kube_server (all pages), optionally filtered by a label selector `k=v,...`. */
export async function listKubeServers(options: ApiClientOptions & {labels?: string}): Promise<KubeServer[]> {
  const out: KubeServer[] = [];
  const seen = new Set<string>();
  let token: string | undefined;
  do {
    const url = new URL('/v1/kube_servers', options.server);
    url.searchParams.set('limit', '500');
    if (options.labels) url.searchParams.set('labels', options.labels);
    if (token) url.searchParams.set('next_page_token', token);
    let res: Response;
    try {
      res = await fetch(url, {headers: options.token ? {authorization: `Bearer ${options.token}`} : {}, signal: AbortSignal.timeout(30_000)});
    } catch (error) {
      throw new Error(`cannot reach ${options.server}: ${errorMessage(error instanceof Error && error.cause instanceof Error ? error.cause : error)}`, {cause: error});
    }
    if (!res.ok) {
      const body = (await res.json().catch(() => ({}))) as {message?: string};
      throw new Error(`${url.origin}${url.pathname} answered HTTP ${res.status}${body.message ? `: ${body.message}` : ''}`);
    }
    const page = (await res.json()) as {items: KubeServer[]; next_page_token?: string};
    out.push(...page.items);
    token = page.next_page_token;
    // Our server's tokens only move forward; one answered again (a cache ignoring the query string) would be followed for ever.
    if (token) {
      if (seen.has(token)) throw new Error(`${url.origin}${url.pathname} answered a next_page_token it had answered before; is a proxy or cache in front of the API ignoring the query string?`);
      seen.add(token);
    }
  } while (token);
  return out;
}
