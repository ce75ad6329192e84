/**
 * The SHA-256 / HMAC-SHA-256 the AWS clients sign requests with (the clients' `sha256` option).
 * Same algorithm, same bytes as the SDK's default (@smithy/hash-node); two costs removed:
 *
 * - On Node 24 `createHmac` with a Buffer key first runs two failing brand checks (KeyObject,
 *   CryptoKey) that cost ~20 µs, five times the HMAC. Binary keys become KeyObjects here
 *   (`createSecretKey` skips those checks), converted once per key object.
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
import {createHash, createHmac, createSecretKey, type Hash, type Hmac, type KeyObject} from 'node:crypto';

type SourceData = string | ArrayBuffer | ArrayBufferView;

/** Derivation steps remembered (~400 bytes each with the key object); the working set is a few per (account, region) in flight. */
const MEMO_SIZE = 4_096;
/** Longest data whose HMAC is remembered: dates, regions, services, access key ids; a SigV4 string to sign is at least 133 bytes. */
const MEMO_MAX_DATA = 128;

// Keys the SDK reuses (its cached signing keys, our remembered derivations) are the same object each time.
const keyObjects = new WeakMap<object, KeyObject>();
// Identity of each remembered derivation result, so HMACs keyed by it can be remembered too.
const derivedIds = new WeakMap<Uint8Array, number>();
let nextDerivedId = 0;
const memo = new Map<string, Uint8Array>();

function keyOf(secret: SourceData): string | KeyObject {
  // A string key takes Node's fast path as it is (UTF-8, as the SDK's default encodes it).
  if (typeof secret === 'string') return secret;
  let key = keyObjects.get(secret);
  if (!key) {
    key = createSecretKey(bytesOf(secret));
    keyObjects.set(secret, key);
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

/** SHA-256, or HMAC-SHA-256 when constructed with a secret; the SDK's `Checksum` interface. */
export class NodeSha256 {
  readonly #secret: SourceData | undefined;
  readonly #memoKey: string | undefined;
  #hash: Hash | Hmac | undefined;
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
    if (this.#updates === 1 && this.#memoKey !== undefined && bytes.byteLength <= MEMO_MAX_DATA) {
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
        out = new Uint8Array(createHmac('sha256', keyOf(this.#secret ?? '')).update(this.#held).digest());
        derivedIds.set(out, nextDerivedId++);
        if (memo.size >= MEMO_SIZE) memo.delete(memo.keys().next().value as string);
      }
      memo.set(name, out);
      return Promise.resolve(out);
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
  #flush(): Hash | Hmac {
    this.#hash ??= this.#secret === undefined || this.#secret === '' ? createHash('sha256') : createHmac('sha256', keyOf(this.#secret));
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
