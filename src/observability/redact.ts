/**
 * Redaction of secrets anywhere in a logged object: keys that name a credential, every
 * credential value the process holds (registered with `registerSecret` when it is read or
 * minted: static and assumed-role AWS keys, session tokens, Azure client secrets, bearer and
 * token-file tokens, the etcd password), and values that look like one wherever they appear
 * (EKS tokens, bearer and basic headers, JWTs, SigV4 signatures, AWS secret keys and session
 * tokens, private keys, secrets in query strings). This is the one redactor: logs, /v1/status,
 * `once` output, CLI errors and HTTP answers all go through it.
 */

/** Replacement text for a redacted value. */
export const REDACTED = '[REDACTED]';

const SECRET_KEY =
  /(token|secret|password|passwd|passphrase|authorization|credential|session_?key|private_?key|api_?key|access_?key_?secret|^cookie$|^set-cookie$|^x-amz-signature$|^signature$|^external_?id$|^sig$|assertion)/i;
// Keys that contain "token" or "credential" but hold no secret (counters, file names, page tokens, kinds).
const SAFE_KEY = /^(token_?file|tokens?_?minted|next_?token|next_?page_?token|token_?count|token_?errors|token_?kind|credential_?source|token_?expires_?at)$/i;

/** Secret-looking substrings of free text; `$1` keeps a leading name (`sig=`, `Bearer `). */
const SECRET_VALUE: readonly [RegExp, string][] = [
  [/k8s-aws-v1\.[A-Za-z0-9_-]+/g, REDACTED],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}/gi, `$1 ${REDACTED}`],
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g, REDACTED],
  [/(X-Amz-(?:Signature|Security-Token|Credential)=)[^&\s"']+/gi, `$1${REDACTED}`],
  // The header form, as an SDK or proxy error may echo it: `x-amz-security-token: <token>`.
  [/(x-amz-security-token["']?\s*[:=]\s*["']?)[^"'\s,&;}]+/gi, `$1${REDACTED}`],
  [/(\bSignature=)[0-9a-f]{16,}/g, `$1${REDACTED}`],
  [/([?&](?:sig|code|client_secret|client_assertion|assertion|access_token|refresh_token|id_token|password)=)[^&\s"']+/gi, `$1${REDACTED}`],
  // `name: value` / `name=value` / `"name":"value"` for credential-named fields inside text (a JSON body in an error message).
  [
    /((?:aws_)?(?:secret_?access_?key|session_?token|secret|password|client_?secret|access_?token|refresh_?token)["']?\s*[:=]\s*["']?)[^"'\s,&}]+/gi,
    `$1${REDACTED}`,
  ],
  // A kubeconfig's credential fields, as an error that quotes one shows them (YAML `token: …`,
  // `client-key-data: …`, an auth provider's `id-token`, `refresh-token`, `client-secret`); not
  // `nextToken` or `$skipToken` (the name must not follow a letter, `_` or `-`).
  [/((?<![A-Za-z0-9_-])(?:token|client-key-data|id-token|refresh-token|client-secret)["']?\s*[:=]\s*["']?)[^"'\s,&}]+/gi, `$1${REDACTED}`],
  [/(<(SecretAccessKey|SessionToken)>)[^<]*(<\/\2>)/g, `$1${REDACTED}$3`],
  // Credentials in a URL's user info (`https://user:password@host`): the host stays readable.
  [/(\b[a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"',]+@/gi, `$1${REDACTED}@`],
  // STS session tokens: long base64 starting with the serialized-token prefixes AWS uses.
  [/\b(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz|AQoDYXdz|AQoEXAMPLE)[A-Za-z0-9/+=%]{20,}/g, REDACTED],
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g, REDACTED],
];

// An AWS secret access key: exactly 40 base64 characters with mixed case, standing alone
// (after `=` too: `secret=<key>` must not survive).
const AWS_SECRET_KEY = /(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g;

/**
 * `text` with the user info of the URL it starts with hidden: everything between `://` and the
 * authority's last `@`, whatever characters a password holds (the message patterns above stop at
 * quotes and commas, which are fine in prose but not in a value quoted whole).
 */
export function hideUrlUserInfo(text: string): string {
  return text.replace(/^(\s*[a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, `$1${REDACTED}@`);
}

/** Values shorter than this are not registered: they would cut ordinary words out of messages. */
const MIN_SECRET_LENGTH = 8;
/**
 * Registered values kept at most, a safety valve only: owners retire what they replace (renewed
 * assumed-role credentials, rotated or vanished AKS tokens), so the set holds the live
 * credentials: four values per assumed role, one or two per AKS local account. At 1,000 member
 * accounts a cap of 2,048 evicted live credentials, and by-value redaction silently stopped.
 */
const MAX_SECRETS = 65_536;
/** Every registered form, in registration order (the oldest is evicted first past the cap). */
const secrets = new Set<string>();
/** Registered forms by a hash of their first MIN_SECRET_LENGTH characters, longest first. */
const byPrefix = new Map<number, string[]>();

/** A hash of the MIN_SECRET_LENGTH characters of `text` at `at`; no substring is allocated. */
function prefixHash(text: string, at: number): number {
  let h = 0;
  for (let k = 0; k < MIN_SECRET_LENGTH; k++) h = (Math.imul(h, 31) + text.charCodeAt(at + k)) | 0;
  return h;
}

function addForm(form: string): void {
  if (secrets.has(form)) return;
  secrets.add(form);
  const h = prefixHash(form, 0);
  const bucket = byPrefix.get(h);
  if (!bucket) byPrefix.set(h, [form]);
  else {
    bucket.push(form);
    bucket.sort((a, b) => b.length - a.length);
  }
  if (secrets.size > MAX_SECRETS) removeForm(secrets.values().next().value as string);
}

function removeForm(form: string): void {
  if (!secrets.delete(form)) return;
  const h = prefixHash(form, 0);
  const bucket = byPrefix.get(h);
  if (!bucket) return;
  const i = bucket.indexOf(form);
  if (i >= 0) bucket.splice(i, 1);
  if (bucket.length === 0) byPrefix.delete(h);
}

function formsOf(value: string | undefined | null): string[] {
  if (typeof value !== 'string') return [];
  const trimmed = value.trim();
  if (trimmed.length < MIN_SECRET_LENGTH) return [];
  const encoded = encodeURIComponent(trimmed);
  return encoded === trimmed ? [trimmed] : [trimmed, encoded];
}

/**
 * Registers a credential value the process holds, so it is removed from every message by value,
 * whatever its format and wherever it is echoed (plain and percent-encoded).
 */
export function registerSecret(value: string | undefined | null): void {
  for (const form of formsOf(value)) addForm(form);
}

/**
 * Forgets a credential the process no longer holds (replaced by a renewal, or its cluster
 * vanished), so the registered set stays the size of the live credentials. Pattern redaction
 * still applies to it.
 */
export function retireSecret(value: string | undefined | null): void {
  for (const form of formsOf(value)) removeForm(form);
}

/** How many values (plain and percent-encoded forms) are registered: the set's size is bounded by the live credentials. */
export function registeredSecretCount(): number {
  return secrets.size;
}

/** Environment variables that hold a credential (the AWS SDK, @azure/identity and the etcd backend read them). */
export const SECRET_ENV_VARS = [
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_SECURITY_TOKEN',
  'AZURE_CLIENT_SECRET',
  'AZURE_CLIENT_CERTIFICATE_PASSWORD',
  'AZURE_PASSWORD',
  'KUBE_DISCOVERY_ETCD_PASSWORD',
] as const;

/** Registers every credential found in `env` (and process.env). */
export function registerSecretsFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): void {
  for (const name of SECRET_ENV_VARS) {
    registerSecret(env[name]);
    registerSecret(process.env[name]);
  }
}

/** Forgets every registered value (tests). */
export function clearRegisteredSecrets(): void {
  secrets.clear();
  byPrefix.clear();
}

/**
 * Replaces every registered value in `text`, leftmost first and, at one position, the longest
 * (a value containing another is removed whole). One scan of the text with a hash lookup per
 * position, so the cost does not grow with the number of registered values.
 */
function removeRegistered(text: string): string {
  if (secrets.size === 0 || text.length < MIN_SECRET_LENGTH) return text;
  let out = '';
  let from = 0;
  const last = text.length - MIN_SECRET_LENGTH;
  for (let i = 0; i <= last; i++) {
    const bucket = byPrefix.get(prefixHash(text, i));
    if (bucket === undefined) continue;
    const hit = bucket.find((form) => text.startsWith(form, i));
    if (hit === undefined) continue;
    out += text.slice(from, i) + REDACTED;
    from = i + hit.length;
    i = from - 1;
  }
  return from === 0 ? text : out + text.slice(from);
}

function looksLikeSecretKey(candidate: string): boolean {
  return /[a-z]/.test(candidate) && /[A-Z]/.test(candidate) && /[0-9/+]/.test(candidate);
}

/** Whether a key names a secret. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key) && !SAFE_KEY.test(key);
}

/** Removes secret-looking substrings from free text (messages, error messages, URLs). */
export function redactText(text: string): string {
  let out = removeRegistered(text);
  for (const [pattern, replacement] of SECRET_VALUE) out = out.replace(pattern, replacement);
  return out.replace(AWS_SECRET_KEY, (m) => (looksLikeSecretKey(m) ? REDACTED : m));
}

/** Characters of a text redacted before its start is quoted: enough for any credential cut by the quote, not a whole error page. */
const QUOTE_SCAN = 64 * 1024;

/**
 * The first `max` characters of `text`, redacted before they are cut: a credential is redacted by
 * its whole value, so one cut in two by the quote would keep all but its last characters.
 */
export function redactedStart(text: string, max: number): string {
  return redactText(text.slice(0, QUOTE_SCAN)).slice(0, max);
}

function redactEntries(entries: Iterable<[string, unknown]>, depth: number, seen: WeakSet<object>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) {
    out[k] = isSecretKey(k) && v !== undefined && v !== null && v !== '' ? REDACTED : redact(v, depth + 1, seen);
  }
  return out;
}

/** A deep copy of `value` with secrets replaced; cycles and depth are bounded. */
export function redact(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === 'string') return redactText(value);
  if (typeof value === 'function') return undefined;
  if (value === null || typeof value !== 'object') return value;
  if (depth > 12 || seen.has(value)) return '[…]';
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1, seen));
  if (value instanceof Date) return value;
  if (value instanceof Error) {
    const out: Record<string, unknown> = {type: value.name, message: redactText(value.message)};
    if (value.stack) out['stack'] = redactText(value.stack);
    Object.assign(out, redactEntries(Object.entries(value), depth, seen));
    if (value.cause !== undefined) out['cause'] = redact(value.cause, depth + 1, seen);
    if (value instanceof AggregateError) out['errors'] = redact(value.errors, depth + 1, seen);
    return out;
  }
  if (value instanceof Map) return redactEntries([...value.entries()].map(([k, v]) => [String(k), v]), depth, seen);
  if (value instanceof Set) return [...value].map((v) => redact(v, depth + 1, seen));
  if (value instanceof URL) return redactText(value.href);
  if (typeof Headers !== 'undefined' && value instanceof Headers) return redactEntries(value.entries(), depth, seen);
  if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
  return redactEntries(Object.entries(value as Record<string, unknown>), depth, seen);
}
