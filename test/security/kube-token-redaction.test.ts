/**
 * The kubeconfig credential of the `kubernetes` storage is a secret like any other: once the
 * client has used it, it is redacted by value from every message, whatever its format (a static
 * token has no recognisable pattern).
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {redactText} from '../../src/observability/redact.ts';
import {startKubeEnv, type KubeEnv} from '../kubernetes/kube-env.ts';

describe('kubernetes storage credential redaction', () => {
  let env: KubeEnv;
  beforeAll(async () => {
    env = await startKubeEnv();
  });
  afterAll(async () => {
    await env.close();
  });

  it('removes a static kubeconfig token from messages after the client used it', async () => {
    const client = await env.clientAs('redaction-test', {});
    // The kubeconfig's token is `token-redaction-test`: no pattern would recognise it.
    expect(redactText(`echoed: token-redaction-test`)).toContain('token-redaction-test');
    await client.request({method: 'GET', path: '/api/v1/namespaces/kd/secrets'}).catch(() => undefined);
    expect(redactText('echoed: token-redaction-test, done')).not.toContain('token-redaction-test');
  });
});
