/**
 * `kube-discovery once -c FILE [--output json|table] [--explain] [--force]`: one cycle, printed. Exit 0 ok, 1 partial
 * (or a running `start` writes the same registry and --force was not given), 2 usage/config.
 */
import {systemClock} from '../core/clock.ts';
import type {CycleReport} from '../discovery/cycle.ts';
import type {Command, CliIo} from './io.ts';
import {createLeadership, type Role} from '../service/leadership.ts';
import {openRuntime} from '../service/runtime.ts';
import {createAccessSetupSteps} from '../service/access-setup.ts';
import {runningWriter} from '../service/writer-claim.ts';
import {redact, redactText} from '../observability/redact.ts';
import {usageError, withConfig} from './common.ts';
import {parseFlags} from './flags.ts';
import {formatLabels, renderTable} from './table.ts';

/** Runs the `once` command. */
export const runOnce: Command = async (argv, io) => {
  const flags = parseFlags(io, 'once', argv, {
    config: {type: 'string', short: 'c'},
    output: {type: 'string', short: 'o'},
    explain: {type: 'boolean', default: false},
    force: {type: 'boolean', default: false},
  });
  if (typeof flags === 'number') return flags;
  const {values} = flags;
  const output = values.output ?? (io.isTty ? 'table' : 'json');
  if (output !== 'json' && output !== 'table') return usageError(io, 'once', `--output must be json or table, got ${JSON.stringify(output)}`);
  return withConfig(io, 'once', values.config, async (config) => {
    if (!config.discovery_service.enabled) return usageError(io, 'once', 'discovery_service.enabled is false in this config; nothing to run');
    const runtime = await openRuntime(config, io, {clock: systemClock, logTo: 'stderr'});
    let report: CycleReport;
    // On etcd a running leader owns the group: `once` only writes if it can lead, fenced like the service.
    const leadership = createLeadership({
      backend: runtime.backend,
      storageType: config.storage.type,
      group: config.discovery_service.discovery_group,
      replica: `${runtime.replica}-once`,
      leaderElection: config.leader_election,
      clock: systemClock,
      logger: runtime.logger,
    });
    let role = {role: 'follower'} as Role;
    await leadership.start((r) => (role = r));
    if (role.role !== 'leader') {
      await leadership.stop();
      await runtime.close();
      io.stderr(`kube-discovery once: replica ${role.leader ?? 'another replica'} leads discovery group ${config.discovery_service.discovery_group}; read its results with \`kube-discovery ls\`\n`);
      return 1;
    }
    // On sqlite every process "leads": a running `start` is found by its writer record instead.
    const running = config.storage.type === 'etcd' || config.storage.type === 'kubernetes' ? undefined : await runningWriter(runtime.backend, config.discovery_service.discovery_group);
    if (running && !values.force) {
      await leadership.stop();
      await runtime.close();
      io.stderr(
        `kube-discovery once: a running \`kube-discovery ${running.command}\` (pid ${running.pid} on ${running.hostname}, since ${running.since}) writes discovery group ${config.discovery_service.discovery_group} in this registry; running once now would take over its lease and entries. Trigger a cycle there (SIGHUP or POST /v1/discover), stop it first, or pass --force\n`,
      );
      return 1;
    }
    // One cycle of `start`: registration, then access set-up (set up, clean up after deregistrations, repair), counted for the output.
    const setupOutcomes = new Map<string, number>();
    const accessSetup = createAccessSetupSteps({runtime, clock: systemClock, logger: runtime.logger, env: io.env, onOutcome: (outcome) => setupOutcomes.set(outcome, (setupOutcomes.get(outcome) ?? 0) + 1)});
    try {
      const writer = await runtime.openWriter(role.backend);
      try {
        if (config.storage.type === 'kubernetes') {
          // Like a new leader of `start`: DiscoveryConfig matchers first, or this cycle would deregister what only they find.
          // A list that fails is a failed source covering every entry: nothing is deleted then.
          const {startDiscoveryConfigs} = await import('../service/kube-dynamic.ts');
          const dynamic = await startDiscoveryConfigs({runtime, clock: systemClock, log: runtime.logger, runCycle: () => Promise.reject(new Error('once runs one cycle only'))});
          dynamic.stop();
        }
        report = await runtime.discovery.runCycle(writer.registrar);
        await accessSetup.run(report, new AbortController().signal, writer.backend);
      } finally {
        await writer.heartbeat.stop({deregister: false});
      }
    } finally {
      accessSetup.close();
      await leadership.stop();
      await runtime.close();
    }
    // Messages in the report come from clouds: redacted by value and pattern before they leave the process.
    const setup = Object.fromEntries([...setupOutcomes].sort(([a], [b]) => a.localeCompare(b)));
    io.stdout(
      output === 'json'
        ? `${JSON.stringify(redact({...(toJson(report, values.explain) as object), ...(setupOutcomes.size > 0 ? {access_setup: setup} : {})}), null, 2)}\n`
        : redactText(`${toTable(report, values.explain)}${setupOutcomes.size > 0 ? `access set-up: ${Object.entries(setup).map(([o, n]) => `${n} ${o}`).join(', ')}\n` : ''}`),
    );
    return report.result === 'success' ? 0 : 1;
  });
};

/** The documented, stable JSON schema of `once --output json`. */
export function toJson(report: CycleReport, explain: boolean): unknown {
  return {
    result: report.result,
    duration_ms: report.durationMs,
    counts: report.counts,
    sources: report.sources.map((s) => ({
      id: s.id,
      ok: s.ok,
      clusters: s.clusters,
      ...(s.skipped ? {skipped: s.skipped} : {}),
      ...(s.error ? {error: {reason: s.error.reason, code: s.error.code, operation: s.error.operation, message: s.error.message}} : {}),
    })),
    clusters: report.items.map((i) => ({
      name: i.name,
      action: i.action,
      reason: i.reason,
      source: i.source,
      labels: i.labels,
      ...(explain && i.match ? {match: i.match} : {}),
    })),
    ...(report.applyErrors.length > 0 ? {apply_errors: report.applyErrors} : {}),
    ...(explain && report.notes.length > 0 ? {notes: report.notes} : {}),
  };
}

function toTable(report: CycleReport, explain: boolean): string {
  const clusters = renderTable(
    ['NAME', 'ACTION', 'SOURCE', 'REASON', ...(explain ? ['MATCH'] : []), 'LABELS'],
    report.items.map((i) => [i.name, i.action, i.source, i.reason, ...(explain ? [i.match ?? ''] : []), formatLabels(i.labels)]),
  );
  const sources = renderTable(
    ['SOURCE', 'OK', 'CLUSTERS', 'ERROR'],
    report.sources.map((s) => [s.id, s.ok ? 'yes' : 'no', String(s.clusters), s.error ? `${s.error.operation}: ${s.error.code}: ${s.error.message}` : (s.skipped ?? '')]),
  );
  const c = report.counts;
  const summary = `${report.result}: ${c.create} created, ${c.update} updated, ${c.delete} deleted, ${c.unchanged} unchanged, ${c.stale} stale, ${c.skip} skipped in ${report.durationMs} ms\n`;
  return `${clusters}\n${sources}\n${summary}`;
}

export type {CliIo};
