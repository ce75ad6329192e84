/**
 * Dynamic labels (`kubernetes_service.commands`): each command runs at start and then every
 * period; its trimmed output becomes a label result that the next cycle writes.
 */
import {execFile} from 'node:child_process';
import type {CommandLabel} from '../../heartbeats/kube-server.ts';
import type {Clock} from '../core/clock.ts';
import {formatDuration} from '../config/duration.ts';
import type {DynamicLabelCommand} from '../config/schema.ts';

/** Runs a command; returns its trimmed stdout. Injectable for tests. */
export type CommandRunner = (command: readonly string[], signal: AbortSignal) => Promise<string>;

const MAX_OUTPUT = 1024;

/** Runs the command with execFile (no shell), 10 s timeout, output capped. */
export const execRunner: CommandRunner = (command, signal) =>
  new Promise((resolve, reject) => {
    const [file, ...args] = command;
    if (!file) return reject(new Error('empty command'));
    execFile(file, args, {signal, timeout: 10_000, maxBuffer: 64 * 1024}, (error, stdout) => {
      if (error) reject(error);
      else resolve(stdout.trim().slice(0, MAX_OUTPUT));
    });
  });

/** Keeps dynamic label results fresh. */
export class DynamicLabels {
  readonly #commands: readonly DynamicLabelCommand[];
  readonly #clock: Clock;
  readonly #run: CommandRunner;
  readonly #onError: ((name: string, error: unknown) => void) | undefined;
  readonly #results = new Map<string, CommandLabel>();
  readonly #cancels = new Map<string, () => void>();
  readonly #abort = new AbortController();

  constructor(options: {commands: readonly DynamicLabelCommand[]; clock: Clock; run?: CommandRunner; onError?: (name: string, error: unknown) => void}) {
    this.#commands = options.commands;
    this.#clock = options.clock;
    this.#run = options.run ?? execRunner;
    this.#onError = options.onError;
  }

  /** Runs every command once and schedules the refreshes. */
  async start(): Promise<void> {
    await Promise.all(this.#commands.map((c) => this.#refresh(c)));
  }

  /** Current results by label name (empty when no command is configured). */
  current(): Record<string, CommandLabel> {
    return Object.fromEntries(this.#results);
  }

  /** Stops refreshing. */
  stop(): void {
    this.#abort.abort();
    for (const cancel of this.#cancels.values()) cancel();
  }

  async #refresh(command: DynamicLabelCommand): Promise<void> {
    if (this.#abort.signal.aborted) return;
    try {
      const result = await this.#run(command.command, this.#abort.signal);
      this.#results.set(command.name, {period: formatDuration(command.period), command: command.command, result});
    } catch (error) {
      // Keep the last good result: a flaky command must not flap the label.
      this.#onError?.(command.name, error);
    }
    if (this.#abort.signal.aborted) return;
    this.#cancels.set(command.name, this.#clock.setTimeout(() => void this.#refresh(command), command.period));
  }
}
