/**
 * The flag parsing every command starts with, written once: node:util `parseArgs` in strict
 * mode, and an unknown or malformed flag turned into a usage error (exit code 2) naming the command.
 */
import {parseArgs, type ParseArgsOptionsConfig} from 'node:util';
import {errorMessage, InputError} from '../core/errors.ts';
import {usageError} from './common.ts';
import type {CliIo} from './io.ts';

/** What parseArgs returns for these options (typed values, positionals when allowed). */
export type ParsedFlags<O extends ParseArgsOptionsConfig, P extends boolean> = ReturnType<typeof parseArgs<{args: string[]; options: O; strict: true; allowPositionals: P}>>;

/** Parses `argv` strictly; a bad flag throws an InputError carrying parseArgs' one-line message ("Unknown option '--foo'"). */
export function flagsOf<const O extends ParseArgsOptionsConfig, const P extends boolean = false>(argv: readonly string[], options: O, allowPositionals?: P): ParsedFlags<O, P> {
  try {
    return parseArgs({args: [...argv], options, strict: true, allowPositionals: (allowPositionals ?? false) as P});
  } catch (error) {
    throw new InputError(errorMessage(error));
  }
}

/**
 * Parses `argv` strictly, or prints `kube-discovery <command>: <problem><hint>` and returns exit
 * code 2: callers do `if (typeof flags === 'number') return flags;`.
 */
export function parseFlags<const O extends ParseArgsOptionsConfig, const P extends boolean = false>(
  io: CliIo,
  command: string,
  argv: readonly string[],
  options: O,
  settings: {readonly allowPositionals?: P; readonly hint?: string} = {},
): ParsedFlags<O, P> | number {
  try {
    return flagsOf(argv, options, settings.allowPositionals);
  } catch (error) {
    return usageError(io, command, `${errorMessage(error)}${settings.hint ?? ''}`);
  }
}
