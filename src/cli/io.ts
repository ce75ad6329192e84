/** What a CLI command may touch of the outside world; tests pass their own. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Whether stdout is a terminal (table output by default). */
  readonly isTty: boolean;
  /** Whether stderr is a terminal (`once` logs there: human-readable lines then, like `start`). */
  readonly isStderrTty?: boolean;
}

/** The process's own streams and environment. */
export const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  isTty: Boolean(process.stdout.isTTY),
  isStderrTty: Boolean(process.stderr.isTTY),
};

/** A CLI sub-command: parses its own argv and returns the exit code. */
export type Command = (argv: readonly string[], io: CliIo) => Promise<number>;
