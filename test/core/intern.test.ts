import {describe, expect, it} from 'vitest';
import {StringTable} from '../../src/core/intern.ts';

describe('StringTable', () => {
  it('answers every value with an equal string, before and after it starts over past its limit', () => {
    const table = new StringTable(2);
    for (const value of ['ACTIVE', 'API_AND_CONFIG_MAP', 'ACTIVE', '1.31', 'prod', 'ACTIVE']) expect(table.intern(value)).toBe(value);
  });

  it('rejects a limit that is not a positive integer', () => {
    expect(() => new StringTable(0)).toThrow('Expected limit to be an integer >= 1, got 0');
  });
});
