/**
 * A managed-identity token endpoint for the simulator, in the App Service form
 * (`IDENTITY_ENDPOINT` + `IDENTITY_HEADER`) that `@azure/identity`'s DefaultAzureCredential
 * uses when `AZURE_TOKEN_CREDENTIALS=ManagedIdentityCredential`. It lets the real service sign
 * in to the fake ARM and to AKS clusters without Entra ID, and tells the fakes which resource
 * (audience) a token was issued for. Loopback HTTP, like the real App Service endpoint.
 */
import {randomBytes} from 'node:crypto';
import http from 'node:http';
import type {AddressInfo} from 'node:net';

/** A running identity endpoint. */
export interface SimIdentity {
  /** Environment that makes DefaultAzureCredential use this endpoint and nothing else. */
  readonly env: Readonly<Record<string, string>>;
  /** Resource (audience) a token was issued for, or undefined when this endpoint never issued it. */
  resourceOf(token: string): string | undefined;
  /** Tokens issued so far. */
  readonly issued: number;
  close(): Promise<void>;
}

/** Starts the endpoint on 127.0.0.1; tokens live `ttlSeconds` (default one hour). */
export async function startSimIdentity(options: {ttlSeconds?: number} = {}): Promise<SimIdentity> {
  const header = randomBytes(16).toString('hex');
  const tokens = new Map<string, string>();
  const ttl = options.ttlSeconds ?? 3600;
  let issued = 0;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const resource = url.searchParams.get('resource');
    const reply = (status: number, body: unknown): void => {
      res.writeHead(status, {'content-type': 'application/json'});
      res.end(JSON.stringify(body));
    };
    if (req.headers['x-identity-header'] !== header) {
      reply(401, {statusCode: 401, message: 'expected the X-IDENTITY-HEADER value from IDENTITY_HEADER'});
      return;
    }
    if (url.pathname !== '/msi/token' || !resource) {
      reply(400, {statusCode: 400, message: `expected GET /msi/token?resource=..., got ${req.method} ${url.pathname}`});
      return;
    }
    const token = `sim-entra.${randomBytes(24).toString('base64url')}`;
    tokens.set(token, resource.replace(/\/\.default$/, '').replace(/\/$/, ''));
    issued++;
    reply(200, {
      access_token: token,
      expires_on: String(Math.floor(Date.now() / 1000) + ttl),
      resource,
      token_type: 'Bearer',
      client_id: '5a8b1f0e-0000-4000-8000-00000000beef',
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const {port} = server.address() as AddressInfo;
  return {
    env: {
      IDENTITY_ENDPOINT: `http://127.0.0.1:${port}/msi/token`,
      IDENTITY_HEADER: header,
      AZURE_TOKEN_CREDENTIALS: 'ManagedIdentityCredential',
    },
    resourceOf: (token) => tokens.get(token),
    get issued() {
      return issued;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
