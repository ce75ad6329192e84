/**
 * One TokenReview POST, shared by the in-cluster reviewer and the reviews against discovered
 * clusters. The answer has a deadline for the whole exchange (a socket timeout only catches an
 * idle socket, and an API server that drips its answer a byte at a time would hold the API
 * request that waits on it) and a size cap: a TokenReview answer is a few kilobytes, so one far
 * longer is no answer to believe, and reading it whole would only fill the heap.
 */
import {request} from 'node:https';

/** Longest TokenReview answer read: the user's name, uid, groups and extra are a few kilobytes. */
export const MAX_TOKEN_REVIEW_BYTES = 256 * 1024;

/** Posts a TokenReview of `token` to `apiServer`; resolves to the service account it authenticates as (`namespace:name`), or undefined. */
export async function postTokenReview(options: {
  readonly apiServer: string;
  readonly ca: string | undefined;
  readonly bearer: string;
  readonly token: string;
  readonly timeoutMs: number;
  /** Names the reviewer in errors ("TokenReview on <cluster>"). */
  readonly what: string;
}): Promise<string | undefined> {
  const url = new URL('/apis/authentication.k8s.io/v1/tokenreviews', options.apiServer);
  const body = JSON.stringify({apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: {token: options.token}});
  const text = await new Promise<string>((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        ...(options.ca ? {ca: options.ca} : {}),
        timeout: options.timeoutMs,
        signal: AbortSignal.timeout(options.timeoutMs),
        headers: {'content-type': 'application/json', authorization: `Bearer ${options.bearer}`},
      },
      (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (bytes > MAX_TOKEN_REVIEW_BYTES) {
            req.destroy(new Error(`${options.what} answered with a body longer than ${MAX_TOKEN_REVIEW_BYTES / 1024} KiB, which no TokenReview answer is`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => (res.statusCode === 201 || res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`${options.what} answered HTTP ${res.statusCode}`))));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${options.what} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
  const review = JSON.parse(text) as {status?: {authenticated?: boolean; user?: {username?: string}}};
  const username = review.status?.authenticated ? review.status.user?.username : undefined;
  const m = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(username ?? '');
  return m ? `${m[1]}:${m[2]}` : undefined;
}
