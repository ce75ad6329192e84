import {describe, expect, it} from 'vitest';
import {Hash} from '@smithy/hash-node';
import {HttpRequest} from '@smithy/protocol-http';
import {SignatureV4} from '@smithy/signature-v4';
import {NodeSha256} from '../../src/clouds/aws/sha256.ts';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

async function digestOf(make: (secret?: string | Uint8Array) => {update(d: string | Uint8Array): void; digest(): Promise<Uint8Array>}, secret: string | Uint8Array | undefined, parts: (string | Uint8Array)[]): Promise<string> {
  const h = make(secret);
  for (const p of parts) h.update(p);
  return hex(await h.digest());
}

describe('NodeSha256 (the AWS clients’ sha256)', () => {
  const cases: [string, string | Uint8Array | undefined, (string | Uint8Array)[]][] = [
    ['plain hash of a string', undefined, ['GET\n/clusters\n']],
    ['plain hash of bytes in pieces', undefined, [new Uint8Array([1, 2, 3]), 'é', new Uint8Array(0)]],
    ['HMAC with a string key (non-ASCII, UTF-8 like the SDK)', 'AWS4sécret', ['20261123']],
    ['HMAC with a binary key', new Uint8Array(Array.from({length: 32}, (_, i) => (i * 37) % 256)), ['us-east-1', 'eks']],
    ['HMAC with a key that is a view into a larger buffer', new Uint8Array(Buffer.from('xxkey-bytesyy')).subarray(2, 11), ['aws4_request']],
    ['empty secret is a plain hash, as in the SDK', '', ['x']],
    ['HMAC with a binary key of exactly one block (64 bytes)', new Uint8Array(64).fill(0xa5), ['data', new Uint8Array([0, 255])]],
    ['HMAC with a binary key longer than a block (hashed first)', new Uint8Array(Array.from({length: 131}, (_, i) => i)), ['x'.repeat(200)]],
    ['HMAC with an empty binary key', new Uint8Array(0), ['abc']],
    ['HMAC with a binary key over long data in pieces', new Uint8Array(32).fill(7), ['a'.repeat(150), new Uint8Array(70).fill(1), 'z']],
  ];
  for (const [name, secret, parts] of cases) {
    it(`gives the SDK default's bytes: ${name}`, async () => {
      const ours = await digestOf((s) => new NodeSha256(s), secret, parts);
      const sdk = await digestOf((s) => new Hash('sha256', s), secret, parts);
      expect(ours).toBe(sdk);
    });
  }

  it('reuses a binary key many times with the same result, and reset starts over', async () => {
    const key = new Uint8Array(Buffer.from('0123456789abcdef0123456789abcdef'));
    const first = await digestOf((s) => new NodeSha256(s), key, ['a']);
    expect(await digestOf((s) => new NodeSha256(s), key, ['a'])).toBe(first);
    const h = new NodeSha256(key);
    h.update('garbage');
    h.reset();
    h.update('a');
    expect(hex(await h.digest())).toBe(first);
  });

  it('signs a request exactly as the SDK default does (SigV4 with a session token, many accounts)', async () => {
    const request = new HttpRequest({method: 'GET', protocol: 'https:', hostname: 'eks.eu-west-1.amazonaws.com', path: '/clusters', query: {maxResults: '100'}, headers: {host: 'eks.eu-west-1.amazonaws.com'}});
    const signingDate = new Date('2026-11-23T06:00:00Z');
    // More identities than the SDK's 50-entry signing-key cache: misses and hits both match.
    for (let i = 0; i < 60; i++) {
      const credentials = {accessKeyId: `ASIA${String(i).padStart(16, '0')}`, secretAccessKey: `secret-${i}`, sessionToken: `token-${i}`};
      const ours = new SignatureV4({service: 'eks', region: 'eu-west-1', credentials, sha256: NodeSha256});
      const sdk = new SignatureV4({service: 'eks', region: 'eu-west-1', credentials, sha256: Hash.bind(null, 'sha256')});
      const a = await ours.sign(request.clone(), {signingDate});
      const b = await sdk.sign(request.clone(), {signingDate});
      expect(a.headers['authorization']).toBe(b.headers['authorization']);
    }
  });

  it('signs request after request with the same cached signing key exactly as the SDK default does', async () => {
    const credentials = {accessKeyId: 'AKIAREUSEDSIGNINGKEY', secretAccessKey: 'secret-reused'};
    const ours = new SignatureV4({service: 'eks', region: 'us-east-2', credentials, sha256: NodeSha256});
    const sdk = new SignatureV4({service: 'eks', region: 'us-east-2', credentials, sha256: Hash.bind(null, 'sha256')});
    const signingDate = new Date('2026-11-23T07:00:00Z');
    // The first signature derives the key; the later ones sign under the remembered key's KeyObject.
    for (const name of ['alpha', 'beta', 'gamma', 'alpha']) {
      const request = new HttpRequest({method: 'GET', protocol: 'https:', hostname: 'eks.us-east-2.amazonaws.com', path: `/clusters/${name}`, headers: {host: 'eks.us-east-2.amazonaws.com'}});
      const a = await ours.sign(request.clone(), {signingDate});
      const b = await sdk.sign(request.clone(), {signingDate});
      expect(a.headers['authorization']).toBe(b.headers['authorization']);
    }
  });
});

