/**
 * The SHA-256 / HMAC-SHA-256 checksum @smithy/signature-v4 signs with, plugged in through its
 * `sha256` option. It differs from @smithy/hash-node's in one way: HMAC keys become Node
 * KeyObjects once and are reused. On Node 24 creating an HMAC from raw key bytes re-imports
 * the key every time (about 5× the cost of the HMAC itself), and every presign computes HMACs
 * with the same few keys (the cached signing key, the secret access key).
 */
import {createHash, createHmac, createSecretKey, type Hash as NodeHash, type Hmac, type KeyObject} from 'node:crypto';

// Bounded: keys of identities no longer in use fall out. Held in memory only, like the
// signer's own signing-key cache.
const MAX_KEYS = 256;
const keys = new Map<string, KeyObject>();

type Source = string | ArrayBuffer | ArrayBufferView;

function bytes(data: Source): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

function keyFor(secret: Source): KeyObject {
  const raw = bytes(secret);
  const id = raw.toString('base64');
  let key = keys.get(id);
  if (!key) {
    if (keys.size >= MAX_KEYS) keys.delete(keys.keys().next().value as string);
    key = createSecretKey(raw);
    keys.set(id, key);
  }
  return key;
}

/** A smithy `Checksum`: SHA-256, or HMAC-SHA-256 when constructed with a secret. */
export class Sha256 {
  readonly #secret: Source | undefined;
  #hash: NodeHash | Hmac;

  constructor(secret?: Source) {
    this.#secret = secret;
    this.#hash = this.#fresh();
  }

  /** Adds data to the digest. */
  update(data: Source): void {
    this.#hash.update(bytes(data));
  }

  /** The digest of everything added. */
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.#hash.digest());
  }

  /** Starts over with the same key. */
  reset(): void {
    this.#hash = this.#fresh();
  }

  #fresh(): NodeHash | Hmac {
    return this.#secret === undefined ? createHash('sha256') : createHmac('sha256', keyFor(this.#secret));
  }
}
