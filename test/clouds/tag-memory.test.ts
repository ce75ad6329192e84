// A source's remembered descriptions: a short list for the usual few clusters, a map past 16; the
// same answers either way, while clusters come and go.
import {describe, expect, it} from 'vitest';
import {TagMemory, type Remembered} from '../../src/clouds/aws/tag-reader.ts';
import type {DiscoveredCluster} from '../../src/core/types.ts';

function remembered(name: string, refreshAt = 1): Remembered {
  const cluster: DiscoveredCluster = {cloud: 'AWS', type: 'eks', name, region: 'us-east-1', account: '111111111111', tags: {}, status: 'ACTIVE', statusOk: true, sourceId: 'eks:us-east-1:111111111111'};
  return {cluster, refreshAt};
}

describe('TagMemory', () => {
  it('finds, replaces and forgets descriptions by name, below and above 16 clusters', () => {
    const memory = new TagMemory();
    expect(memory.empty).toBe(true);
    const model = new Map<string, Remembered>();
    // Grow to 40, replace some, shrink to 3, grow again: every step agrees with a plain map.
    const steps: [op: 'set' | 'delete', name: string][] = [
      ...Array.from({length: 40}, (_, i): ['set', string] => ['set', `c${i}`]),
      ...Array.from({length: 10}, (_, i): ['set', string] => ['set', `c${i * 3}`]),
      ...Array.from({length: 37}, (_, i): ['delete', string] => ['delete', `c${i}`]),
      ['delete', 'missing'],
      ...Array.from({length: 20}, (_, i): ['set', string] => ['set', `d${i}`]),
    ];
    for (const [op, name] of steps) {
      if (op === 'set') {
        const value = remembered(name, model.size);
        memory.known.set(name, value);
        model.set(name, value);
      } else {
        memory.known.delete(name);
        model.delete(name);
      }
      expect(memory.known.size).toBe(model.size);
      expect(memory.known.names().sort()).toEqual([...model.keys()].sort());
      for (const key of ['c0', 'c39', 'c38', 'd0', 'd19', 'missing']) expect(memory.known.get(key)).toBe(model.get(key));
    }
    expect(memory.empty).toBe(false);
  });

  it('lets a caller forget names while it goes through them', () => {
    const memory = new TagMemory();
    for (const name of ['a', 'b', 'c']) memory.known.set(name, remembered(name));
    for (const name of memory.known.names()) if (name !== 'b') memory.known.delete(name);
    expect(memory.known.names()).toEqual(['b']);
    memory.known.delete('b');
    expect(memory.empty).toBe(true);
    memory.denied = true;
    expect(memory.empty).toBe(false);
  });
});
