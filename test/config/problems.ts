/** The config tests' shared reader of a rejected config's problems. */
import {expect} from 'vitest';
import {ConfigError, parseConfig, type ConfigProblem} from '../../src/config/load.ts';

/** The problems parseConfig reports for `text` (read as `file`); fails the test when the config is accepted. */
export function problemsOf(text: string, file = 'discovery.yaml'): ConfigProblem[] {
  try {
    parseConfig(text, file);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  throw new Error('expected the config to be rejected, but it was accepted');
}
