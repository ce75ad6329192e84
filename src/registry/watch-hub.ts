/** In-process fan-out of registry changes for the local (memory, sqlite) backends. */
import type {WatchEvent, Watcher} from './backend.ts';
import {errorMessage} from '../core/errors.ts';

interface Subscription {
  readonly prefix: string;
  readonly onEvent: (event: WatchEvent) => void;
}

/** Delivers events to the watchers whose prefix matches, in write order. */
export class WatchHub {
  readonly #subscriptions = new Set<Subscription>();

  /** Registers a watcher; its `close` removes it. */
  subscribe(prefix: string, onEvent: (event: WatchEvent) => void): Watcher {
    const sub: Subscription = {prefix, onEvent};
    this.#subscriptions.add(sub);
    return {
      close: () => {
        this.#subscriptions.delete(sub);
        return Promise.resolve();
      },
    };
  }

  /** Sends each event to every matching watcher; a throwing watcher never fails the write that caused it. */
  emit(events: readonly WatchEvent[]): void {
    if (this.#subscriptions.size === 0) return;
    for (const event of events) {
      const key = event.type === 'put' ? event.item.key : event.key;
      for (const sub of this.#subscriptions) {
        if (!key.startsWith(sub.prefix)) continue;
        try {
          sub.onEvent(event);
        } catch (err) {
          // The write already committed; surface the bug without undoing it.
          process.emitWarning(`registry watch callback for prefix "${sub.prefix}" threw: ${errorMessage(err)}`);
        }
      }
    }
  }

  /** Drops every watcher (backend closed). */
  clear(): void {
    this.#subscriptions.clear();
  }
}
