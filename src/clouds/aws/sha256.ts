/**
 * The SHA-256 / HMAC-SHA-256 the AWS clients sign requests with (the clients' `sha256` option).
 * Same algorithm, same bytes as the SDK's default (@smithy/hash-node); two costs removed:
 *
 * - On Node 24 `createHmac` with a Buffer key first runs two failing brand checks (KeyObject,
 *   CryptoKey) that cost ~20 µs, five times the HMAC, and making it a KeyObject first
 *   (`createSecretKey`) costs as much again; a request's signing key is a fresh buffer on every
 *   call, used once. HMACs under binary keys are computed here as RFC 2104 defines them, with two
 *   SHA-256 hashes (`H((K ^ opad) || H((K ^ ipad) || data))`), which needs neither.
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
import {createHash, createHmac, type Hash, type Hmac} from 'node:crypto';

type SourceData = string | ArrayBuffer | ArrayBufferView;

/** Derivation steps remembered (~400 bytes each with the key object); the working set is a few per (account, region) in flight. */
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

/** SHA-256 block size: HMAC pads its key to it. */
const BLOCK = 64;

/** HMAC-SHA-256 under a binary key (RFC 2104), without Node's key-type checks. */
class BinaryKeyHmac {
  readonly #outerKey: Buffer;
  readonly #inner: Hash;

  constructor(key: Uint8Array) {
    // A key longer than a block is hashed first; a shorter one is padded with zeros.
    const k = key.byteLength > BLOCK ? createHash('sha256').update(key).digest() : key;
    const inner = Buffer.alloc(BLOCK, 0x36);
    const outer = Buffer.alloc(BLOCK, 0x5c);
    for (let i = 0; i < k.byteLength; i++) {
      inner[i] = 0x36 ^ (k[i] as number);
      outer[i] = 0x5c ^ (k[i] as number);
    }
    this.#outerKey = outer;
    this.#inner = createHash('sha256').update(inner);
  }

  update(data: Uint8Array): this {
    this.#inner.update(data);
    return this;
  }

  digest(): Buffer {
    return createHash('sha256').update(this.#outerKey).update(this.#inner.digest()).digest();
  }
}

/** A running HMAC under `secret`: Node's for a string key (its fast path, UTF-8 as the SDK encodes it), RFC 2104 for bytes. */
function hmacOf(secret: SourceData): Hmac | BinaryKeyHmac {
  return typeof secret === 'string' ? createHmac('sha256', secret) : new BinaryKeyHmac(bytesOf(secret));
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

/** SHA-256, or HMAC-SHA-256 when constructed with a secret; the SDK's `Checksum` interface. */
export class NodeSha256 {
  readonly #secret: SourceData | undefined;
  readonly #memoKey: string | undefined;
  #hash: Hash | Hmac | BinaryKeyHmac | undefined;
  /** The only data so far, held back while it may still be answered from the memo. */
  #held: Uint8Array | undefined;
  #updates = 0;

  constructor(secret?: SourceData) {
    this.#secret = secret;
    this.#memoKey = memoKeyOf(secret);
  }

  /** Adds data; strings are UTF-8 (the SDK's default encoding). */
  update(data: SourceData, encoding?: 'utf8' | 'ascii' | 'latin1' | 'binary'): void {
    const bytes = typeof data === 'string' ? Buffer.from(data, encoding ?? 'utf8') : bytesOf(data);
    this.#updates++;
    const plain = this.#secret === undefined || this.#secret === '';
    if (this.#updates === 1 && (this.#memoKey !== undefined || plain) && bytes.byteLength <= MEMO_MAX_DATA) {
      this.#held = bytes;
      return;
    }
    this.#flush().update(bytes);
  }

  /** The digest of everything added since construction or the last reset. */
  digest(): Promise<Uint8Array> {
    if (this.#held !== undefined && this.#updates === 1 && this.#memoKey !== undefined) {
      const name = `${this.#memoKey}\u0000${Buffer.from(this.#held).toString('latin1')}`;
      let out = memo.get(name);
      if (out) {
        // Most recently used last: Map order is the LRU order.
        memo.delete(name);
      } else {
        // A copy of its own: a remembered key must not pin a larger shared buffer.
        out = new Uint8Array(hmacOf(this.#secret ?? '').update(this.#held).digest());
        derivedIds.set(out, nextDerivedId++);
        if (memo.size >= MEMO_SIZE) memo.delete(memo.keys().next().value as string);
      }
      memo.set(name, out);
      return Promise.resolve(out);
    }
    if (this.#held !== undefined && this.#updates === 1) {
      // A plain hash of one small piece of data (the memo key is undefined only without a secret).
      const name = Buffer.from(this.#held).toString('latin1');
      let out = plainMemo.get(name);
      if (out) plainMemo.delete(name);
      else {
        out = toBytes(createHash('sha256').update(this.#held).digest());
        if (plainMemo.size >= PLAIN_MEMO_SIZE) plainMemo.delete(plainMemo.keys().next().value as string);
      }
      plainMemo.set(name, out);
      // A copy per call: the caller owns what it is given.
      return Promise.resolve(new Uint8Array(out));
    }
    return Promise.resolve(toBytes(this.#flush().digest()));
  }

  /** Starts over with the same secret. */
  reset(): void {
    this.#hash = undefined;
    this.#held = undefined;
    this.#updates = 0;
  }

  /** The running hash, with any held-back data added. */
  #flush(): Hash | Hmac | BinaryKeyHmac {
    this.#hash ??= this.#secret === undefined || this.#secret === '' ? createHash('sha256') : hmacOf(this.#secret);
    if (this.#held !== undefined) {
      this.#hash.update(this.#held);
      this.#held = undefined;
    }
    return this.#hash;
  }
}

function toBytes(out: Buffer): Uint8Array {
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}
