/** The shared collator sorts exactly as `localeCompare` does (plan items, sources, clusters keep their order). */
import {describe, expect, it} from 'vitest';
import {compareText} from '../../src/core/collate.ts';

/** A small deterministic generator: the same strings on every run. */
function* strings(count: number): Generator<string> {
  const alphabet = ['a', 'B', 'b', 'A', 'z', 'Z', '0', '9', '-', '_', '.', ' ', 'é', 'E', 'ß', 'ü', '/', ':', '\u0000', '😀'];
  let seed = 7;
  for (let i = 0; i < count; i++) {
    let text = '';
    const length = i % 9;
    for (let j = 0; j < length; j++) {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      text += alphabet[seed % alphabet.length];
    }
    yield text;
  }
}

describe('compareText', () => {
  it('orders every pair as localeCompare does', () => {
    const values = [...strings(300)];
    for (const a of values) {
      for (const b of values.slice(0, 60)) expect(Math.sign(compareText(a, b)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).toBe(Math.sign(a.localeCompare(b)));
    }
  });

  it('sorts cluster-like names into the localeCompare order', () => {
    const names = ['prod-b', 'Prod-a', 'prod_a', 'prod-a', 'dev', 'Dev', 'dev-10', 'dev-9', 'x.y', 'x-y'];
    expect([...names].sort(compareText)).toEqual([...names].sort((a, b) => a.localeCompare(b)));
  });
});
