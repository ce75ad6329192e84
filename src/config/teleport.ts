/**
 * Teleport drop-in: a Teleport user's `discovery_service` section, or a whole
 * teleport.yaml, loads unchanged. Before validation this pass takes out what Teleport knows and
 * this service does not use (other services' sections, EC2 installation settings, matcher
 * types other than eks/aks ...), turns Teleport's boolean spellings into booleans and fills the
 * defaults Teleport has. What neither knows is left in place, so validation still rejects it
 * with its line and column. The pass is pure: it returns the adapted data, the warnings, and a
 * map from paths in the adapted data back to paths in the file (for error positions).
 */

/** One step of a key path: a map key or a list index. */
export type PathSegment = string | number;

/** What the pass made of a config. */
export interface TeleportAdaptation {
  /** The config with Teleport-only settings taken out, ready for the schema. */
  readonly data: unknown;
  /** Human warnings: one listing every ignored Teleport setting and why, then one per other change. */
  readonly warnings: readonly string[];
  /** The path in the file of a path in `data` (lists may have lost Teleport-only items). */
  readonly originalPath: (path: readonly PathSegment[]) => PathSegment[];
}

/** The discovery group used when the file names none, as Teleport allows. */
export const DEFAULT_DISCOVERY_GROUP = 'default';

/** Teleport config versions; this service's own is v1, which Teleport also had. */
const TELEPORT_VERSIONS = new Set(['v1', 'v2', 'v3']);

/** Why each kind of Teleport setting is ignored; the warning groups keys by these. */
const WHY = {
  services: "other Teleport services' sections: this service only discovers clusters",
  agent: "the Teleport agent's own settings: joining, auth and proxy addresses, data dir",
  discovery: 'Teleport discovery features this service does not have: GKE, Kubernetes apps, Access Graph, its own listener',
  install: 'agent installation on discovered VMs: this service installs nothing',
  integration: 'Teleport integrations and Kubernetes app discovery: this service uses the cloud credential chain',
  types: 'matcher types other than eks and aks: this service discovers EKS and AKS clusters only',
  kube: "Teleport's Kubernetes service proxies kube_clusters, this service registers them; its labels and commands are used",
} as const;

/** Top-level sections of a teleport.yaml (lib/config/fileconf.go FileConfig) that are not ours. */
const TOP_LEVEL: Readonly<Record<string, keyof typeof WHY>> = {
  teleport: 'agent',
  auth_service: 'services',
  ssh_service: 'services',
  proxy_service: 'services',
  app_service: 'services',
  db_service: 'services',
  metrics_service: 'services',
  debug_service: 'services',
  windows_desktop_service: 'services',
  tracing_service: 'services',
  okta_service: 'services',
  jamf_service: 'services',
  plugin_service: 'services',
  access_graph: 'services',
};

/** `discovery_service` keys Teleport has and this service ignores. */
const DISCOVERY_SERVICE: Readonly<Record<string, keyof typeof WHY>> = {
  listen_addr: 'discovery',
  gcp: 'discovery',
  kubernetes: 'discovery',
  access_graph: 'discovery',
};

/** `discovery_service.aws[]` keys Teleport has and this service ignores. */
const AWS_MATCHER: Readonly<Record<string, keyof typeof WHY>> = {
  install: 'install',
  ssm: 'install',
  integration: 'integration',
  kube_app_discovery: 'integration',
};

/** `discovery_service.azure[]` keys Teleport has and this service ignores. */
const AZURE_MATCHER: Readonly<Record<string, keyof typeof WHY>> = {install: 'install'};

/** `kubernetes_service` keys Teleport has and this service ignores (`labels`, `commands` are used). */
const KUBERNETES_SERVICE: Readonly<Record<string, keyof typeof WHY>> = {
  enabled: 'kube',
  listen_addr: 'kube',
  public_addr: 'kube',
  kubeconfig_file: 'kube',
  kube_cluster_name: 'kube',
  resources: 'kube',
};

/** Matcher types Teleport's discovery knows besides the ones this service discovers. */
const OTHER_AWS_TYPES = new Set(['ec2', 'rds', 'rdsproxy', 'redshift', 'redshift-serverless', 'elasticache', 'memorydb', 'opensearch', 'docdb']);
const OTHER_AZURE_TYPES = new Set(['vm', 'mysql', 'postgres', 'redis', 'sqlserver']);

/** Teleport-only keys known at a path of the adapted config, for "did you mean" suggestions. */
export function teleportKeysAt(path: readonly PathSegment[]): string[] {
  const at = path.map((s) => (typeof s === 'number' ? '[]' : s)).join('.');
  switch (at) {
    case '':
      return Object.keys(TOP_LEVEL);
    case 'discovery_service':
      return Object.keys(DISCOVERY_SERVICE);
    case 'discovery_service.aws.[]':
      return Object.keys(AWS_MATCHER);
    case 'discovery_service.azure.[]':
      return Object.keys(AZURE_MATCHER);
    case 'kubernetes_service':
      return Object.keys(KUBERNETES_SERVICE);
    default:
      return [];
  }
}

/** Teleport's boolean spellings (api/utils ParseBool), case-insensitive. */
export function parseTeleportBool(value: unknown): boolean | undefined {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value === 1 ? true : value === 0 ? false : undefined;
  if (typeof value !== 'string') return undefined;
  const lower = value.toLowerCase();
  if (['yes', 'yeah', 'y', 'true', '1', 'on'].includes(lower)) return true;
  if (['no', 'nope', 'n', 'false', '0', 'off'].includes(lower)) return false;
  return undefined;
}

