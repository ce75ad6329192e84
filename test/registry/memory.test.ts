import {describe, expect, it} from 'vitest';
import {systemClock} from '../../src/core/clock.ts';
import {MemoryBackend} from '../../src/registry/memory.ts';
import {backendContract} from './contract.ts';

backendContract('memory', async (clock) => ({backend: new MemoryBackend({clock: clock ?? systemClock})}));

describe('memory backend compareAndDelete', () => {
  it('removes an entry only while it holds the expected value and lease', async () => {
    const backend = new MemoryBackend({clock: systemClock});
    const lease = await backend.grantLease(60_000);
    const other = await backend.grantLease(60_000);
    await backend.put('writers/g', 'mine', {lease});
    const theirs = await backend.put('writers/g', 'theirs', {lease: other});
    expect(await backend.compareAndDelete('writers/g', {value: 'mine', lease: lease.id})).toBe(false);
    expect(await backend.compareAndDelete('writers/g', {value: 'theirs', lease: lease.id})).toBe(false);
    expect(await backend.get('writers/g')).toEqual(theirs);
    expect(await backend.compareAndDelete('writers/g', {value: 'theirs', lease: other.id})).toBe(true);
    expect(await backend.get('writers/g')).toBeUndefined();
    await backend.close();
  });
});
