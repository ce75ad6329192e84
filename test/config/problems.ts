/** The config tests' shared reader of a rejected config's problems. */
import {expect, it} from 'vitest';
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

/** A config rejected for one problem: which key, where, and what the message says. */
export interface RejectionCase {
  readonly name: string;
  /** The config text (or the lines a test's builder wraps into one). */
  readonly lines: string;
  readonly path: string;
  readonly line: number;
  readonly column: number;
  readonly message: RegExp;
}

/** One test per case: `configOf(case.lines)` is rejected with a problem at the case's key, line and column. */
export function itRejects(cases: readonly RejectionCase[], configOf: (lines: string) => string): void {
  for (const c of cases) {
    it(`rejects ${c.name} with its key, line and column`, () => {
      const problems = problemsOf(configOf(c.lines));
      const problem = problems.find((p) => p.path === c.path);
      expect(problem, JSON.stringify(problems)).toBeDefined();
      expect(problem).toMatchObject({line: c.line, column: c.column});
      expect(problem?.message).toMatch(c.message);
    });
  }
}
