/**
 * kube_server names exactly as Teleport's discovery service gives its kube_clusters,
 * so kubeconfig contexts, `tsh kube` targets and dashboards keep working for Teleport users:
 * `<name>-eks-<region>-<account>` and `<name>-aks-<region>-<resource group>-<subscription>`.
 */
import {builtInClouds} from '../clouds/index.ts';
import type {Clouds} from '../clouds/cloud.ts';
import type {DiscoveredCluster} from '../core/types.ts';
import {flatString} from '../core/intern.ts';

/** Teleport's rule for kube cluster names: DNS-label-like, dots and underscores allowed. */
const KUBE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,252}$/;

/** Teleport's character rule for a kube cluster name, used to judge one suffix part at a time. */
const KUBE_NAME_CHARS = /^[a-zA-Z0-9._-]+$/;

/** Whether a name can be used as a kube_server name (and registry key part). */
export function isValidKubeName(name: string): boolean {
  return KUBE_NAME.test(name);
}

/** A cluster's kube_server name and how it was made. */
export interface KubeServerName {
  readonly name: string;
  /** A name override tag set the name. */
  readonly overridden: boolean;
  /** A suffix was appended (Teleport then records the cloud name in `teleport.internal/discovered-name`). */
  readonly renamed: boolean;
}

/**
 * The name of a discovered cluster. A non-empty override tag is the whole name; otherwise the
 * suffix of the cloud's parts (type, region, (resource group,) account) is appended, minus what the
 * name already says. Which tags override and which parts follow are the cloud module's. The name is
 * held as long as its cluster (judgement, documents, the registry's copy): flat, not the pieces it was joined from.
 */
export function kubeServerName(cluster: DiscoveredCluster, clouds: Clouds = builtInClouds): KubeServerName {
  const cloud = clouds.get(cluster.cloud);
  for (const tag of cloud.nameOverrideTags) {
    const override = cluster.tags[tag];
    if (override !== undefined && override !== '') return {name: override, overridden: true, renamed: false};
  }
  const suffix = discoverySuffix(cluster.name, cloud.nameParts(cluster));
  return suffix === '' ? {name: cluster.name, overridden: false, renamed: false} : {name: flatString(`${cluster.name}-${suffix}`), overridden: false, renamed: true};
}

/**
 * Teleport's suffix rule: each part is cleaned; a part that is empty, that the name already
 * contains (case-insensitive substring) or that is not valid in a name is left out; the rest
 * are joined with `-`. Case is kept (Azure resource groups keep theirs).
 */
export function discoverySuffix(name: string, parts: readonly string[]): string {
  const lowerName = name.toLowerCase();
  const kept: string[] = [];
  for (const raw of parts) {
    const part = cleanParts.get(raw);
    if (part.text === '') continue;
    if (lowerName.includes(part.lower)) continue;
    if (!part.valid) continue;
    kept.push(part.text);
  }
  const suffix = kept.join('-');
  // Teleport re-checks the joined suffix and drops it whole if it is somehow invalid.
  return suffix !== '' && isValidPart(suffix) ? suffix : '';
}

/** A suffix part as cleaned, lower-cased and judged: the same few parts (type, region, account) recur on every cluster. */
interface CleanPart {
  readonly text: string;
  readonly lower: string;
  readonly valid: boolean;
}

/** Cleaned parts by raw part, bounded: past 1,024 distinct parts it starts over rather than grow. */
class CleanParts {
  #table = new Map<string, CleanPart>();

  get(raw: string): CleanPart {
    let part = this.#table.get(raw);
    if (part === undefined) {
      const text = cleanPart(raw);
      part = {text, lower: text.toLowerCase(), valid: text !== '' && isValidPart(text)};
      if (this.#table.size >= 1_024) this.#table = new Map();
      this.#table.set(raw, part);
    }
    return part;
  }
}

const cleanParts = new CleanParts();

/** Spaces become `-`, runs of `-` collapse to one, and leading / trailing `-` go (Teleport replaces the space character only). */
function cleanPart(part: string): string {
  return part.replaceAll(' ', '-').replace(/-{2,}/g, '-').replace(/^-+|-+$/g, '');
}

/** A part is valid when a name made of a letter and the part would be valid, as Teleport checks it. */
function isValidPart(part: string): boolean {
  return KUBE_NAME_CHARS.test(`a${part}`);
}
