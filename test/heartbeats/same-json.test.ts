import {describe, expect, it} from 'vitest';
import {canonicalJson, sameJson} from '../../heartbeats/kube-server.ts';

// sameJson answers canonicalJson(a) === canonicalJson(b) without serialising equal documents.
const pairs: [string, unknown, unknown][] = [
  ['same document, keys in another order', {metadata: {labels: {b: '1', a: '2'}}, spec: {version: '1.30'}}, {spec: {version: '1.30'}, metadata: {labels: {a: '2', b: '1'}}}],
  ['a changed label value', {labels: {a: '1'}}, {labels: {a: '2'}}],
  ['an added label', {labels: {a: '1'}}, {labels: {a: '1', b: '2'}}],
  ['a removed label', {labels: {a: '1', b: '2'}}, {labels: {a: '1'}}],
  ['a key holding undefined is absent', {a: 1, b: undefined}, {a: 1}],
  ['undefined vs absent vs function in an object', {a: 1, f: () => 0}, {a: 1, g: undefined}],
  ['undefined and null in an array both write null', [undefined, 1], [null, 1]],
  ['undefined vs null field', {a: undefined}, {a: null}],
  ['a missing field vs null', undefined, null],
  ['both missing', undefined, undefined],
  ['NaN and null both write null', [Number.NaN], [null]],
  ['-0 and 0 write 0', {n: -0}, {n: 0}],
  ['array order matters', [1, 2], [2, 1]],
  ['array vs object with index keys', [1], {0: 1}],
  ['a long CA string, same and different', {ca: 'LS0t'.repeat(400)}, {ca: `${'LS0t'.repeat(400)}`}],
  ['a long CA string, one character off', {ca: 'LS0t'.repeat(400)}, {ca: `${'LS0t'.repeat(399)}LS0u`}],
  ['toJSON is honoured', {when: new Date(0)}, {when: '1970-01-01T00:00:00.000Z'}],
  ['nested change deep down', {a: [{b: {c: [1, {d: 'x'}]}}]}, {a: [{b: {c: [1, {d: 'y'}]}}]}],
];

describe('sameJson', () => {
  it.each(pairs)('%s: agrees with comparing canonical JSON', (_name, a, b) => {
    expect(sameJson(a, b)).toBe(canonicalJson(a) === canonicalJson(b));
    expect(sameJson(b, a)).toBe(canonicalJson(a) === canonicalJson(b));
  });

  it('tells a change from none on the documents a cycle compares', () => {
    expect(sameJson({labels: {region: 'eastus', env: 'prod'}}, {labels: {env: 'prod', region: 'eastus'}})).toBe(true);
    expect(sameJson({labels: {region: 'eastus'}}, {labels: {region: 'westus'}})).toBe(false);
    expect(sameJson({endpoint: undefined}, {endpoint: 'https://x:443'})).toBe(false);
  });
});
