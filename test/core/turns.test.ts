// TurnGate (src/core/turns.ts): list pages' work released a few per turn of the event loop, so
// I/O that arrives meanwhile (the next page of a walk) is not queued behind a whole burst.
import {describe, expect, it} from 'vitest';
import {TurnGate} from '../../src/core/turns.ts';

describe('TurnGate', () => {
  it('rejects a perTurn that is not an integer >= 1', () => {
    expect(() => new TurnGate(0)).toThrow('Expected `perTurn` to be an integer >= 1, got 0');
  });

  it('releases waiters in order, at most perTurn per turn, letting an immediate queued meanwhile run between turns', async () => {
    const gate = new TurnGate(2);
    const order: string[] = [];
    const waits = [0, 1, 2, 3, 4].map((i) => gate.turn().then(() => order.push(`page ${i}`)));
    // Queued after the first turn was scheduled: it runs after that turn's two pages, before the rest.
    setImmediate(() => order.push('walk page'));
    await Promise.all(waits);
    expect(order).toEqual(['page 0', 'page 1', 'walk page', 'page 2', 'page 3', 'page 4']);
  });

  it('serves waiters that come after the queue ran dry', async () => {
    const gate = new TurnGate(1);
    await gate.turn();
    const order: number[] = [];
    await Promise.all([gate.turn().then(() => order.push(1)), gate.turn().then(() => order.push(2))]);
    expect(order).toEqual([1, 2]);
  });
});
