/**
 * Static credentials of AKS local accounts (clusters without Entra ID), as
 * `listClusterUserCredential` hands them out. Discovery records them while it lists clusters;
 * the probe's token source reads them here. They live in memory only: never in a
 * DiscoveredCluster, the registry, a log line or an error.
 */
import type {Clock} from '../core/clock.ts';
import type {AksUserKubeconfig} from './aks-kubeconfig.ts';
import {registerSecret, retireSecret} from '../observability/redact.ts';
import {TokenCache} from './token-cache.ts';

/** Addresses one managed cluster; compared case-insensitively, as ARM does. */
export interface AksClusterRef {
  readonly subscriptionId: string;
  readonly resourceGroup: string;
  readonly name: string;
}

/** What the user credential of a cluster allows. */
export type AksLocalAccount =
  | {readonly kind: 'token'; readonly token: string}
  /** Local accounts are off and there is no Entra ID: nothing can sign in. */
  | {readonly kind: 'disabled'}
  /** The cluster uses Entra ID: a local-account token is the wrong tool. */
  | {readonly kind: 'entra'}
  /** The local account has a client certificate only. */
  | {readonly kind: 'no-token'};

/** Fetches a cluster's user kubeconfig from ARM (discovery installs it; absent, only recorded credentials are served). */
export type AksUserCredentialLoader = (ref: AksClusterRef) => Promise<AksUserKubeconfig>;

/** Local accounts are disabled and the cluster has no Entra ID integration; the probe reports it as unhealthy. */
export class AksLocalAccountsDisabledError extends Error {
  override readonly name = 'AksLocalAccountsDisabledError';
  /** Bounded reason for probe results and metrics. */
  readonly reason = 'local_accounts_disabled';
  readonly cluster: string;

  constructor(ref: AksClusterRef) {
    super(
      `AKS cluster ${ref.name} (resource group ${ref.resourceGroup}): local accounts are disabled and the cluster has no Entra ID integration: ` +
        'enable AKS-managed Entra ID (az aks update --enable-aad --aad-admin-group-object-ids ...) or re-enable local accounts (az aks update --enable-local-accounts)',
    );
    this.cluster = ref.name;
  }
}

/** The cluster's user credential cannot give a bearer token (client certificate only, or Entra ID). */
export class AksNoLocalTokenError extends Error {
  override readonly name = 'AksNoLocalTokenError';
  readonly reason = 'no_local_token';
}

interface LocalToken {
  readonly token: string;
  readonly expiresAt: Date;
}

interface Recorded {
  readonly account: AksLocalAccount;
  /** When it was last recorded: moved on in place when the same account is recorded again (every cluster, every cycle). */
  at: number;
}

/** Options of {@link AksLocalAccounts}. */
export interface AksLocalAccountsOptions {
  readonly clock: Clock;
  /** How long a recorded or loaded credential is used before it is fetched again. Default 30 min. */
  readonly ttlMs?: number;
  readonly maxEntries?: number;
}

/** The in-memory store of local-account credentials, keyed by cluster. */
export class AksLocalAccounts {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #recorded = new Map<string, Recorded>();
  readonly #cache: TokenCache<LocalToken>;
  #loader: AksUserCredentialLoader | undefined;

  constructor(options: AksLocalAccountsOptions) {
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs ?? 30 * 60_000;
    this.#cache = new TokenCache<LocalToken>({clock: options.clock, ...(options.maxEntries ? {maxEntries: options.maxEntries} : {})});
  }

  /** Installs how to fetch a credential that discovery has not recorded (e.g. right after a restart). */
  setLoader(loader: AksUserCredentialLoader | undefined): void {
    this.#loader = loader;
  }

  /** Records what listClusterUserCredential said for a cluster; a changed token replaces the cached one at once. */
  record(ref: AksClusterRef, account: AksLocalAccount): void {
    const key = clusterKey(ref);
    const recorded = this.#recorded.get(key);
    const previous = recorded?.account;
    if (recorded !== undefined && previous === account) {
      // The same account object as last time (an unchanged cluster of a steady cycle): nothing but the time moves.
      recorded.at = this.#clock.now();
      return;
    }
    this.#recorded.set(key, {account, at: this.#clock.now()});
    if (sameAccount(previous, account)) return;
    // Registered when first seen or changed: re-registering every cluster's token each cycle churned the redaction set.
    if (account.kind === 'token') registerSecret(account.token);
    // The replaced token is no longer served: keep the redaction set the size of the live tokens.
    if (previous?.kind === 'token') retireSecret(previous.token);
    this.#cache.delete(key);
  }

