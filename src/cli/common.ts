/** Helpers every CLI command shares: usage errors and loading the config with exit code 2 on problems. */
import {errorMessage, InputError} from '../core/errors.ts';
import {ConfigError, loadConfigFile} from '../config/load.ts';
import type {Config} from '../config/schema.ts';
import {configWarnings} from '../config/warnings.ts';
import {redactText, registerSecretsFromEnv} from '../observability/redact.ts';
import type {CliIo} from './io.ts';

/** Prints a usage problem and returns exit code 2. */
export function usageError(io: CliIo, command: string, message: string): number {
  io.stderr(`kube-discovery ${command}: ${message}\n`);
  return 2;
}

/** Loads the config named by `-c`; prints its warnings, or every problem and returns 2 when it is missing or invalid. */
export async function withConfig(io: CliIo, command: string, path: string | undefined, run: (config: Config) => Promise<number>): Promise<number> {
  if (!path) return usageError(io, command, 'missing -c FILE (the config file)');
  let config: Config;
  try {
    config = await loadConfigFile(path);
  } catch (error) {
    if (error instanceof ConfigError) {
      io.stderr(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  // Said before anything runs, so an ignored Teleport setting or a missing group is never silent.
  for (const warning of configWarnings(config)) io.stderr(`${path}: warning: ${warning}\n`);
  try {
    return await run(config);
  } catch (error) {
    if (error instanceof InputError) return usageError(io, command, error.message);
    throw error;
  }
}


/**
 * An error as one line for the terminal, through the one redactor: credentials of the
 * environment by value (plain and percent-encoded), and anything that looks like a secret.
 */
export function oneLine(error: unknown, io: CliIo): string {
  registerSecretsFromEnv(io.env);
  const text = redactText(errorMessage(error).replace(/\s*\n\s*/g, ' ').trim());
  return text || 'unknown error';
}
