/** `kube-discovery config check -c FILE`: validates a config and prints the effective one (defaults filled). */
import {ConfigError, loadConfigFile} from '../config/load.ts';
import {formatConfigYaml} from '../config/print.ts';
import {configWarnings} from '../config/warnings.ts';
import type {Command} from './io.ts';
import {flagsOf} from './flags.ts';
import {errorMessage} from '../core/errors.ts';

const usage = 'usage: kube-discovery config check -c FILE\n';

/** Runs `config check`; exit 0 valid (effective config on stdout), 2 for bad usage or an invalid config (every problem on stderr). */
export const runConfigCheck: Command = async (argv, io) => {
  let file: string | undefined;
  try {
    const {values, positionals} = flagsOf(argv, {config: {type: 'string', short: 'c'}, help: {type: 'boolean', short: 'h'}}, true);
    if (values.help) {
      io.stdout(usage);
      return 0;
    }
    // Tolerate being handed the sub-command word itself (`check -c FILE`).
    const extra = positionals[0] === 'check' ? positionals.slice(1) : positionals;
    if (extra.length > 0) {
      io.stderr(`unexpected argument ${JSON.stringify(extra[0])}\n${usage}`);
      return 2;
    }
    file = values.config;
  } catch (error) {
    io.stderr(`${errorMessage(error)}\n${usage}`);
    return 2;
  }
  if (file === undefined || file === '') {
    io.stderr(`missing -c FILE\n${usage}`);
    return 2;
  }

  try {
    const config = await loadConfigFile(file);
    for (const warning of configWarnings(config)) io.stderr(`${file}: warning: ${warning}\n`);
    io.stdout(formatConfigYaml(config));
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      io.stderr(`${error.message}\n${file}: ${error.problems.length} problem${error.problems.length === 1 ? '' : 's'}\n`);
      return 2;
    }
    throw error;
  }
};
