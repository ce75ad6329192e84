/** A minimal HTTPS client for tests that talk to the fakes without an SDK in between. */
import type {IncomingHttpHeaders} from 'node:http';
import https from 'node:https';

/** Options of {@link httpsRequest}. */
export interface HttpsRequestOptions {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** CA to trust (PEM); the fakes' certificates are not publicly trusted. */
  readonly ca: string;
  /** Fails the request with `ETIMEDOUT` after this long without an answer. */
  readonly timeoutMs?: number;
}

/** A complete response. */
export interface HttpsResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** Sends one request on a fresh connection and reads the whole answer. */
export function httpsRequest(url: string, options: HttpsRequestOptions): Promise<HttpsResponse> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, {
      method: options.method ?? 'GET',
      headers: {...options.headers, ...(options.body === undefined ? {} : {'content-length': String(Buffer.byteLength(options.body))})},
      ca: options.ca,
      agent: false,
      ...(options.timeoutMs === undefined ? {} : {timeout: options.timeoutMs}),
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8')}));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer from ${url} within ${options.timeoutMs ?? 0} ms`), {code: 'ETIMEDOUT'})));
    req.on('error', reject);
    req.end(options.body);
  });
}
