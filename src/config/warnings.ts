/** Valid but suspicious settings, printed by `config check` and logged at start. */
import {unknownRegionHint} from './region-hints.ts';
import type {Config} from './schema.ts';

/** Warnings found while parsing (the Teleport drop-in's ignored settings), per parsed config object. */
const parseWarnings = new WeakMap<Config, readonly string[]>();

/** Attaches the parser's warnings to the config it returns, so `configWarnings` reports them. */
export function rememberWarnings(config: Config, warnings: readonly string[]): Config {
  if (warnings.length > 0) parseWarnings.set(config, warnings);
  return config;
}

/** Human warnings about a valid config (e.g. nothing to discover), the parser's first. */
export function configWarnings(config: Config): string[] {
  const warnings: string[] = [...(parseWarnings.get(config) ?? [])];
  const service = config.discovery_service;
  if (service.enabled && service.aws.length === 0 && service.azure.length === 0) {
    warnings.push('discovery_service has no aws or azure matchers: nothing will be discovered');
  }
  if (!service.enabled) {
    warnings.push('discovery_service.enabled is false: this instance only serves the registry');
  }
  for (const [i, matcher] of service.aws.entries()) {
    for (const [j, region] of matcher.regions.entries()) {
      const hint = unknownRegionHint(region);
      if (hint) warnings.push(`discovery_service.aws[${i}].regions[${j}]: ${hint} (kept, in case it is newer than this release)`);
    }
  }
  if (config.storage.type === 'memory') {
    warnings.push('storage.type is memory: the inventory is lost on restart');
  }
  return warnings;
}
