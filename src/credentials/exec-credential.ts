/**
 * The ExecCredential a kubectl exec credential plugin prints: the token and its expiry, in
 * the API version kubectl asked for through `KUBERNETES_EXEC_INFO`.
 */
import {InputError} from '../core/errors.ts';
import type {Env} from './sts-endpoint.ts';

/** The API versions of client.authentication.k8s.io we can answer. */
export const EXEC_CREDENTIAL_API_VERSIONS = ['client.authentication.k8s.io/v1beta1', 'client.authentication.k8s.io/v1'] as const;

/** One of EXEC_CREDENTIAL_API_VERSIONS. */
export type ExecCredentialApiVersion = (typeof EXEC_CREDENTIAL_API_VERSIONS)[number];

/** The ExecCredential object, as client-go decodes it. */
export interface ExecCredential {
  readonly kind: 'ExecCredential';
  readonly apiVersion: ExecCredentialApiVersion;
  readonly spec: Record<string, never>;
  readonly status: {readonly expirationTimestamp: string; readonly token: string};
}

/**
 * The ExecCredential for `token`. The API version is the one in `KUBERNETES_EXEC_INFO` (set
 * by kubectl) when present, else v1beta1, which every kubectl since 1.11 understands.
 */
export function execCredential(token: string, expiresAt: Date, env: Env): ExecCredential {
  return {
    kind: 'ExecCredential',
    apiVersion: requestedApiVersion(env),
    spec: {},
    status: {expirationTimestamp: rfc3339Seconds(expiresAt), token},
  };
}

/** RFC 3339 in UTC without fractional seconds, like `aws eks get-token` prints. */
export function rfc3339Seconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function requestedApiVersion(env: Env): ExecCredentialApiVersion {
  const info = env['KUBERNETES_EXEC_INFO'];
  if (!info) return 'client.authentication.k8s.io/v1beta1';
  let parsed: unknown;
  try {
    parsed = JSON.parse(info);
  } catch {
    throw new InputError('expected KUBERNETES_EXEC_INFO to be an ExecCredential JSON object, got text that is not JSON');
  }
  const apiVersion = typeof parsed === 'object' && parsed !== null ? (parsed as {apiVersion?: unknown}).apiVersion : undefined;
  if (!(EXEC_CREDENTIAL_API_VERSIONS as readonly unknown[]).includes(apiVersion)) {
    throw new InputError(
      `expected KUBERNETES_EXEC_INFO apiVersion to be one of ${EXEC_CREDENTIAL_API_VERSIONS.join(', ')}, got ${JSON.stringify(apiVersion ?? null)}`,
    );
  }
  return apiVersion as ExecCredentialApiVersion;
}
