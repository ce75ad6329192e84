/**
 * Work released a few items per turn of the event loop. A hundred list answers arriving
 * together each queued their page's work (digest, records, the source's clusters) with its own
 * `setImmediate`: all of it ran in the one check phase after they arrived, and whatever else
 * was waiting on the loop — the next page of a management group walk or subscriptions list,
 * which every cycle waits on page after page — waited behind the whole burst (W5: each walk page
 * took 35–55 ms instead of the 20 ms round trip). Released a few at a time, the answers and
 * writes that arrive between them go first.
 */

/** Waits its turn: `turn()` resolves once the items queued before it and at most `perTurn - 1` more per loop turn have gone. */
export class TurnGate {
  readonly #perTurn: number;
  #waiting: (() => void)[] = [];
  #head = 0;
  #scheduled = false;
  readonly #pump = (): void => {
    this.#scheduled = false;
    const end = Math.min(this.#waiting.length, this.#head + this.#perTurn);
    while (this.#head < end) {
      const release = this.#waiting[this.#head] as () => void;
      this.#head++;
      release();
    }
    if (this.#head < this.#waiting.length) this.#schedule();
    else {
      this.#waiting = [];
      this.#head = 0;
    }
  };

  constructor(perTurn: number) {
    if (!Number.isInteger(perTurn) || perTurn < 1) throw new TypeError(`Expected \`perTurn\` to be an integer >= 1, got ${perTurn}`);
    this.#perTurn = perTurn;
  }

  /** Resolves on a later turn of the event loop, in the order asked. */
  turn(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#waiting.push(resolve);
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#pump);
  }
}
