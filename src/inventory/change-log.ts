/**
 * A bounded history of inventory changes, so a /v1/watch client that reconnects with
 * `Last-Event-ID` gets only what changed since, instead of a full snapshot. Each change
 * records the entry's name and the document it replaced (what the client last saw), not the
 * new document: the new one is read from the inventory when replaying, so the history costs
 * one reference per change and the documents it keeps alive are bounded by its capacity.
 */
import type {KubeServer} from '../../heartbeats/kube-server.ts';

/** One change: `previous` is the entry as it was before (undefined for a new entry). */
export interface LoggedChange {
  readonly id: number;
  readonly name: string;
  readonly previous: KubeServer | undefined;
}

/** A ring of the last `capacity` changes, numbered from 1 upwards. */
export class ChangeLog {
  readonly #ring: (LoggedChange | undefined)[];
  #lastId = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new TypeError(`Expected \`capacity\` to be an integer >= 1, got ${capacity}`);
    this.#ring = Array.from({length: capacity});
  }

  /** Id of the newest change (0 before the first). */
  get lastId(): number {
    return this.#lastId;
  }

  /** Records a change and returns its id. */
  append(name: string, previous: KubeServer | undefined): number {
    const id = ++this.#lastId;
    this.#ring[id % this.#ring.length] = {id, name, previous};
    return id;
  }

  /**
   * The changes after `id` up to the newest, oldest first, or undefined when the history no
   * longer reaches back that far (or `id` is from the future: another process's numbering).
   */
  since(id: number): LoggedChange[] | undefined {
    if (!Number.isInteger(id) || id < 0 || id > this.#lastId) return undefined;
    if (this.#lastId - id > this.#ring.length) return undefined;
    const out: LoggedChange[] = [];
    for (let next = id + 1; next <= this.#lastId; next++) {
      const change = this.#ring[next % this.#ring.length];
      if (change?.id !== next) return undefined;
      out.push(change);
    }
    return out;
  }
}
