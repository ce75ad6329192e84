/**
 * The SHA-256 / HMAC-SHA-256 the AWS clients sign requests with (the clients' `sha256` option).
 * Same algorithm, same bytes as the SDK's default (@smithy/hash-node); two costs removed:
 *
 * - On Node 24 `createHmac` with a Buffer key first runs two failing brand checks (KeyObject,
 *   CryptoKey) that cost ~20–30 µs, five to ten times the HMAC; `createSecretKey` does not run
 *   them. So a binary key becomes a KeyObject first (35 µs → 5–10 µs an HMAC, measured here), and
 *   a key derived here (the signing keys, which SigV4 reuses call after call) becomes one only
 *   once: ~60 ms of a 2,000-describe first cycle's CPU. Plain hashes are one-shot (`crypto.hash`,
 *   no stream object per hash).
 * - The payload hash of a request whose body is small and the same every time (the first page of
 *   `GetResources`) is remembered, in a small LRU of its own.
 * - SigV4 derives a signing key per (credentials, day, region, service) with four HMACs, plus one
 *   for the key of its cache, which holds 50 keys: with more than 50 (account, region, service)
 *   in flight — an organization of hundreds of accounts — it misses on nearly every request,
 *   ~130 µs of CPU each. Here HMACs of short data under a string key or a key derived here
 *   (exactly the derivation steps, never the signature over a request) are remembered in a
 *   bounded LRU, so the steps are computed once per (account, region, service) and day.
 *
 * The LRU holds secrets-derived values in memory only, as the SDK's own cache does; nothing
 * here is logged or exposed.
 */
import {createHmac, createSecretKey, hash, type KeyObject} from 'node:crypto';

type SourceData = string | ArrayBuffer | ArrayBufferView;

/** Derivation steps remembered (~200 bytes each); the working set is a few per (account, region) in flight. */
const MEMO_SIZE = 4_096;
/** Longest data whose HMAC is remembered: dates, regions, services, access key ids; a SigV4 string to sign is at least 133 bytes. */
const MEMO_MAX_DATA = 128;

/** Plain SHA-256 digests of small data remembered (request bodies repeated call after call). */
const PLAIN_MEMO_SIZE = 64;
const plainMemo = new Map<string, Uint8Array>();
// Identity of each remembered derivation result, so HMACs keyed by it can be remembered too.
const derivedIds = new WeakMap<Uint8Array, number>();
let nextDerivedId = 0;
const memo = new Map<string, Uint8Array>();

// A KeyObject per derived key that signed something (the signing keys): made on first use, gone
// with the key once neither this file's memo nor the SDK's signing-key cache holds it.
const derivedKeyObjects = new WeakMap<Uint8Array, KeyObject>();

/** HMAC-SHA-256 of `data` under `secret` (a string key is UTF-8, as the SDK encodes it). */
function hmacOf(secret: SourceData, data: Uint8Array): Buffer {
  return createHmac('sha256', typeof secret === 'string' ? secret : keyOf(secret)).update(data).digest();
}

/**
 * A binary key as createHmac takes it fastest: a KeyObject (a copy of the bytes), made once for
 * a key derived here. The signing-key cache of lean-sdk.ts hands the signer a fresh copy of a
 * remembered key per call: that one becomes a KeyObject per call, still 4× cheaper than the raw bytes.
 */
function keyOf(secret: ArrayBuffer | ArrayBufferView): KeyObject | Uint8Array {
  if (!(secret instanceof Uint8Array) || !derivedIds.has(secret)) {
    const bytes = bytesOf(secret);
    // Node refuses a KeyObject of no bytes; HMAC under an empty key is still defined.
    return bytes.byteLength === 0 ? bytes : createSecretKey(bytes);
  }
  let key = derivedKeyObjects.get(secret);
  if (key === undefined) {
    // A copy is imported: the KeyObject never changes, whatever happens to the bytes.
    key = createSecretKey(Buffer.from(secret));
    derivedKeyObjects.set(secret, key);
  }
  return key;
}

function bytesOf(data: ArrayBuffer | ArrayBufferView): Uint8Array {
  return ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data);
}

/** The memo's name for a key, or undefined when HMACs under it are not remembered. */
function memoKeyOf(secret: SourceData | undefined): string | undefined {
  if (typeof secret === 'string') return secret === '' ? undefined : `s${secret}`;
  if (secret instanceof Uint8Array) {
    const id = derivedIds.get(secret);
    return id === undefined ? undefined : `d${id}`;
  }
  return undefined;
}

/**
 * SHA-256, or HMAC-SHA-256 when constructed with a secret; the SDK's `Checksum` interface. The
 * data is held until `digest` and hashed in one call (no stream object per hash): what the
 * clients hash is small (a request's canonical form, a JSON body, derivation steps).
 */
export class NodeSha256 {
  readonly #secret: SourceData | undefined;
  readonly #memoKey: string | undefined;
  #chunks: Uint8Array[] = [];

  constructor(secret?: SourceData) {
    this.#secret = secret;
    this.#memoKey = memoKeyOf(secret);
  }

  /** Adds data; strings are UTF-8 (the SDK's default encoding). */
  update(data: SourceData, encoding?: 'utf8' | 'ascii' | 'latin1' | 'binary'): void {
    this.#chunks.push(typeof data === 'string' ? Buffer.from(data, encoding ?? 'utf8') : bytesOf(data));
  }

  /** The digest of everything added since construction or the last reset. */
  digest(): Promise<Uint8Array> {
    const chunks = this.#chunks;
    const plain = this.#secret === undefined || this.#secret === '';
    const only = chunks.length === 1 ? chunks[0] : undefined;
    if (only !== undefined && only.byteLength <= MEMO_MAX_DATA) {
      if (this.#memoKey !== undefined) return Promise.resolve(this.#remembered(this.#memoKey, only));
      // A copy per call: the caller owns what it is given.
      if (plain) return Promise.resolve(new Uint8Array(rememberedPlain(only)));
    }
    const data = only ?? Buffer.concat(chunks);
    return Promise.resolve(toBytes(plain ? hash('sha256', data, 'buffer') : hmacOf(this.#secret ?? '', data)));
  }

  /** Starts over with the same secret. */
  reset(): void {
    this.#chunks = [];
  }

  /** A derivation step: HMAC of short data under a string key or a remembered result, from the memo. */
  #remembered(memoKey: string, data: Uint8Array): Uint8Array {
    const name = `${memoKey}\u0000${Buffer.from(data).toString('latin1')}`;
    let out = memo.get(name);
    if (out) {
      // Most recently used last: Map order is the LRU order.
      memo.delete(name);
    } else {
      // A copy of its own: a remembered key must not pin a larger shared buffer.
      out = new Uint8Array(hmacOf(this.#secret ?? '', data));
      derivedIds.set(out, nextDerivedId++);
      if (memo.size >= MEMO_SIZE) memo.delete(memo.keys().next().value as string);
    }
    memo.set(name, out);
    return out;
  }
}

/** The plain SHA-256 of small data, from a small LRU of its own (bodies repeated call after call). */
function rememberedPlain(data: Uint8Array): Uint8Array {
  const name = Buffer.from(data).toString('latin1');
  let out = plainMemo.get(name);
  if (out) plainMemo.delete(name);
  else {
    out = toBytes(hash('sha256', data, 'buffer'));
    if (plainMemo.size >= PLAIN_MEMO_SIZE) plainMemo.delete(plainMemo.keys().next().value as string);
  }
  plainMemo.set(name, out);
  return out;
}

function toBytes(out: Buffer): Uint8Array {
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}