type Json = Record<string, unknown>;

function isMap(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `discovery_service.aws[0].install` (only plain keys occur here). */
function dotted(path: readonly PathSegment[]): string {
  return path.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

/** Adapts parsed YAML (see the module comment). Data that is not a map is returned as it is. */
export function adaptTeleportConfig(input: unknown): TeleportAdaptation {
  const ignored = new Map<keyof typeof WHY, string[]>();
  const warnings: string[] = [];
  // For each list that lost items: new index → index in the file, keyed by the list's path in the adapted data.
  const indexMaps = new Map<string, number[]>();
  const ignore = (why: keyof typeof WHY, what: string): void => {
    ignored.set(why, [...(ignored.get(why) ?? []), what]);
  };
  const originalPath = (path: readonly PathSegment[]): PathSegment[] => {
    const out: PathSegment[] = [];
    path.forEach((segment, i) => {
      if (typeof segment !== 'number') {
        out.push(segment);
        return;
      }
      out.push(indexMaps.get(JSON.stringify(path.slice(0, i)))?.[segment] ?? segment);
    });
    return out;
  };
  if (!isMap(input)) return {data: input, warnings, originalPath};

  const data: Json = {...input};
  // A Teleport file says v2 or v3, or nothing at all; all of them mean this service's v1.
  if (data['version'] === undefined || (typeof data['version'] === 'string' && TELEPORT_VERSIONS.has(data['version']))) data['version'] = 'v1';
  takeOut(data, [], TOP_LEVEL, ignore);

  const service = data['discovery_service'];
  if (isMap(service)) {
    const ds: Json = {...service};
    data['discovery_service'] = ds;
    takeOut(ds, ['discovery_service'], DISCOVERY_SERVICE, ignore);
    const enabled = parseTeleportBool(ds['enabled']);
    if (enabled !== undefined) ds['enabled'] = enabled;
    if (ds['discovery_group'] === undefined || ds['discovery_group'] === null || ds['discovery_group'] === '') {
      ds['discovery_group'] = DEFAULT_DISCOVERY_GROUP;
      warnings.push(
        `discovery_service.discovery_group is not set: using "${DEFAULT_DISCOVERY_GROUP}". Two deployments without a group share it and delete each other's entries; give each deployment its own group.`,
      );
    }
    for (const cloud of ['aws', 'azure'] as const) {
      const list = ds[cloud];
      if (!Array.isArray(list)) continue;
      const kept: unknown[] = [];
      const keptFrom: number[] = [];
      list.forEach((item: unknown, index) => {
        const path = ['discovery_service', cloud, index];
        if (!isMap(item)) {
          kept.push(item);
          keptFrom.push(index);
          return;
        }
        const matcher: Json = {...item};
        // Teleport lists a matcher with `integration` under that integration's role, in its
        // account. Without a role of ours naming that account the matcher would list the default
        // credentials' account instead, a different inventory: the key stays, and the schema refuses it.
        const keepIntegration = cloud === 'aws' && 'integration' in matcher && matcher['assume_role_arn'] === undefined && matcher['assume_role_name'] === undefined;
        takeOut(matcher, path, cloud === 'aws' ? AWS_MATCHER : AZURE_MATCHER, ignore, keepIntegration ? 'integration' : undefined);
        if (matcher['tags'] === null) delete matcher['tags'];
        const types = matcher['types'];
        if (Array.isArray(types)) {
          const others = cloud === 'aws' ? OTHER_AWS_TYPES : OTHER_AZURE_TYPES;
          const keptTypes = types.filter((t) => !(typeof t === 'string' && others.has(t)));
          const dropped = types.filter((t) => typeof t === 'string' && others.has(t)) as string[];
          if (dropped.length > 0) {
            ignore('types', `${dotted([...path, 'types'])} [${dropped.join(', ')}]`);
            if (keptTypes.length === 0) {
              warnings.push(`${dotted(path)} has no ${cloud === 'aws' ? 'eks' : 'aks'} type (types [${dropped.join(', ')}]): it does nothing here.`);
              return;
            }
            matcher['types'] = keptTypes;
            indexMaps.set(JSON.stringify(['discovery_service', cloud, kept.length, 'types']), types.flatMap((t, i) => (keptTypes.includes(t) ? [i] : [])));
          }
        }
        kept.push(matcher);
        keptFrom.push(index);
      });
      ds[cloud] = kept;
      indexMaps.set(JSON.stringify(['discovery_service', cloud]), keptFrom);
    }
  }

  const kube = data['kubernetes_service'];
  if (isMap(kube)) {
    const ks: Json = {...kube};
    data['kubernetes_service'] = ks;
    takeOut(ks, ['kubernetes_service'], KUBERNETES_SERVICE, ignore);
  }

  if (ignored.size > 0) {
    const groups = [...ignored].map(([why, keys]) => `${keys.join(', ')} (${WHY[why]})`);
    warnings.unshift(`Teleport settings this service does not use are ignored: ${groups.join('; ')}.`);
  }
  return {data, warnings, originalPath};
}

/** Removes the keys of `known` from `map` (but `keep`, left for the schema to refuse), recording each under its reason. */
function takeOut(map: Json, path: readonly PathSegment[], known: Readonly<Record<string, keyof typeof WHY>>, ignore: (why: keyof typeof WHY, what: string) => void, keep?: string): void {
  for (const [key, why] of Object.entries(known)) {
    if (!(key in map) || key === keep) continue;
    delete map[key];
    ignore(why, dotted([...path, key]));
  }
}