  /** Forgets a cluster (it vanished). */
  forget(ref: AksClusterRef): void {
    const key = clusterKey(ref);
    this.#retire(key);
    this.#recorded.delete(key);
    this.#cache.delete(key);
  }

  #retire(key: string): void {
    const account = this.#recorded.get(key)?.account;
    if (account?.kind === 'token') retireSecret(account.token);
  }

  /** Forgets credentials not recorded within the TTL: discovery re-records every live cluster each cycle. */
  prune(): void {
    const now = this.#clock.now();
    // forEach: no [key, value] pair per entry, every cycle, for every cluster.
    this.#recorded.forEach((recorded, key) => {
      if (now - recorded.at >= this.#ttlMs) {
        if (recorded.account.kind === 'token') retireSecret(recorded.account.token);
        this.#recorded.delete(key);
        this.#cache.delete(key);
      }
    });
  }

  /** What is known about a cluster's local account, if anything. */
  account(ref: AksClusterRef): AksLocalAccount['kind'] | undefined {
    return this.#recorded.get(clusterKey(ref))?.account.kind;
  }

  /** The static bearer token of the cluster's local account; typed errors when there is none. */
  async token(ref: AksClusterRef): Promise<string> {
    const key = clusterKey(ref);
    const value = await this.#cache.get(key, () => this.#mint(ref));
    return value.token;
  }

  async #mint(ref: AksClusterRef): Promise<LocalToken> {
    const key = clusterKey(ref);
    let recorded = this.#recorded.get(key);
    if (!recorded || this.#clock.now() - recorded.at >= this.#ttlMs) {
      if (this.#loader) {
        const kubeconfig = await this.#loader(ref);
        this.record(ref, accountOf(kubeconfig));
        recorded = this.#recorded.get(key);
      } else if (!recorded) {
        throw new AksNoLocalTokenError(`AKS cluster ${ref.name} (resource group ${ref.resourceGroup}): no local-account credential known yet; discovery has not listed it`);
      }
    }
    const account = recorded?.account;
    if (account?.kind === 'token') return {token: account.token, expiresAt: new Date((recorded?.at ?? 0) + this.#ttlMs)};
    if (account?.kind === 'disabled') throw new AksLocalAccountsDisabledError(ref);
    throw new AksNoLocalTokenError(
      account?.kind === 'entra'
        ? `AKS cluster ${ref.name} uses Entra ID: expected an Entra ID token, not a local account`
        : `AKS cluster ${ref.name} (resource group ${ref.resourceGroup}): the local account has a client certificate but no token to probe with`,
    );
  }
}

/** What a user kubeconfig means for local-account access. */
export function accountOf(kubeconfig: AksUserKubeconfig): AksLocalAccount {
  switch (kubeconfig.user.kind) {
    case 'token':
      return {kind: 'token', token: kubeconfig.user.token};
    case 'entra':
      return {kind: 'entra'};
    default:
      return {kind: 'no-token'};
  }
}

function sameAccount(a: AksLocalAccount | undefined, b: AksLocalAccount): boolean {
  if (!a || a.kind !== b.kind) return false;
  return a.kind !== 'token' || a.token === (b as {token: string}).token;
}

function clusterKey(ref: AksClusterRef): string {
  // An unchanged cluster's ref is the same object every cycle (aks-fetcher.ts): its key is built once.
  let key = keys.get(ref);
  if (key === undefined) {
    key = `${ref.subscriptionId}/${ref.resourceGroup}/${ref.name}`.toLowerCase();
    keys.set(ref, key);
  }
  return key;
}

// Refs are not changed once made (AksClusterRef is readonly).
const keys = new WeakMap<AksClusterRef, string>();
