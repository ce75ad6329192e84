/** The one flag parser of the CLI: typed values, and a bad flag as a usage error naming the command (exit 2). */
import {describe, expect, it} from 'vitest';
import {flagsOf, parseFlags} from '../../src/cli/flags.ts';
import {InputError} from '../../src/core/errors.ts';
import {captureIo} from '../helpers/env.ts';

const OPTIONS = {config: {type: 'string', short: 'c'}, force: {type: 'boolean', default: false}, env: {type: 'string', multiple: true}} as const;

describe('parseFlags', () => {
  it('returns the flags, short and long, with defaults filled in', () => {
    const {io, stderr} = captureIo({});
    const flags = parseFlags(io, 'once', ['-c', 'a.yaml', '--env', 'A=1', '--env', 'B=2'], OPTIONS);
    if (typeof flags === 'number') throw new Error(`expected flags, got exit code ${flags}`);
    expect(flags.values).toEqual({config: 'a.yaml', force: false, env: ['A=1', 'B=2']});
    expect(stderr()).toBe('');
  });

  it('prints an unknown flag as a usage error of the command, with the hint, and returns 2', () => {
    const {io, stdout, stderr} = captureIo({});
    expect(parseFlags(io, 'ls', ['--nope'], OPTIONS, {hint: ' (see kube-discovery ls --help)'})).toBe(2);
    expect(stderr()).toMatch(/^kube-discovery ls: Unknown option '--nope'.* \(see kube-discovery ls --help\)\n$/);
    expect(stdout()).toBe('');
  });

  it('refuses a flag without its value and a stray argument unless positionals are allowed', () => {
    const {io, stderr} = captureIo({});
    expect(parseFlags(io, 'start', ['-c'], OPTIONS)).toBe(2);
    expect(stderr()).toContain("kube-discovery start: Option '-c, --config <value>' argument missing");
    expect(parseFlags(io, 'start', ['extra'], OPTIONS)).toBe(2);
    expect(stderr()).toContain("Unexpected argument 'extra'");
    const flags = parseFlags(io, 'config', ['check', '-c', 'a.yaml'], OPTIONS, {allowPositionals: true});
    if (typeof flags === 'number') throw new Error(`expected flags, got exit code ${flags}`);
    expect(flags.positionals).toEqual(['check']);
  });
});

describe('flagsOf', () => {
  it('throws an InputError carrying the parser message, for commands that report usage errors themselves', () => {
    expect(() => flagsOf(['--force=yes'], OPTIONS)).toThrow(InputError);
    expect(() => flagsOf(['--force=yes'], OPTIONS)).toThrow(/--force/);
    expect(flagsOf(['--force'], OPTIONS).values.force).toBe(true);
  });
});
