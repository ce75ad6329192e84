// With no Azure identity at all, @azure/identity throws a multi-line AggregateAuthenticationError
// listing every credential it tried. Operators get one plain line instead (what was tried, what
// to set) in the source failure, the `token aks` plugin and the service's no-credentials warning;
// a credential that exists but is refused keeps its own message.
import {AggregateAuthenticationError, AuthenticationError, CredentialUnavailableError} from '@azure/identity';
import {describe, expect, it} from 'vitest';
import {azureFailure} from '../../src/clouds/azure/errors.ts';
import {tokenCommand} from '../../src/cli/token.ts';
import {AKS_SERVER_ID} from '../../src/credentials/aks-token.ts';
import {captureIo} from '../helpers/env.ts';

function noCredentials(): AggregateAuthenticationError {
  return new AggregateAuthenticationError(
    [
      new CredentialUnavailableError('EnvironmentCredential is unavailable. No underlying credential could be used.\n\tTo troubleshoot, visit https://aka.ms/azsdk/js/identity/environmentcredential/troubleshoot.'),
      new CredentialUnavailableError('WorkloadIdentityCredential: is unavailable. tenantId, clientId, and federatedTokenFilePath are required parameters.'),
      new CredentialUnavailableError('ManagedIdentityCredential: Authentication failed. Message Attempted to use the IMDS endpoint, but it is not available.'),
      new CredentialUnavailableError('AzureCliCredential: Azure CLI could not be found. Please visit https://aka.ms/azure-cli for installation instructions and then, once installed, authenticate to your Azure account using \'az login\'.'),
    ],
    'DefaultAzureCredential failed to retrieve a token from the included credentials.\nAttempted credentials:\n\tEnvironmentCredential: EnvironmentCredential is unavailable.',
  );
}

const PLAIN = /^no Azure credentials found \(tried EnvironmentCredential, WorkloadIdentityCredential, ManagedIdentityCredential, AzureCliCredential\): set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET .*`az login`$/;

describe('no Azure credentials', () => {
  it('is one plain line in the source failure, still access_denied', () => {
    const failure = azureFailure(noCredentials(), 'Subscriptions.List');

    expect(failure.message).toMatch(PLAIN);
    expect(failure.message).not.toContain('\n');
    expect(failure.reason).toBe('access_denied');
  });

  it('keeps the message of a credential that exists but is refused', () => {
    const refused = new AggregateAuthenticationError([new AuthenticationError(401, {error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret provided.'})], 'ChainedTokenCredential authentication failed.');

    expect(azureFailure(refused, 'Subscriptions.List').message).not.toMatch(/^no Azure credentials found/);
  });

  it('is the one line `token aks` prints', async () => {
    const out = captureIo({});
    const code = await tokenCommand({azureCredential: () => ({getToken: () => Promise.reject(noCredentials())})})(['aks', '--server-id', AKS_SERVER_ID], out.io);

    expect(code).toBe(1);
    expect(out.stderr()).toMatch(/^kube-discovery token: could not get an Entra ID token for 6dae42f8-4368-4678-94ff-3960e28e3630\/\.default: no Azure credentials found \(tried .*`az login`\n$/);
  });
});
