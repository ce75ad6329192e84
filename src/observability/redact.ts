/**
 * Redaction of secrets anywhere in a logged object: keys that name a credential and
 * values that look like one (EKS tokens, bearer headers, JWTs, AWS secret keys).
 */

/** Replacement text for a redacted value. */
export const REDACTED = '[REDACTED]';

const SECRET_KEY = /(token|secret|password|passwd|authorization|credential|session_?key|private_?key|api_?key|^cookie$|^x-amz-security-token$|^x-amz-signature$|^external_?id$)/i;
// Keys that contain "token" but hold no secret (counts, ids of files, page tokens).
const SAFE_KEY = /^(token_file|tokens?_minted|next_?token|next_page_token|nextToken|tokenCount|token_errors)$/i;

const SECRET_VALUE: readonly RegExp[] = [
  /k8s-aws-v1\.[A-Za-z0-9_-]+/g,
  /\b[Bb]earer\s+[A-Za-z0-9._~+/=-]+/g,
  /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+/g,
  /X-Amz-(Signature|Security-Token|Credential)=[^&\s"]+/g,
];

/** Whether a key names a secret. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key) && !SAFE_KEY.test(key);
}

/** Removes secret-looking substrings from free text (error messages, URLs). */
export function redactText(text: string): string {
  let out = text;
  for (const pattern of SECRET_VALUE) out = out.replace(pattern, REDACTED);
  return out;
}

/** A deep copy of `value` with secrets replaced; cycles and depth are bounded. */
export function redact(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === 'string') return redactText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth > 12 || seen.has(value)) return '[…]';
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1, seen));
  if (value instanceof Error) {
    const out: Record<string, unknown> = {type: value.name, message: redactText(value.message)};
    if (value.stack) out['stack'] = redactText(value.stack);
    for (const [k, v] of Object.entries(value)) out[k] = isSecretKey(k) ? REDACTED : redact(v, depth + 1, seen);
    return out;
  }
  if (value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] = isSecretKey(k) && v !== undefined && v !== null && v !== '' ? REDACTED : redact(v, depth + 1, seen);
  }
  return out;
}
