// Every command and sub-command answers --help and -h with its usage on stdout and exit 0,
// before looking at any other flag; the top-level usage names every flag those usages name.
import {describe, expect, it} from 'vitest';
import {main} from '../../src/cli/main.ts';
import {captureIo} from '../helpers/env.ts';

const COMMANDS = [
  ['start'],
  ['once'],
  ['ls'],
  ['kubeconfig'],
  ['token'],
  ['token', 'eks'],
  ['token', 'aks'],
  ['configure'],
  ['configure', 'eks'],
  ['configure', 'aks'],
  ['config'],
  ['config', 'check'],
  ['version'],
];

async function run(argv: string[]) {
  const out = captureIo({});
  const code = await main(argv, out.io);
  return {code, stdout: out.stdout(), stderr: out.stderr()};
}

describe('--help', () => {
  it.each(COMMANDS.flatMap((command) => [[command, '--help'], [command, '-h']] as const))('%j %s prints the usage and exits 0', async (command, flag) => {
    // A flag the command does not know next to --help must not turn help into a usage error.
    const {code, stdout, stderr} = await run([...command, flag, '--no-such-flag']);

    expect({code, stderr}).toEqual({code: 0, stderr: ''});
    expect(stdout).toMatch(new RegExp(`^usage: kube-discovery ${command[0]}`));
  });

  it('lists every flag of every command in the top-level usage', async () => {
    const top = (await run(['--help'])).stdout;
    const missing = new Set<string>();
    for (const command of COMMANDS) {
      const usage = (await run([...command, '--help'])).stdout;
      for (const flag of usage.match(/--[a-z][a-z-]+/g) ?? []) if (flag !== '--help' && flag !== '--version' && !top.includes(flag)) missing.add(`${command.join(' ')}: ${flag}`);
    }
    expect([...missing]).toEqual([]);
  });

  it('answers `config` without a sub-command with its usage on stderr and exit 2', async () => {
    const {code, stderr} = await run(['config']);

    expect(code).toBe(2);
    expect(stderr).toContain('usage: kube-discovery config check -c FILE');
  });
});
