/**
 * Every probe message for EKS and AKS (each authentication mode, with and without a known
 * principal and region), pinned to a file written before the per-cloud text moved into the
 * cloud modules: operators' runbooks quote these sentences.
 */
import {describe, expect, it} from 'vitest';
import {
  apiErrorMessage,
  forbiddenMessage,
  healthyMessage,
  noCredentialsMessage,
  noEndpointMessage,
  tlsMessage,
  unauthorizedMessage,
  unreachableMessage,
  type MessageTarget,
} from '../../src/probe/messages.ts';

const targets: MessageTarget[] = [
  ...[undefined, 'API', 'CONFIG_MAP', 'API_AND_CONFIG_MAP'].flatMap((authMode) => [
    {clusterName: 'web', cloud: 'AWS', ...(authMode ? {authMode} : {})},
    {clusterName: 'web', cloud: 'AWS', principal: 'arn:aws:iam::111111111111:role/discovery', region: 'us-east-1', ...(authMode ? {authMode} : {})},
    {clusterName: 'web', cloud: 'AWS', principal: 'arn:aws:iam::111111111111:user/ops', ...(authMode ? {authMode} : {})},
  ]),
  ...[undefined, 'azure-rbac', 'AzureRBAC', 'aad-kubernetes-rbac', 'local-accounts', 'something'].flatMap((authMode) => [
    {clusterName: 'api', cloud: 'Azure', ...(authMode ? {authMode} : {})},
    {clusterName: 'api', cloud: 'Azure', principal: '6dae42f8-4368-4678-94ff-3960e28e3630', region: 'westeurope', ...(authMode ? {authMode} : {})},
  ]),
];

describe('probe messages stay word for word', () => {
  it('for every cloud, authentication mode and principal', async () => {
    const out = targets.map((t) => ({
      target: t,
      unreachable: unreachableMessage(t, 'https://x.example', 'ECONNREFUSED'),
      tls: tlsMessage(t, 'https://x.example', 'self-signed certificate'),
      unauthorized: unauthorizedMessage(t),
      forbidden: forbiddenMessage(t, 'impersonate on users', 'denied'),
      noCredentials: noCredentialsMessage(t, 'no token'),
      noEndpoint: noEndpointMessage(t, 'endpoint'),
      apiError: apiErrorMessage(t, 'https://x.example', 'HTTP 500'),
      healthy: healthyMessage(t, 'v1.31.0'),
    }));
    await expect(`${JSON.stringify(out, null, 1)}\n`).toMatchFileSnapshot('./__golden__/messages.json');
  });
});
