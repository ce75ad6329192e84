/**
 * The small HTTPS plumbing the wire fakes share: listen on loopback port 0, read bodies,
 * answer JSON, and close even while requests are deliberately left hanging.
 */
import type {IncomingMessage, ServerResponse} from 'node:http';
import https from 'node:https';
import type {AddressInfo} from 'node:net';
import type {ServerTls} from './tls-ca.ts';

/** Handles one request; a thrown error becomes a 500 so a fake bug never hangs a test. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** A listening HTTPS server. */
export interface HttpsListener {
  /** `https://127.0.0.1:<port>` (no trailing slash). */
  readonly url: string;
  readonly port: number;
  /** Stops listening and destroys every open connection, including hung requests. */
  close(): Promise<void>;
}

/** Starts an HTTPS server on 127.0.0.1 with an OS-chosen port. */
export async function listenHttps(tls: ServerTls, handler: RequestHandler): Promise<HttpsListener> {
  const server = https.createServer({cert: tls.certPem, key: tls.keyPem}, (req, res) => {
    Promise.resolve()
      .then(() => handler(req, res))
      .catch((error: unknown) => {
        if (!res.headersSent) {
          res.writeHead(500, {'content-type': 'text/plain'});
          res.end(`fake server error: ${error instanceof Error ? error.message : String(error)}`);
        } else {
          res.destroy();
        }
      });
  });
  // Clients that fail the TLS handshake (the "wrong CA" tests) must not surface as server errors.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const {port} = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/** Reads a request body as UTF-8, refusing more than `limitBytes`. */
export async function readBody(req: IncomingMessage, limitBytes = 1 << 20): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > limitBytes) throw new Error(`request body larger than ${limitBytes} bytes`);
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Answers with a JSON body. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

/** Waits `ms` of real time; the timer does not keep a process alive on its own. */
export function delay(ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
