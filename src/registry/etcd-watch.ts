/** An etcd watch that survives reconnects and compaction without losing or repeating events it could deliver. */
import type {Etcd3, IKeyValue, IWatchCreateRequest, IWatchResponse, Watcher as EtcdWatcher} from 'etcd3';
import type {Logger} from 'pino';
import type {WatchEvent} from './backend.ts';
import {errorMessage} from '../core/errors.ts';

/** What the watch needs from its backend. */
export interface ResumableWatchHooks {
  readonly toEvent: (kind: 'Put' | 'Delete', kv: IKeyValue) => WatchEvent;
  readonly onEvent: (event: WatchEvent) => void;
  readonly logger: Logger | undefined;
  readonly where: string;
  readonly timeoutMs: number;
  /** Told once a watch restarted from "now" is running again: the changes in between were not delivered. */
  readonly onGap?: () => void;
}

/**
 * An etcd watch that delivers every event exactly once across reconnects: it tracks the revision
 * after the last delivered event and re-subscribes from there (the library's own resume point
 * follows response headers, which can run ahead of the events actually received), and drops
 * anything at or below it.
 */
export class ResumableWatch {
  readonly #client: Etcd3;
  readonly #key: Buffer;
  readonly #hooks: ResumableWatchHooks;
  /** First revision not yet delivered; undefined until the first subscription tells us "now". */
  #next: bigint | undefined;
  #watcher: EtcdWatcher | undefined;
  #started = false;
  #closed = false;

  constructor(client: Etcd3, key: Buffer, fromRevision: string | undefined, hooks: ResumableWatchHooks) {
    this.#client = client;
    this.#key = key;
    this.#hooks = hooks;
    this.#next = fromRevision !== undefined ? BigInt(fromRevision) + 1n : undefined;
  }

  /** Subscribes; resolves once etcd confirmed the watch, rejects after `timeoutMs` without an answer. */
  async start(): Promise<void> {
    const builder = this.#client.watch().prefix(this.#key);
    if (this.#next !== undefined) builder.startRevision(this.#next.toString());
    const watcher = builder.watcher();
    this.#watcher = watcher;
    watcher.on('connecting', (req) => {
      // Re-subscribe exactly after the last event we delivered. The library emits the create
      // request it is about to send (its typings say IWatchRequest, the value is the inner one).
      if (this.#next !== undefined) (req as IWatchCreateRequest).start_revision = this.#next.toString();
    });
    watcher.on('connected', (res) => {
      this.#next ??= BigInt(res.header.revision) + 1n;
    });
    watcher.on('data', (res) => this.#deliver(res));
    watcher.on('disconnected', (err) => this.#hooks.logger?.warn({where: this.#hooks.where, err: err.message}, 'etcd watch disconnected; resuming'));
    watcher.on('error', (err) => this.#restart(err));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        void watcher.cancel();
        reject(new Error(`etcd watch at ${this.#hooks.where} failed: no answer within ${this.#hooks.timeoutMs} ms`));
      }, this.#hooks.timeoutMs);
      watcher.once('connected', () => {
        clearTimeout(timer);
        this.#started = true;
        resolve();
      });
      watcher.once('error', (err) => {
        clearTimeout(timer);
        reject(new Error(`etcd watch at ${this.#hooks.where} failed: ${err.message}`, {cause: err}));
      });
    });
  }

  #deliver(res: IWatchResponse): void {
    const from = this.#next;
    let last: bigint | undefined;
    for (const ev of res.events) {
      const rev = BigInt(ev.kv.mod_revision);
      // A revision holds several events (a lease revocation deletes many keys at once), so dedupe
      // against where this response started, not against the previous event.
      if (from !== undefined && rev < from) continue;
      last = rev;
      try {
        this.#hooks.onEvent(this.#hooks.toEvent(ev.type === 'Delete' ? 'Delete' : 'Put', ev.kv));
      } catch (err) {
        this.#hooks.logger?.error({err}, 'registry watch handler threw');
      }
    }
    if (last !== undefined) this.#next = last + 1n;
    // A progress notification (no events) is only sent to a watcher that is caught up: every
    // change up to its revision has been delivered, so a later resume can start after it.
    if (res.events.length === 0 && from !== undefined && BigInt(res.header.revision) >= from) this.#next = BigInt(res.header.revision) + 1n;
  }

  /** The server cancelled the watch (e.g. history compacted): subscribe again from now and say so. */
  #restart(err: Error): void {
    if (this.#closed || !this.#started) return;
    this.#started = false;
    this.#hooks.logger?.error(
      {where: this.#hooks.where, err: err.message, fromRevision: this.#next?.toString()},
      'etcd cancelled the registry watch; restarting it from the current revision, changes in between were not delivered',
    );
    this.#next = undefined;
    // The library already dropped the cancelled watcher; cancelling it again would confuse it.
    this.#watcher = undefined;
    void this.#resubscribe();
  }

  async #resubscribe(): Promise<void> {
    while (!this.#closed) {
      try {
        await this.start();
        if (this.#closed) await this.#watcher?.cancel().catch(() => undefined);
        // Running again from now on: a reader keeping a view lists what changed in the gap.
        else this.#hooks.onGap?.();
        return;
      } catch (err) {
        this.#hooks.logger?.warn({where: this.#hooks.where, err: errorMessage(err)}, 'etcd watch could not be restarted; retrying');
        await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
      }
    }
  }

  /** Cancels the subscription; never waits longer than `timeoutMs`. */
  async close(): Promise<void> {
    this.#closed = true;
    const watcher = this.#watcher;
    if (!watcher) return;
    // Cancelling waits for the server's confirmation; don't hang on an unreachable etcd.
    await Promise.race([watcher.cancel().catch(() => undefined), new Promise((r) => setTimeout(r, this.#hooks.timeoutMs).unref())]);
  }
}
