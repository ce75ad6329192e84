/** Config limits: the bound a duration crossed, duplicate list entries (with their location), oversized files. */
import {describe, expect, it} from 'vitest';
import {ConfigError, parseConfig} from '../../src/config/load.ts';

function problems(text: string): string {
  try {
    parseConfig(text, 'limits.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error('expected the config to be rejected');
}

const matcher = (regions: string, types = '[eks]'): string => `version: v1
discovery_service:
  discovery_group: limits
  aws:
    - types: ${types}
      regions: ${regions}
`;

describe('config limits', () => {
  it('a too-large duration names the upper bound', () => {
    const text = `version: v1\ndiscovery_service:\n  discovery_group: limits\n  poll_interval: 999999999999h\n`;
    expect(problems(text)).toBe('limits.yaml:4:18: discovery_service.poll_interval: expected a duration of at most 596h31m23.647s, found a string "999999999999h"');
  });

  it('a too-small duration still names the lower bound', () => {
    expect(problems(`version: v1\ndiscovery_service:\n  discovery_group: limits\n  poll_interval: 1s\n`)).toContain('expected a duration of at least 10s');
  });

  it('a repeated region is an error at the repeat, naming the first', () => {
    expect(problems(matcher('[us-east-1, eu-west-1, us-east-1]'))).toBe(
      'limits.yaml:6:39: discovery_service.aws[0].regions[2]: expected a list without duplicates, found "us-east-1" again (first at item 0)',
    );
  });

  it('repeated types and etcd endpoints are errors too', () => {
    expect(problems(matcher('[us-east-1]', '[eks, eks]'))).toContain('discovery_service.aws[0].types[1]: expected a list without duplicates');
    const etcd = `version: v1\ndiscovery_service:\n  discovery_group: limits\nstorage: {type: etcd, endpoints: ["http://127.0.0.1:2379", "http://127.0.0.1:2379"]}\n`;
    expect(problems(etcd)).toContain('storage.endpoints[1]: expected a list without duplicates');
  });

  it('50,000 copies of a region give one problem, not 49,999', () => {
    const message = problems(matcher(`[${Array(50_000).fill('us-east-1').join(', ')}]`));
    expect(message.split('\n')).toHaveLength(1);
    expect(message).toContain('regions[1]: expected a list without duplicates');
  });

  it('500,000 copies are refused before parsing: the file is larger than any real config', () => {
    expect(problems(matcher(`[${Array(500_000).fill('us-east-1').join(', ')}]`))).toMatch(/^limits\.yaml:1:1: expected a config file of at most 1 MiB, found 5\.\d MiB of text$/);
  });
});
