/**
 * The duplicate-key scanner of listing answers: JSON.parse keeps the last of two equal keys, so
 * `{"clusters":["a"],"clusters":[]}` would read as an empty listing. Only the top-level object
 * (and the objects named in `within`) is judged; what a record holds is left alone.
 */
import {describe, expect, it} from 'vitest';
import {duplicateKey, duplicateKeyProblem} from '../../src/core/json-keys.ts';

describe('duplicateKey', () => {
  it('names a top-level key given twice', () => {
    expect(duplicateKey('{"clusters":["a","b"],"clusters":[]}')).toBe('clusters');
    expect(duplicateKey('{"clusters":["a"],"nextToken":"t2","nextToken":null}')).toBe('nextToken');
    expect(duplicateKey(' \n{ "value" : [ ] , "nextLink" : "x" , "value" : [ {"id":"a"} ] }\t')).toBe('value');
  });

  it('finds nothing in a well-formed answer', () => {
    expect(duplicateKey('{"clusters":["a","b"],"nextToken":"t2"}')).toBeUndefined();
    expect(duplicateKey('{}')).toBeUndefined();
    expect(duplicateKey('{"a":1,"b":-2.5e3,"c":true,"d":null,"e":false,"f":"x"}')).toBeUndefined();
  });

  it('leaves nested objects and arrays alone, even with the same keys inside', () => {
    // Two tags of one name in one cluster's record are that cluster's data, not the listing's.
    expect(duplicateKey('{"value":[{"tags":{"env":"a","env":"b"},"value":1,"value":2}],"nextLink":null}')).toBeUndefined();
    expect(duplicateKey('{"a":{"b":{"c":[{"a":1},{"a":2}]}},"b":[[{"a":1}],{"a":{}}]}')).toBeUndefined();
    // A nested duplicate does not hide a top-level one after it.
    expect(duplicateKey('{"a":{"x":1,"x":2},"b":[{"y":[1,{"z":"}"}]}],"a":3}')).toBe('a');
  });

  it('reads keys as keys, not values: a value spelling a key, braces and quotes inside strings', () => {
    expect(duplicateKey('{"clusters":["clusters","nextToken"],"nextToken":"clusters"}')).toBeUndefined();
    expect(duplicateKey('{"a":"}{\\"a\\":1,","b":"[\\"","c":"\\\\"}')).toBeUndefined();
    expect(duplicateKey('{"a":"\\\\","a":1}')).toBe('a');
    expect(duplicateKey('{"a":"x\\"","b":"\\\\\\"}","a":1}')).toBe('a');
    // An AKS tag named `value` is a nested key.
    expect(duplicateKey('{"value":[{"name":"a1","tags":{"value":"x","nextLink":"y"}}]}')).toBeUndefined();
  });

  it('compares keys after decoding their escapes', () => {
    expect(duplicateKey('{"clusters":["a"],"clu\\u0073ters":[]}')).toBe('clusters');
    expect(duplicateKey('{"next\\u0054oken":"t","nextToken":null}')).toBe('nextToken');
    expect(duplicateKey('{"a\\/b":1,"a/b":2}')).toBe('a/b');
    expect(duplicateKey('{"a\\"b":1,"a\\\\b":2}')).toBeUndefined();
    expect(duplicateKey('{"é":1,"\\u00e9":2}')).toBe('é');
    expect(duplicateKey('{"😀":1,"\\ud83d\\ude00":2}')).toBe('😀');
  });

  it('is case-sensitive, as JSON is', () => {
    expect(duplicateKey('{"Value":[],"value":[]}')).toBeUndefined();
  });

  it('judges the objects named in `within` too, at the top level only', () => {
    const within = ['metadata'];
    expect(duplicateKey('{"items":[],"metadata":{"continue":"c1","continue":""}}', within)).toBe('metadata.continue');
    expect(duplicateKey('{"items":[],"metadata":{"continue":"c1","resourceVersion":"5"}}', within)).toBeUndefined();
    expect(duplicateKey('{"items":[{"metadata":{"name":"a","name":"b"}}],"metadata":{}}', within)).toBeUndefined();
    expect(duplicateKey('{"items":[],"metadata":null,"kind":"x"}', within)).toBeUndefined();
    expect(duplicateKey('{"metadata":{"a":{"continue":1,"continue":2}},"metadata":{}}', within)).toBe('metadata');
    expect(duplicateKey('{"Organization":{"Id":"o-1","Arn":"x","Id":"o-2"}}', ['Organization'])).toBe('Organization.Id');
  });

  it('leaves what is not a JSON object to the parser (no verdict)', () => {
    for (const text of ['', '[]', '[{"a":1,"a":2}]', '"x"', 'null', '<html>', '{"a":1', '{"a" 1,"a":2}', '{"a":"unterminated', '{a:1,a:2}']) {
      expect(duplicateKey(text), text).toBeUndefined();
    }
  });

  it('reads a large answer in one pass', () => {
    const records = Array.from({length: 2_000}, (_, i) => `{"ResourceARN":"arn:aws:eks:us-east-1:1:cluster/c${i}","Tags":[{"Key":"env","Value":"p\\"r{o}d"}]}`).join(',');
    expect(duplicateKey(`{"ResourceTagMappingList":[${records}],"PaginationToken":""}`)).toBeUndefined();
    expect(duplicateKey(`{"ResourceTagMappingList":[${records}],"PaginationToken":"","PaginationToken":"x"}`)).toBe('PaginationToken');
  });
});

describe('duplicateKeyProblem', () => {
  it('names the key, quoted and cut short', () => {
    expect(duplicateKeyProblem('clusters')).toBe('malformed answer: duplicate key "clusters"');
    expect(duplicateKeyProblem('k'.repeat(500)).length).toBeLessThan(120);
    expect(duplicateKeyProblem('a\nb')).toBe('malformed answer: duplicate key "a\\nb"');
  });
});
