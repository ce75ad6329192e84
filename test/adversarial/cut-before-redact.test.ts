/**
 * Adversarial: cloud and identity error messages are cut to one short line before they reach
 * /v1/status, the log and `once` (AWS and ARM source failures at 300 characters, an Entra ID
 * token error at 400), and were cut *before* being redacted. A credential the process holds is
 * redacted by its whole value, so one that a message echoed across the cut (a proxy or gateway
 * quoting what it was handed; here an Azure client secret, whose shape no pattern knows) kept all
 * but its last characters. Same defect as the probe's (probe-echo-truncated.test.ts); the access
 * set-up's Kubernetes calls quote a plain-text answer at 200 characters the same way.
 */
import {createServer} from 'node:https';
import type {AddressInfo} from 'node:net';
import {expect, it} from 'vitest';
import {canI} from '../../src/access/kube-apply.ts';
import {awsFailure} from '../../src/clouds/aws/errors.ts';
import {azureFailure} from '../../src/clouds/azure/errors.ts';
import {mintEntraToken} from '../../src/credentials/aks-token.ts';
import {redact, redactText, registerSecret} from '../../src/observability/redact.ts';
import {summaryLine} from '../../src/status/summary.ts';
import {createTestCa} from '../fakes/tls-ca.ts';

// An Entra ID client secret (the identity's AZURE_CLIENT_SECRET, registered for redaction when read).
const SECRET = 'Xq8~Jv2.Tn5_Lp0-Wr7zKc4~Hs1.Bd6_Fm9-Ga3yNe';
registerSecret(SECRET);

/** A message whose echo of the secret starts 20 characters before `cut`. */
function echo(cut: number): string {
  return `${'the gateway refused the request it was handed on behalf of the caller; '.repeat(10).slice(0, cut - 20 - 8)} secret ${SECRET} was not accepted`;
}

it('an AWS source failure keeps no part of a credential its message echoed across the cut', () => {
  const error = Object.assign(new Error(echo(300)), {name: 'AccessDeniedException', $metadata: {httpStatusCode: 403, requestId: 'r-1'}});
  expect(awsFailure(error, 'ListClusters').message).not.toContain(SECRET.slice(0, 12));
});

it('an Azure source failure keeps no part of a credential its message echoed across the cut', () => {
  const error = Object.assign(new Error(echo(300)), {name: 'RestError', code: 'AuthorizationFailed', statusCode: 403});
  // Redacted again where it is shown (/v1/status, the log): a cut value is no longer known.
  expect(redactText(azureFailure(error, 'managedClusters.list').message)).not.toContain(SECRET.slice(0, 12));
});

it('an Entra ID token error keeps no part of a credential its message echoed across the cut', async () => {
  const credential = {getToken: () => Promise.reject(new Error(echo(400)))};
  const error = await mintEntraToken(credential, '6dae42f8-4368-4678-94ff-3960e28e3630').then(() => undefined, (e: unknown) => e as Error);
  expect(error?.message).toContain('could not get an Entra ID token');
  expect(redactText(error?.message ?? '')).not.toContain(SECRET.slice(0, 12));
});

it('access set-up keeps no part of a credential a cluster echoed across the cut of a plain-text answer', async () => {
  const ca = await createTestCa();
  const tls = await ca.issueServerCert();
  const server = createServer({cert: tls.certPem, key: tls.keyPem}, (_req, res) => {
    res.writeHead(502, {'content-type': 'text/plain'});
    res.end(echo(200));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const target = {server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caPem: ca.caPem, token: SECRET};
    const error = await canI(target, 'create', 'clusterroles', 'rbac.authorization.k8s.io').then(() => undefined, (e: unknown) => e as Error);
    expect(error?.message).toContain('502');
    // Redacted again where it is shown (the access set-up note, the log).
    expect(redactText(error?.message ?? '')).not.toContain(SECRET.slice(0, 12));
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

it("the /v1/status summary line keeps no part of a credential a source's error echoed across its cut", () => {
  // A failure recorded as the planner threw it (a credential provider's own error), not through a cloud's classifier.
  const failed = {id: 'aks:*', cloud: 'Azure', region: '*', account: '', ok: false, clusters: 0, stale: true, consecutive_failures: 1, last_error: {reason: 'other' as const, code: 'Error', operation: 'plan', message: echo(160), at: '2026-01-01T00:00:00Z'}};
  // statusBodyOf redacts the whole body, this line included.
  expect(redact(summaryLine({role: 'leader', clusters: 3, sources: [failed]}))).not.toContain(SECRET.slice(0, 12));
});
