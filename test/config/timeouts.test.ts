/** `request_timeout` and `cycle_timeout`: defaults, the cycle deadline they give, and a located error for a cycle deadline at or past the interval. */
import {describe, expect, it} from 'vitest';
import {ConfigError, parseConfig} from '../../src/config/load.ts';
import {cycleDeadline} from '../../src/discovery/discovery.ts';

const base = 'version: v1\ndiscovery_service:\n  discovery_group: g\n';

describe('cloud call and cycle deadlines', () => {
  it('defaults: 20 s per request, a cycle deadline at 80 % of the poll interval', () => {
    const config = parseConfig(`${base}  poll_interval: 5m\n`, 'd.yaml');
    expect(config.discovery_service.request_timeout).toBe(20_000);
    expect(cycleDeadline(config)).toBe(240_000);
  });

  it('a cron schedule gives 80 % of the gap between two runs', () => {
    expect(cycleDeadline(parseConfig(`${base}  schedule: "*/10 * * * *"\n`, 'd.yaml'))).toBe(480_000);
  });

  it('cycle_timeout wins when set', () => {
    expect(cycleDeadline(parseConfig(`${base}  poll_interval: 5m\n  cycle_timeout: 90s\n`, 'd.yaml'))).toBe(90_000);
  });

  it('refuses a cycle deadline at or past the poll interval, naming key and line', () => {
    let error: unknown;
    try {
      parseConfig(`${base}  poll_interval: 1m\n  cycle_timeout: 2m\n`, 'd.yaml');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(String((error as Error).message)).toMatch(/d\.yaml:5:\d+: discovery_service\.cycle_timeout: expected a duration below poll_interval \(1m\)/);
  });
});
