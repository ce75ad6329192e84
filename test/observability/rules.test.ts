/**
 * The shipped alert rules: accepted by the real `promtool`, their unit tests pass, and every
 * metric they (and the dashboard) name is one the service actually exposes.
 */
import {readFile} from 'node:fs/promises';
import {expect, it} from 'vitest';
import {accessSetupCounter} from '../../src/access/setup-metrics.ts';
import {Metrics} from '../../src/observability/metrics.ts';
import {describeWithBinary, run} from './prom-tools.ts';

const RULES = 'deploy/prometheus/alerts.yaml';
const RULE_TESTS = 'deploy/prometheus/alerts.test.yaml';
const DASHBOARD = 'deploy/grafana/kube-discovery.json';

describeWithBinary('promtool', 'alert rules', (promtool) => {
  it('pass promtool check rules', async () => {
    const result = await run(promtool, ['check', 'rules', RULES]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain('SUCCESS: 9 rules found');
    expect(result.code).toBe(0);
  });

  it('pass their promtool unit tests (each alert firing and not firing)', async () => {
    const result = await run(promtool, ['test', 'rules', RULE_TESTS]);
    expect(result.stdout + result.stderr).toContain('SUCCESS');
    expect(result.code).toBe(0);
  });
});

it('name only metrics the service exposes', async () => {
  const exposed = new Set<string>();
  const metrics = new Metrics();
  accessSetupCounter(metrics.registry);
  for (const [, name = '', type] of (await metrics.render()).body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exposed.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_count', '_sum']) exposed.add(name + suffix);
  }
  const referenced = new Set<string>();
  for (const file of [RULES, DASHBOARD]) {
    for (const m of (await readFile(file, 'utf8')).matchAll(/\b(kube_discovery_[a-z_]+|process_[a-z_]+)\b/g)) referenced.add(m[1] ?? '');
  }

  expect(referenced.size).toBeGreaterThan(10);
  expect([...referenced].filter((name) => !exposed.has(name))).toEqual([]);
});
