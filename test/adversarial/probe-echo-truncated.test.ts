/**
 * Adversarial: the probe quotes what a cluster's API answered (a 403's Status message, the body of
 * another error) in the entry's `target_health.message`, which is stored in the registry and served
 * by /v1/kube_servers and `kubectl get kubeservers`. That text was cut to 300 (or 200) characters
 * first and redacted after: a credential the process holds is removed by its whole value, so an
 * answer that echoed the bearer token (a proxy in front of the API server saying which token it
 * refused) across the cut kept most of the token — here an AKS local account's — in the message.
 */
import {createServer, type Server} from 'node:https';
import type {AddressInfo} from 'node:net';
import {afterAll, beforeAll, expect, it} from 'vitest';
import {registerSecret} from '../../src/observability/redact.ts';
import {probeCluster} from '../../src/probe/probe.ts';
import {createTestCa} from '../fakes/tls-ca.ts';

// An AKS local account's token, as listClusterUserCredential hands it over (registered for redaction when read).
const TOKEN = 'f3c1a9e47b2d58c06e1f9a3b7d4c2e8a5b6f0d1c9e3a7b4d2f8c6e0a1b5d9c3e';

let server: Server;
let url = '';
let caData = '';
let answer: {status: number; body: string} = {status: 403, body: ''};

beforeAll(async () => {
  registerSecret(TOKEN);
  const ca = await createTestCa();
  const tls = await ca.issueServerCert();
  caData = Buffer.from(ca.caPem, 'utf8').toString('base64');
  server = createServer({cert: tls.certPem, key: tls.keyPem}, (req, res) => {
    res.writeHead(answer.status, {'content-type': answer.status === 403 ? 'application/json' : 'text/plain'});
    res.end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const probe = () =>
  probeCluster({endpoint: url, caData, token: () => Promise.resolve(TOKEN), timeoutMs: 10_000, clusterName: 'prod', cloud: 'Azure', region: 'eastus', authMode: 'local-accounts'});

for (const [what, status, cut] of [
  ['a 403 Status message', 403, 300],
  ['the plain-text body of a 502', 502, 200],
] as const) {
  it(`keeps no part of the bearer token that ${what} echoed across the quoting limit`, async () => {
    // The token starts 40 characters before the limit: the quoted text ends inside it.
    const text = `${'the request was refused by the authenticating proxy in front of this cluster; '.repeat(8).slice(0, cut - 40 - 7)} token ${TOKEN} is not accepted here`;
    answer = {status, body: status === 403 ? JSON.stringify({kind: 'Status', apiVersion: 'v1', status: 'Failure', message: text, reason: 'Forbidden', code: 403}) : text};
    const health = await probe();
    expect(health.status).toBe('unhealthy');
    expect(health.message, 'a cut token escapes redaction by value').not.toContain(TOKEN.slice(0, 16));
  });
}
