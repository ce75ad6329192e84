/**
 * Service-account tokens as Kubernetes issues them, for the TokenReview tests: JWTs whose
 * signature is not checked here (the fake API server's `reviewToken` decides what it accepts).
 */

/** A JWT with these claims. */
export function jwt(claims: Record<string, unknown>): string {
  const part = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({alg: 'RS256', kid: 'k'})}.${part(claims)}.c2lnbmF0dXJl`;
}

/**
 * A legacy secret-based token of `namespace:name` (issuer `kubernetes/serviceaccount`): it names no
 * cluster, so it goes only to clusters whose issuer is not recorded. `salt` tells apart two
 * accounts of the same name in different clusters.
 */
export function legacyToken(serviceAccount: string, salt = ''): string {
  const [namespace, name] = serviceAccount.split(':');
  return jwt({iss: 'kubernetes/serviceaccount', 'kubernetes.io/serviceaccount/namespace': namespace, 'kubernetes.io/serviceaccount/service-account.name': name, sub: `system:serviceaccount:${serviceAccount}`, ...(salt ? {jti: salt} : {})});
}
