/** `discovery_service.aws_rate_limits`: accepted limits reach the shaper over the defaults; bad ones name key, line and column. */
import {describe, expect, it} from 'vitest';
import {awsRateLimits, DEFAULT_AWS_RATE_LIMITS} from '../../src/clouds/aws/rate-shaper.ts';
import {ConfigError, parseConfig} from '../../src/config/load.ts';

const config = (limits: string): string => `version: v1
discovery_service:
  discovery_group: limits
  aws_rate_limits:
${limits}
`;

function problems(text: string): string {
  try {
    parseConfig(text, 'rates.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error('expected the config to be rejected');
}

describe('aws_rate_limits', () => {
  it('configured operations override the defaults; the others keep them', () => {
    const parsed = parseConfig(config('    DescribeCluster: {rate_per_second: 40, burst: 5}'), 'rates.yaml');
    const limits = awsRateLimits(parsed.discovery_service.aws_rate_limits ?? {});
    expect(limits['DescribeCluster']).toEqual({ratePerSecond: 40, burst: 5});
    expect(limits['ListClusters']).toEqual(DEFAULT_AWS_RATE_LIMITS['ListClusters']);
  });

  it('a rate of zero is an error naming the key and its position', () => {
    expect(problems(config('    ListClusters: {rate_per_second: 0, burst: 1}'))).toMatch(/^rates\.yaml:5:\d+: discovery_service\.aws_rate_limits\.ListClusters\.rate_per_second: /);
  });

  it('an unknown field is an error, not ignored', () => {
    expect(problems(config('    ListClusters: {rate: 5, burst: 1}'))).toContain('discovery_service.aws_rate_limits.ListClusters');
  });
});
