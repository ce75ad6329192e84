/**
 * A tiny stand-in for the service's `GET /v1/kube_servers` (items + next_page_token), two
 * items per page, requiring a bearer token when given one; records what it was asked.
 */
import {createServer} from 'node:http';
import type {AddressInfo} from 'node:net';
import type {KubeServer} from '../../heartbeats/kube-server.ts';

/** A running fake API. */
export interface FakeKubeServersApi {
  readonly url: string;
  /** `path?query` and authorization header of each request. */
  readonly requests: {readonly url: string; readonly authorization: string | undefined}[];
  close(): Promise<void>;
}

/** Serves `servers` in pages of `pageSize` (default 2), ignoring `labels` so the CLI must filter. */
export async function startKubeServersApi(servers: readonly KubeServer[], options: {token?: string; pageSize?: number} = {}): Promise<FakeKubeServersApi> {
  const pageSize = options.pageSize ?? 2;
  const requests: FakeKubeServersApi['requests'] = [];
  const server = createServer((req, res) => {
    requests.push({url: req.url ?? '', authorization: req.headers.authorization});
    const url = new URL(req.url ?? '/', 'http://api');
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, {'content-type': 'application/json'});
      res.end(JSON.stringify(body));
    };
    if (options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) {
      send(401, {error: 'unauthorized', message: 'a valid bearer token is required'});
      return;
    }
    if (url.pathname !== '/v1/kube_servers') {
      send(404, {error: 'not_found', message: `no such endpoint ${url.pathname}`});
      return;
    }
    const start = Number(url.searchParams.get('next_page_token') ?? '0');
    const end = start + pageSize;
    send(200, {items: servers.slice(start, end), ...(end < servers.length ? {next_page_token: String(end)} : {})});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
