/** Renders the effective config back as YAML, durations in Go style, so `config check` output is itself a valid config. */
import {Document, isScalar, isSeq, visit} from 'yaml';
import {formatDuration} from './duration.ts';
import type {Config} from './schema.ts';

/** The effective config with every duration as a Go-style string (`5m`), keys in schema order. */
export function displayConfig(config: Config): Record<string, unknown> {
  const service = config.discovery_service;
  const storage =
    config.storage.type === 'etcd'
      ? {
          ...config.storage,
          session_ttl: formatDuration(config.storage.session_ttl),
          dial_timeout: formatDuration(config.storage.dial_timeout),
        }
      : config.storage;
  return {
    ...config,
    discovery_service: {
      ...service,
      ...(service.poll_interval === undefined ? {} : {poll_interval: formatDuration(service.poll_interval)}),
      request_timeout: formatDuration(service.request_timeout),
      ...(service.cycle_timeout === undefined ? {} : {cycle_timeout: formatDuration(service.cycle_timeout)}),
      refresh_interval: service.refresh_interval === 0 ? '0s' : formatDuration(service.refresh_interval),
    },
    kubernetes_service: {
      ...config.kubernetes_service,
      commands: config.kubernetes_service.commands.map((command) => ({...command, period: formatDuration(command.period)})),
    },
    heartbeat: {
      ttl: formatDuration(config.heartbeat.ttl),
      keepalive_interval: formatDuration(config.heartbeat.keepalive_interval),
    },
    probe: {...config.probe, timeout: formatDuration(config.probe.timeout)},
    storage,
  };
}

/** The effective config as YAML text. */
export function formatConfigYaml(config: Config): string {
  const doc = new Document(displayConfig(config));
  // Lists of plain values read best on one line, as in discovery.example.yaml (`types: [eks]`).
  visit(doc, {
    Seq(_, node) {
      if (isSeq(node) && node.items.every((item) => isScalar(item))) node.flow = true;
    },
  });
  return doc.toString({lineWidth: 0, flowCollectionPadding: false});
}
