/**
 * Redaction by value at organization scale: every credential the process holds is removed from
 * messages by value, however many there are, and renewed or vanished credentials are retired so
 * the registered set stays the size of what is live.
 */
import {randomBytes} from 'node:crypto';
import {afterAll, afterEach, beforeAll, describe, expect, it, vi} from 'vitest';
import {AwsCredentialProviders} from '../../src/credentials/aws-credentials.ts';
import {AksLocalAccounts} from '../../src/credentials/aks-local-accounts.ts';
import {clearRegisteredSecrets, REDACTED, redactText, registeredSecretCount, registerSecret, retireSecret} from '../../src/observability/redact.ts';
import {startFakeAws, type FakeAws} from '../fakes/aws-server.ts';
import {FakeAwsWorld} from '../fakes/aws-world.ts';
import {FakeClock} from '../helpers/fake-clock.ts';
import {ROUND_TRIP} from '../helpers/wait.ts';

/** A credential no pattern recognises (lower case and digits only), so only by-value redaction can remove it. */
const opaque = (i: number): string => `opaque${i}x${randomBytes(12).toString('hex')}`;

/** The reference semantics: leftmost match first, the longest value at one position. */
function reference(text: string, values: readonly string[]): string {
  let out = '';
  for (let i = 0; i < text.length; ) {
    const hit = values.filter((v) => text.startsWith(v, i)).sort((a, b) => b.length - a.length)[0];
    if (hit) {
      out += REDACTED;
      i += hit.length;
    } else out += text[i++];
  }
  return out;
}

afterEach(() => clearRegisteredSecrets());

describe('redaction by value', () => {
  it('removes every one of 5,000 registered credentials (1,000 accounts hold 4,000 forms), the first as well as the last', () => {
    const values = Array.from({length: 5_000}, (_, i) => opaque(i));
    for (const v of values) registerSecret(v);

    for (const i of [0, 1, 2_047, 2_048, 4_999]) {
      const message = `AssumeRole answered: key ${values[i]} was refused`;
      expect(redactText(message)).toBe(`AssumeRole answered: key ${REDACTED} was refused`);
    }
  });

  it('removes the plain and the percent-encoded form, and leaves text without a credential unchanged', () => {
    const secret = 'a/b+c=d-opaque-value';
    registerSecret(secret);
    expect(redactText(`plain ${secret} encoded ${encodeURIComponent(secret)} end`)).toBe(`plain ${REDACTED} encoded ${REDACTED} end`);
    const clean = 'cluster prod in 111111111111/us-east-1 failed: ThrottlingException';
    expect(redactText(clean)).toBe(clean);
  });

  it('matches the reference on random text with overlapping, nested and adjacent values', () => {
    const alphabet = 'abcd';
    const rand = (n: number): string => Array.from({length: n}, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
    for (let round = 0; round < 200; round++) {
      clearRegisteredSecrets();
      const values = Array.from({length: 1 + Math.floor(Math.random() * 6)}, () => rand(8 + Math.floor(Math.random() * 6)));
      for (const v of values) registerSecret(v);
      const text = rand(200);
      expect(redactText(text), `values ${JSON.stringify(values)} text ${text}`).toBe(reference(text, values));
    }
  });

  it('stops removing a retired value, and the set shrinks with it', () => {
    const keep = opaque(1);
    const gone = opaque(2);
    registerSecret(keep);
    registerSecret(gone);
    expect(registeredSecretCount()).toBe(2);
    retireSecret(gone);
    expect(registeredSecretCount()).toBe(1);
    expect(redactText(`${keep} ${gone}`)).toBe(`${REDACTED} ${gone}`);
  });
});

describe('credential owners retire what they replace', () => {
  let fake: FakeAws;
  const ROLE = 'arn:aws:iam::222222222222:role/discovery';
  const BASE = {accessKeyId: 'AKIDBASE', secretAccessKey: 'base-secret-opaque'};
  // The fake STS issues expiries on the same clock the cache renews by.
  const clock = new FakeClock(Date.now());

  beforeAll(async () => {
    const world = new FakeAwsWorld({clock});
    world.addAccount('111111111111', {accessKeys: [BASE]});
    world.addAccount('222222222222', {roles: [{arn: ROLE, trust: ['111111111111']}]});
    fake = await startFakeAws({world});
  });
  afterAll(() => fake.close());

  it('assumed-role credentials: the current and the previous generation are removed by value; older ones are retired', async () => {
    const registry = new AwsCredentialProviders({env: fake.env, clock, base: () => Promise.resolve(BASE)});
    const provider = registry.provider({region: 'us-east-1', roleArn: ROLE});
    const generations = [await provider()];
    for (let renewal = 1; renewal <= 3; renewal++) {
      const previous = generations[generations.length - 1]!;
      await clock.advance(previous.expiration!.getTime() - clock.now() - 60_000);
      await provider();
      // The renewal is a real round trip to the fake STS: wait for it, not for time.
      await vi.waitFor(async () => expect((await provider()).accessKeyId).not.toBe(previous.accessKeyId), ROUND_TRIP);
      generations.push(await provider());
    }

    expect(new Set(generations.map((g) => g.accessKeyId)).size).toBe(4);
    const [, , previous, current] = generations;
    for (const live of [previous!, current!]) {
      expect(redactText(`echo ${live.secretAccessKey} ${live.sessionToken}`)).toBe(`echo ${REDACTED} ${REDACTED}`);
    }
    // Only two generations are held: the base secret (1 form) + two generations of key and token,
    // plain and percent-encoded (at most 4 forms each). Four generations kept would be up to 17.
    // (The retired ones still match the secret-key and session-token patterns.)
    expect(registeredSecretCount()).toBeLessThanOrEqual(1 + 2 * 4);
  });

  it('AKS local-account tokens: a rotated token and a vanished cluster\'s token are retired', () => {
    const accounts = new AksLocalAccounts({clock: new FakeClock(Date.now())});
    const ref = (name: string) => ({subscriptionId: '00000000-0000-0000-0000-000000000001', resourceGroup: 'rg', name});
    const first = opaque(10);
    const rotated = opaque(11);
    const other = opaque(12);
    accounts.record(ref('a'), {kind: 'token', token: first});
    accounts.record(ref('b'), {kind: 'token', token: other});
    expect(redactText(first)).toBe(REDACTED);

    accounts.record(ref('a'), {kind: 'token', token: rotated});
    expect(redactText(`${first} ${rotated}`)).toBe(`${first} ${REDACTED}`);

    accounts.forget(ref('b'));
    expect(redactText(other)).toBe(other);
    expect(registeredSecretCount()).toBe(1);
  });
});
