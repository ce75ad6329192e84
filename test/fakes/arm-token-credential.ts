/**
 * A `TokenCredential` that hands out a fixed token and remembers which scopes were asked for,
 * so tests drive the real Azure SDK clients without Entra ID.
 */
import type {AccessToken, GetTokenOptions, TokenCredential} from '@azure/core-auth';
import {FAKE_ARM_TOKEN} from './arm-server.ts';

/** A fake credential with a record of its calls. */
export interface FakeTokenCredential extends TokenCredential {
  /** Scopes of every `getToken` call, oldest first. */
  readonly scopesRequested: readonly (readonly string[])[];
}

/** Returns `token` (default {@link FAKE_ARM_TOKEN}) valid for `ttlMs` from each call. */
export function fakeTokenCredential(token: string = FAKE_ARM_TOKEN, ttlMs = 3_600_000): FakeTokenCredential {
  const scopesRequested: string[][] = [];
  return {
    scopesRequested,
    getToken(scopes: string | string[], _options?: GetTokenOptions): Promise<AccessToken> {
      scopesRequested.push(Array.isArray(scopes) ? [...scopes] : [scopes]);
      return Promise.resolve({token, expiresOnTimestamp: Date.now() + ttlMs, tokenType: 'Bearer'});
    },
  };
}
