/** Merging discovery options: field by field, so overriding one field of a block keeps the block's other defaults. */
import type {DiscoveryOptions} from './discovery.ts';

/** Options a caller (the CLI, a test, the bench) may set on top of what the runtime builds. */
export type DiscoveryOverrides = Partial<Omit<DiscoveryOptions, 'config' | 'clock'>>;

/**
 * `base` with `override` on top. The nested `aws` and `azure` blocks (and each cloud's `cloudOptions` block) merge per field: a test that
 * sets `aws.makeEksClient` keeps the runtime's shared credentials and the metrics hooks, where a
 * plain spread would drop the whole block.
 */
export function mergeDiscoveryOptions<T extends DiscoveryOverrides>(base: T, override: DiscoveryOverrides = {}): T & DiscoveryOverrides {
  const aws = base.aws || override.aws ? {aws: {...base.aws, ...override.aws}} : {};
  const azure = base.azure || override.azure ? {azure: {...base.azure, ...override.azure}} : {};
  const keys = new Set([...Object.keys(base.cloudOptions ?? {}), ...Object.keys(override.cloudOptions ?? {})]);
  const cloudOptions = keys.size > 0 ? {cloudOptions: Object.fromEntries([...keys].map((k) => [k, {...base.cloudOptions?.[k], ...override.cloudOptions?.[k]}]))} : {};
  return {...base, ...override, ...aws, ...azure, ...cloudOptions};
}
