/**
 * The credentials of a runtime, built once and handed to discovery and to the probes (and the
 * token reviews of discovered clusters) alike: one AWS credential provider per identity, one
 * Entra ID credential per identity, one store of AKS local-account tokens that discovery fills
 * and the probes read. The Azure part is loaded on first use.
 */
import type {KubeAccess} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import type {AzureCredentialFactory, AzureCredentialOptions, TokenCredential} from './aks-credential.ts';
import {AksLocalAccounts} from './aks-local-accounts.ts';
import {AwsCredentialProviders} from './aws-credentials.ts';
import type {AzureIdentities} from './azure-identities.ts';
import type {Env} from './sts-endpoint.ts';

/** Options of {@link SharedCredentials}. */
export interface SharedCredentialsOptions {
  readonly clock: Clock;
  /** Read for the STS endpoint of AssumeRole calls. */
  readonly env: Env;
  /** AWS providers to share; default the SDK chain with this clock and env. */
  readonly aws?: AwsCredentialProviders;
  readonly azure?: {
    readonly credential?: TokenCredential | undefined;
    readonly credentialFactory?: AzureCredentialFactory | undefined;
    /** Bound on each Entra ID token request (ms). */
    readonly timeoutMs: number;
    /** Identity of the probes' AKS tokens: the first `azure:` matcher's; undefined without Azure matchers (no AKS token source). */
    readonly probeIdentity: Pick<AzureCredentialOptions, 'cloud' | 'clientId'> | undefined;
  };
  /** Counts AKS tokens minted for probes and failed mints; never passed a token. */
  readonly onAksMint?: () => void;
  readonly onAksError?: () => void;
}

/** Mints a bearer token for an AKS cluster (Entra ID, or the local account discovery recorded). */
export type AksTokens = (access: KubeAccess) => Promise<string>;

// The SDK warns on the console about e.g. conflicting credential sources; the service logs
// credential failures itself, once per source or probe result.
const quietLogger = {debug() {}, info() {}, warn() {}, error() {}};

/** Credentials built once per runtime. */
export class SharedCredentials {
  /** AWS credential providers by identity (the default chain, or a role assumed with it). */
  readonly aws: AwsCredentialProviders;
  /** AKS local-account tokens: discovery records the accounts, probes read them. */
  readonly aksLocalAccounts: AksLocalAccounts;
  /** Tokens for AKS clusters; undefined when the config has no `azure:` matchers. */
  readonly aks: AksTokens | undefined;
  readonly #options: SharedCredentialsOptions;
  #azure: Promise<AzureIdentities> | undefined;

  constructor(options: SharedCredentialsOptions) {
    this.#options = options;
    this.aws = options.aws ?? new AwsCredentialProviders({env: options.env, clock: options.clock, logger: quietLogger});
    this.aksLocalAccounts = new AksLocalAccounts({clock: options.clock});
    this.aks = options.azure?.probeIdentity ? this.#aksTokens(options.azure.probeIdentity) : undefined;
  }

  /** The Entra ID identities (loaded on first use). */
  azure(): Promise<AzureIdentities> {
    const azure = this.#options.azure;
    this.#azure ??= import('./azure-identities.ts').then(
      (m) => new m.AzureIdentities({credential: azure?.credential, credentialFactory: azure?.credentialFactory, timeoutMs: azure?.timeoutMs ?? 30_000}),
    );
    return this.#azure;
  }

  #aksTokens(identity: Pick<AzureCredentialOptions, 'cloud' | 'clientId'>): AksTokens {
    // Built on first use: a config whose clusters are never probed never constructs a credential.
    let source: Promise<(access: Extract<KubeAccess, {kind: 'aks'}>) => Promise<string>> | undefined;
    const load = async (): Promise<(access: Extract<KubeAccess, {kind: 'aks'}>) => Promise<string>> => {
      const [identities, {aksTokenSource}, {identityKey}] = await Promise.all([this.azure(), import('./aks-token.ts'), import('./aks-credential.ts')]);
      const {onAksMint, onAksError, clock} = this.#options;
      return aksTokenSource({
        credential: identities.for(identity),
        clock,
        localAccounts: this.aksLocalAccounts,
        identity: identityKey(identity),
        ...(onAksMint ? {onMint: () => onAksMint()} : {}),
        ...(onAksError ? {onError: () => onAksError()} : {}),
      });
    };
    return async (access) => {
      if (access.kind !== 'aks') throw new Error(`expected AKS access, got ${access.kind}`);
      return (await (source ??= load()))(access);
    };
  }
}