describe('NodeSha256 remembered payload hashes', () => {
  it('hashes the same small body the same way every time, each caller getting bytes of its own', async () => {
    const body = '{"ResourceTypeFilters":["eks:cluster"],"ResourcesPerPage":100}';
    const expected = await digestOf((s) => new Hash('sha256', s), undefined, [body]);
    const first = new NodeSha256();
    first.update(body);
    const a = await first.digest();
    expect(hex(a)).toBe(expected);
    a.fill(0);
    const second = new NodeSha256();
    second.update(Buffer.from(body));
    expect(hex(await second.digest())).toBe(expected);
    // Another small body, and a long one, are not confused with it.
    expect(await digestOf((s) => new NodeSha256(s), undefined, ['{}'])).toBe(await digestOf((s) => new Hash('sha256', s), undefined, ['{}']));
    expect(await digestOf((s) => new NodeSha256(s), undefined, [body.repeat(5)])).toBe(await digestOf((s) => new Hash('sha256', s), undefined, [body.repeat(5)]));
  });
});

describe('NodeSha256 remembered derivation steps', () => {
  it('chains of short-data HMACs (as SigV4 derives keys) match the SDK, first and second time, with data split or not', async () => {
    const sdkChain = async (): Promise<string> => {
      let key: string | Uint8Array = 'AWS4secret-chain';
      for (const step of ['20261123', 'ap-south-1', 'tagging', 'aws4_request']) {
        const h: Hash = new Hash('sha256', key);
        h.update(new TextEncoder().encode(step));
        key = await h.digest();
      }
      return hex(key as Uint8Array);
    };
    const ourChain = async (): Promise<{hex: string; key: Uint8Array}> => {
      let key: string | Uint8Array = 'AWS4secret-chain';
      for (const step of ['20261123', 'ap-south-1', 'tagging', 'aws4_request']) {
        const h: NodeSha256 = new NodeSha256(key);
        h.update(new TextEncoder().encode(step));
        key = await h.digest();
      }
      return {hex: hex(key as Uint8Array), key: key as Uint8Array};
    };
    const expected = await sdkChain();
    const first = await ourChain();
    const second = await ourChain();
    expect(first.hex).toBe(expected);
    expect(second.hex).toBe(expected);
    // The derived key signs long data (not remembered) and data in two pieces (not remembered) correctly.
    const long = 'AWS4-HMAC-SHA256\n20261123T060000Z\n20261123/ap-south-1/tagging/aws4_request\n' + 'ab'.repeat(32);
    const ours = new NodeSha256(second.key);
    ours.update(long);
    const sdk = new Hash('sha256', second.key);
    sdk.update(long);
    expect(hex(await ours.digest())).toBe(hex(await sdk.digest()));
    const split = new NodeSha256(second.key);
    split.update('aws4');
    split.update('_request');
    const whole = new Hash('sha256', second.key);
    whole.update('aws4_request');
    expect(hex(await split.digest())).toBe(hex(await whole.digest()));
  });
});
