import {afterEach, describe, expect, it} from 'vitest';
import {DynamicLabels, execRunner, type CommandRunner} from '../../src/discovery/dynamic-labels.ts';
import {FakeClock} from '../helpers/fake-clock.ts';

describe('DynamicLabels', () => {
  const running: DynamicLabels[] = [];
  afterEach(() => {
    for (const labels of running.splice(0)) labels.stop();
  });

  it('runs each command at start and again every period', async () => {
    const clock = new FakeClock();
    let n = 0;
    const run: CommandRunner = async () => `v${++n}`;
    const labels = new DynamicLabels({commands: [{name: 'rev', command: ['git', 'rev-parse'], period: 60_000}], clock, run});
    running.push(labels);
    await labels.start();
    expect(labels.current()).toEqual({rev: {period: '1m', command: ['git', 'rev-parse'], result: 'v1'}});
    await clock.advance(60_000);
    expect(labels.current()['rev']?.result).toBe('v2');
  });

  it('keeps the last good result when a refresh fails, and reports the failure', async () => {
    const clock = new FakeClock();
    const outputs: (string | Error)[] = ['ok', new Error('exit 1')];
    const errors: string[] = [];
    const run: CommandRunner = async () => {
      const next = outputs.shift() ?? 'later';
      if (next instanceof Error) throw next;
      return next;
    };
    const labels = new DynamicLabels({commands: [{name: 'zone', command: ['zone'], period: 1000}], clock, run, onError: (name, error) => errors.push(`${name}: ${(error as Error).message}`)});
    running.push(labels);
    await labels.start();
    await clock.advance(1000);
    expect(labels.current()['zone']?.result).toBe('ok');
    expect(errors).toEqual(['zone: exit 1']);
    await clock.advance(1000);
    expect(labels.current()['zone']?.result).toBe('later');
  });

  it('stops refreshing after stop()', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const labels = new DynamicLabels({commands: [{name: 'x', command: ['x'], period: 1000}], clock, run: async () => `${++calls}`});
    await labels.start();
    labels.stop();
    await clock.advance(5000);
    expect(calls).toBe(1);
  });

  it('execRunner runs a real command without a shell and trims its output', async () => {
    const signal = new AbortController().signal;
    await expect(execRunner([process.execPath, '-e', 'process.stdout.write("  hello $HOME \\n")'], signal)).resolves.toBe('hello $HOME');
    await expect(execRunner([], signal)).rejects.toThrow('empty command');
  });
});
