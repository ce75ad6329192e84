/**
 * The base's PrometheusRule is generated from deploy/prometheus/alerts.yaml (the rules
 * `promtool check rules` checks), so the two never drift. Regenerate after changing alerts:
 *
 *   node_modules/.bin/node test/deploy/prometheus-rule.ts
 *
 * test/deploy/kustomize.test.ts fails when the committed file is out of date.
 */
import {readFileSync, writeFileSync} from 'node:fs';
import path from 'node:path';
import {parse, stringify} from 'yaml';

/** Where the alert rules live, and the generated manifest. */
export const ALERTS_FILE = 'deploy/prometheus/alerts.yaml';
/** The generated PrometheusRule manifest, a resource of the kustomize base. */
export const PROMETHEUS_RULE_FILE = 'deploy/kubernetes/common/prometheusrule.yaml';

/** The PrometheusRule manifest for the alert rules file's text. */
export function renderPrometheusRule(alertsText: string): string {
  const rules = parse(alertsText) as {groups?: unknown};
  if (!Array.isArray(rules.groups)) throw new Error(`${ALERTS_FILE}: expected a Prometheus rules file with a "groups" list`);
  const manifest = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: {name: 'kube-discovery', labels: {'app.kubernetes.io/name': 'kube-discovery'}},
    spec: {groups: rules.groups},
  };
  return [
    `# GENERATED from ${ALERTS_FILE} by test/deploy/prometheus-rule.ts; do not edit by hand.`,
    '# Your Prometheus must select it: kube-prometheus-stack selects `release: <its release name>`.',
    stringify(manifest, {lineWidth: 0}),
  ].join('\n');
}

if (import.meta.main) {
  const root = path.resolve(import.meta.dirname, '../..');
  const text = renderPrometheusRule(readFileSync(path.join(root, ALERTS_FILE), 'utf8'));
  writeFileSync(path.join(root, PROMETHEUS_RULE_FILE), text);
  process.stdout.write(`wrote ${PROMETHEUS_RULE_FILE}\n`);
}
