/**
 * The Entra ID identities of a runtime, built once and shared: discovery's ARM clients and the
 * probes' AKS tokens sign in with the same credential object per identity, so @azure/identity
 * caches one token set per identity, not one per consumer. Loaded on first use (the Azure SDKs
 * cost tens of MB that AWS-only deployments don't need).
 */
import {defaultAzureCredential, identityKey, type AzureCredentialFactory, type AzureCredentialOptions, type TokenCredential} from './aks-credential.ts';

/** Options of {@link AzureIdentities}. */
export interface AzureIdentitiesOptions {
  /** One credential for every identity (tests inject a fake); default DefaultAzureCredential per (cloud, client_id). */
  readonly credential?: TokenCredential | undefined;
  readonly credentialFactory?: AzureCredentialFactory | undefined;
  /** Bound on each token request (ms). */
  readonly timeoutMs: number;
}

/** One bounded TokenCredential per identity. */
export class AzureIdentities {
  readonly #options: AzureIdentitiesOptions;
  readonly #credentials = new Map<string, TokenCredential>();

  constructor(options: AzureIdentitiesOptions) {
    this.#options = options;
  }

  /** The credential of an identity; the injected one when there is one. */
  for(identity: Pick<AzureCredentialOptions, 'cloud' | 'clientId'>): TokenCredential {
    if (this.#options.credential) return this.#options.credential;
    const key = identityKey(identity);
    let credential = this.#credentials.get(key);
    if (!credential) {
      credential = withTokenDeadline((this.#options.credentialFactory ?? defaultAzureCredential)(identity), this.#options.timeoutMs);
      this.#credentials.set(key, credential);
    }
    return credential;
  }
}

/**
 * Bounds each Entra ID token request: @azure/identity's own HTTP calls (IMDS, the token
 * endpoint, the Azure CLI) take no timeout from us, and a hung one would stall every ARM call.
 */
export function withTokenDeadline(credential: TokenCredential, timeoutMs: number): TokenCredential {
  return {
    getToken(scopes, options) {
      const deadline = AbortSignal.timeout(timeoutMs);
      const caller = options?.abortSignal;
      const controller = new AbortController();
      const stop = (): void => controller.abort();
      deadline.addEventListener('abort', stop, {once: true});
      caller?.addEventListener('abort', stop, {once: true});
      if (caller?.aborted) stop();
      return new Promise((resolve, reject) => {
        const onAbort = (): void =>
          reject(Object.assign(new Error(`no Entra ID token within ${timeoutMs} ms`), {name: deadline.aborted ? 'TimeoutError' : 'AbortError'}));
        if (controller.signal.aborted) return onAbort();
        controller.signal.addEventListener('abort', onAbort, {once: true});
        credential
          .getToken(scopes, {...options, abortSignal: controller.signal})
          .then(resolve, reject)
          .finally(() => {
            controller.signal.removeEventListener('abort', onAbort);
            deadline.removeEventListener('abort', stop);
            caller?.removeEventListener('abort', stop);
          });
      });
    },
  };
}
