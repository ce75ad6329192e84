/**
 * The config schema (design §4): Teleport-compatible snake_case keys, strict objects so a
 * typo is an error rather than a silently disabled matcher, defaults filled in, durations
 * turned into milliseconds. Every issue message is the "expected ..." phrase; the loader
 * adds the path, the line and what was found.
 */
import {validate as validateCron, validateDetailed as validateCronDetailed} from 'node-cron';
import * as z from 'zod';
import {MatcherError, compileTagMatcher} from '../../matchers/index.ts';
import {durationExpectation, formatDuration, tryParseDuration} from './duration.ts';
import {isValidLabelKey, labelKeyExpectation} from './label-key.ts';

/** setTimeout cannot wait longer than 2^31-1 ms; every duration stays below it. */
const maxTimerMs = 2 ** 31 - 1;

/** A Go-style duration string parsed into milliseconds, with bounds. */
function duration(bounds: {min: number; max?: number}): z.ZodPipe<z.ZodString, z.ZodTransform<number, string>> {
  const max = Math.min(bounds.max ?? maxTimerMs, maxTimerMs);
  return z.string({error: durationExpectation}).transform((text, ctx) => {
    const ms = tryParseDuration(text);
    if (ms === undefined) {
      ctx.addIssue({code: 'custom', message: durationExpectation, input: text});
      return z.NEVER;
    }
    if (ms < bounds.min || ms > max) {
      const range =
        max === maxTimerMs ? `of at least ${formatDuration(bounds.min)}` : `between ${formatDuration(bounds.min)} and ${formatDuration(max)}`;
      ctx.addIssue({
        code: 'custom',
        message: `a duration ${range}`,
        input: text,
      });
      return z.NEVER;
    }
    return ms;
  });
}

/** A string that must match `pattern`; `expect` is the phrase used when it does not (or is not a string). */
function patterned(expect: string, pattern: RegExp): z.ZodString {
  return z.string({error: expect}).regex(pattern, {error: expect});
}

/** A string for which `check` holds. */
function checked(expect: string, check: (value: string) => boolean): z.ZodString {
  return z.string({error: expect}).refine(check, {error: expect});
}

/** An error option that words only the "wrong type" issue, leaving issues of keys and items to their own schemas. */
function onlyType(expect: string): (issue: z.core.$ZodRawIssue) => string | undefined {
  return (issue) => (issue.code === 'invalid_type' ? expect : undefined);
}

function int(expect: string, min: number, max: number): z.ZodNumber {
  return z.number({error: expect}).int({error: expect}).min(min, {error: expect}).max(max, {error: expect});
}

function nonEmptyList<T extends z.ZodType>(item: T, expect: string): z.ZodArray<T> {
  return z.array(item, {error: expect}).min(1, {error: expect});
}

/** A list of names where `*` means "all", alone or not at all. */
function namesOrWildcard(item: z.ZodString, expect: string): z.ZodArray<z.ZodString> {
  return nonEmptyList(item, expect).superRefine((names, ctx) => {
    if (names.length > 1 && names.includes('*')) {
      ctx.addIssue({code: 'custom', message: `either ["*"] alone or ${expect.replace(/^a non-empty /, 'a ')}`});
    }
  });
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(hostname);
}

function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

const listenAddrPattern = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]*):(\d{1,5})$/;

/** Whether `text` is `host:port` (host may be empty for "all interfaces", IPv6 in brackets). */
export function isListenAddr(text: string): boolean {
  const port = listenAddrPattern.exec(text)?.[1];
  return port !== undefined && Number(port) <= 65535;
}

const listenAddr = checked('an address host:port such as 127.0.0.1:3000', isListenAddr);

const guidPattern = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

/** One tag value, compiled now (as a one-key matcher) so a bad regex or glob fails at start, not at the first cycle. */
const tagValue = z.string({error: 'a string'}).superRefine((value, ctx) => {
  try {
    compileTagMatcher({value});
  } catch (error) {
    if (!(error instanceof MatcherError)) throw error;
    const kind = error.message.startsWith('invalid glob') ? 'a valid glob' : 'a valid regular expression';
    ctx.addIssue({code: 'custom', message: kind, params: {found: `${JSON.stringify(value)} (${error.reason})`}});
  }
});

/** Tag matcher map: a string or a non-empty list of strings per key. */
const tagsSchema = z
  .record(
    z.string(),
    z.union([tagValue, z.array(tagValue, {error: 'a list of strings'}).min(1, {error: 'a non-empty list of values'})], {
      error: 'a string or a list of strings (quote numbers and booleans)',
    }),
    {error: onlyType('a map of tag names to values, such as {env: prod}')},
  )
  .superRefine((tags, ctx) => {
    if (Object.keys(tags).length === 0) {
      ctx.addIssue({code: 'custom', message: 'at least one tag (use {"*": "*"} to match every cluster)'});
    }
  });

const defaultTags = {'*': '*'};

/** `types: [eks]` and friends: the only type a cloud supports, at least once. */
function typesOf<T extends string>(type: T, cloud: string): z.ZodArray<z.ZodEnum<{[K in T]: K}>> {
  return nonEmptyList(
    z.enum([type] as [T], {error: `${type} (the only type of an ${cloud} matcher)`}),
    `a non-empty list of types, such as [${type}]`,
  );
}

const awsRegion = patterned('an AWS region name such as us-east-1, or "*"', /^(?:\*|[a-z]{2}(?:-[a-z]+)+-\d{1,2})$/);

const awsMatcherSchema = z
  .strictObject({
    types: typesOf('eks', 'aws'),
    regions: namesOrWildcard(awsRegion, 'a non-empty list of region names'),
    tags: tagsSchema.default(defaultTags),
    assume_role_arn: patterned(
      'an IAM role ARN such as arn:aws:iam::123456789012:role/name',
      /^arn:(?:aws|aws-cn|aws-us-gov):iam::\d{12}:role\/.+$/,
    ).optional(),
    external_id: z.string({error: 'a string'}).min(1, {error: 'a non-empty string'}).optional(),
  })
  .superRefine((matcher, ctx) => {
    if (matcher.external_id !== undefined && matcher.assume_role_arn === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'external_id only together with assume_role_arn',
        path: ['external_id'],
        params: {found: 'external_id without assume_role_arn'},
      });
    }
  });

const azureClouds = ['AzurePublicCloud', 'AzureChinaCloud', 'AzureUSGovernment'] as const;

const azureMatcherSchema = z.strictObject({
  types: typesOf('aks', 'azure'),
  subscriptions: namesOrWildcard(
    patterned('a subscription id (a GUID) or "*"', new RegExp(`^(?:\\*|${guidPattern.source.slice(1, -1)})$`)),
    'a non-empty list of subscription ids',
  ).default(['*']),
  resource_groups: namesOrWildcard(
    patterned('a resource group name or "*"', /^(?:\*|[-\w._()]{1,90})$/u),
    'a non-empty list of resource group names',
  ).default(['*']),
  regions: namesOrWildcard(
    patterned('an Azure location name such as eastus, or "*"', /^(?:\*|[a-z0-9]+)$/),
    'a non-empty list of Azure location names',
  ).default(['*']),
  tags: tagsSchema.default(defaultTags),
  cloud: z.enum(azureClouds).default('AzurePublicCloud'),
  resource_manager_endpoint: checked('an https URL (http only for a loopback host)', (text) => {
    const url = parseUrl(text);
    if (!url) return false;
    return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname));
  }).optional(),
  client_id: patterned('a client id (a GUID)', guidPattern).optional(),
});

const cronExpectation = 'a cron expression such as "*/5 * * * *"';

const discoveryGroupExpectation =
  'a discovery group name: lowercase letters, digits, ".", "_" and "-", starting and ending alphanumeric, at most 63 characters';

const discoveryServiceSchema = z
  .strictObject({
    enabled: z.boolean({error: 'true or false'}).default(true),
    discovery_group: patterned(discoveryGroupExpectation, /^(?=.{1,63}$)[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$/),
    poll_interval: duration({min: 10_000}).optional(),
    // Incremental discovery: each cluster's full re-description period; `0s` describes every cluster every cycle.
    refresh_interval: z.union([z.literal('0s').transform(() => 0), duration({min: 60_000})]).default(3_600_000),
    schedule: z
      .string({error: cronExpectation})
      .superRefine((text, ctx) => {
        if (!validateCron(text)) {
          ctx.addIssue({code: 'custom', message: cronExpectation, params: {found: `${JSON.stringify(text)} (${explainCron(text)})`}});
        }
      })
      .optional(),
    concurrency: z
      .strictObject({
        sources: int('an integer from 1 to 1000', 1, 1000).default(20),
        per_region: int('an integer from 1 to 1000', 1, 1000).default(10),
      })
      .prefault({}),
    aws: z.array(awsMatcherSchema, {error: 'a list of AWS matchers'}).default([]),
    azure: z.array(azureMatcherSchema, {error: 'a list of Azure matchers'}).default([]),
  })
  .superRefine((service, ctx) => {
    if (service.poll_interval !== undefined && service.schedule !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'either poll_interval or schedule',
        path: ['schedule'],
        params: {found: 'both'},
      });
    }
  })
  .transform((service) =>
    // The 5m default applies only when no cron schedule replaces it.
    service.schedule === undefined ? {...service, poll_interval: service.poll_interval ?? 300_000} : service,
  );

const labelKey = checked(labelKeyExpectation, isValidLabelKey);

const commandSchema = z.strictObject({
  name: labelKey,
  command: nonEmptyList(z.string({error: 'a string'}), 'a non-empty list of strings (program and arguments)'),
  period: duration({min: 1000}),
});

const kubernetesServiceSchema = z.strictObject({
  labels: z
    .record(labelKey, z.string({error: 'a string (quote numbers and booleans)'}), {
      error: onlyType('a map of label keys to strings'),
    })
    .default({}),
  commands: z
    .array(commandSchema, {error: 'a list of {name, command, period}'})
    .superRefine((commands, ctx) => {
      const seen = new Set<string>();
      commands.forEach((command, index) => {
        if (seen.has(command.name)) {
          ctx.addIssue({code: 'custom', message: 'unique command names', path: [index, 'name']});
        }
        seen.add(command.name);
      });
    })
    .default([]),
});

const heartbeatSchema = z
  .strictObject({
    ttl: duration({min: 30_000}).default(600_000),
    keepalive_interval: duration({min: 1000}).optional(),
  })
  .superRefine((heartbeat, ctx) => {
    if (heartbeat.keepalive_interval !== undefined && heartbeat.keepalive_interval >= heartbeat.ttl) {
      ctx.addIssue({
        code: 'custom',
        message: `a keepalive_interval shorter than ttl (${formatDuration(heartbeat.ttl)})`,
        path: ['keepalive_interval'],
      });
    }
  })
  .transform((heartbeat) => ({
    ttl: heartbeat.ttl,
    // A third of the TTL leaves two more chances before an entry expires.
    keepalive_interval: heartbeat.keepalive_interval ?? Math.floor(heartbeat.ttl / 3),
  }));

const probeSchema = z.strictObject({
  enabled: z.boolean({error: 'true or false'}).default(true),
  timeout: duration({min: 100, max: 300_000}).default(5000),
  concurrency: int('an integer from 1 to 1000', 1, 1000).default(10),
});

const filePath = z.string({error: 'a file path'}).min(1, {error: 'a non-empty file path'});

const etcdTlsSchema = z
  .strictObject({ca: filePath.optional(), cert: filePath.optional(), key: filePath.optional()})
  .superRefine((tls, ctx) => {
    if ((tls.cert === undefined) !== (tls.key === undefined)) {
      const missing = tls.cert === undefined ? 'cert' : 'key';
      const present = missing === 'cert' ? 'key' : 'cert';
      ctx.addIssue({
        code: 'custom',
        message: 'cert and key together',
        path: [missing],
        params: {found: `${present} without ${missing}`},
      });
    }
  });

const etcdEndpoint = checked('an etcd endpoint URL such as https://etcd-0.etcd:2379', (text) => {
  const url = parseUrl(text);
  return url !== undefined && (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
});

const storageTypes = ['memory', 'sqlite', 'etcd'] as const;

const storageSchema = z
  .discriminatedUnion(
    'type',
    [
      z.strictObject({type: z.literal('memory')}),
      z.strictObject({
        type: z.literal('sqlite'),
        path: filePath.default('./data/registry.db'),
      }),
      z
        .strictObject({
          type: z.literal('etcd'),
          endpoints: nonEmptyList(etcdEndpoint, 'a non-empty list of etcd endpoint URLs'),
          prefix: patterned('a key prefix starting with "/"', /^\/.*/).default('/kube-discovery/'),
          tls: etcdTlsSchema.optional(),
          username: z.string({error: 'a string'}).min(1, {error: 'a non-empty string'}).optional(),
          password_file: filePath.optional(),
          session_ttl: duration({min: 5000, max: 3_600_000}).default(15_000),
          dial_timeout: duration({min: 100, max: 300_000}).default(5000),
        })
        .superRefine((etcd, ctx) => {
          if (etcd.password_file !== undefined && etcd.username === undefined) {
            ctx.addIssue({
              code: 'custom',
              message: 'password_file only together with username',
              path: ['password_file'],
              params: {found: 'password_file without username'},
            });
          }
        }),
    ],
    {error: onlyType(`a map with type ${storageTypes.join(', ')}`)},
  )
  .prefault({type: 'sqlite'});

const serviceAccountPattern =
  /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$/;

const httpSchema = z.strictObject({
  listen_addr: listenAddr.default('127.0.0.1:3000'),
  auth: z
    .strictObject({
      token_file: filePath.optional(),
      allowed_service_accounts: z
        .array(patterned('namespace:serviceaccount, such as monitoring:dashboard', serviceAccountPattern), {
          error: 'a list of namespace:serviceaccount strings',
        })
        .optional(),
    })
    .optional(),
  // Bounds of /v1/watch; see the README's "Watch limits and resumption".
  watch: z
    .strictObject({
      max_watchers: int('an integer from 1 to 100000', 1, 100_000).default(256),
      max_buffered_bytes: int('an integer of bytes from 65536 to 1073741824', 65_536, 1_073_741_824).default(4 * 1024 * 1024),
      history: int('an integer from 1 to 1000000', 1, 1_000_000).default(4096),
    })
    .prefault({}),
});

const metricsSchema = z.strictObject({listen_addr: listenAddr.optional()});

const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

const logSchema = z.strictObject({
  level: z.enum(logLevels).default('info'),
  format: z.enum(['json', 'text']).default('json'),
});

/** The whole config file. Parse with `parseConfig` (src/config/load.ts) to get line-accurate errors. */
export const configSchema = z.strictObject({
  version: z.literal('v1', {error: 'v1'}),
  discovery_service: discoveryServiceSchema,
  kubernetes_service: kubernetesServiceSchema.prefault({}),
  heartbeat: heartbeatSchema.prefault({}),
  probe: probeSchema.prefault({}),
  storage: storageSchema,
  http: httpSchema.prefault({}),
  metrics: metricsSchema.prefault({}),
  log: logSchema.prefault({}),
});

/** The effective config: YAML keys kept, defaults filled, durations in milliseconds. */
export type Config = z.output<typeof configSchema>;
/** `discovery_service`; exactly one of `poll_interval` (ms) and `schedule` (cron) is set. */
export type DiscoveryServiceConfig = Config['discovery_service'];
/** One `discovery_service.aws[]` matcher. */
export type AwsMatcher = DiscoveryServiceConfig['aws'][number];
/** One `discovery_service.azure[]` matcher. */
export type AzureMatcher = DiscoveryServiceConfig['azure'][number];
/** Azure cloud names accepted in `azure[].cloud`. */
export type AzureCloudName = AzureMatcher['cloud'];
/** `kubernetes_service`: static labels and dynamic label commands for every kube_server. */
export type KubernetesServiceConfig = Config['kubernetes_service'];
/** One dynamic label command; `period` in ms. */
export type DynamicLabelCommand = KubernetesServiceConfig['commands'][number];
/** `heartbeat`, with `keepalive_interval` always filled (ms). */
export type HeartbeatConfig = Config['heartbeat'];
/** `probe`. */
export type ProbeConfig = Config['probe'];
/** `storage`, discriminated by `type`. */
export type StorageConfig = Config['storage'];
/** `storage` with `type: etcd`. */
export type EtcdStorageConfig = Extract<StorageConfig, {type: 'etcd'}>;
/** `storage` with `type: sqlite`. */
export type SqliteStorageConfig = Extract<StorageConfig, {type: 'sqlite'}>;
/** `http`: API listener and its authentication. */
export type HttpConfig = Config['http'];
/** `metrics`: optional separate listener for /metrics. */
export type MetricsConfig = Config['metrics'];
/** `log`. */
export type LogConfig = Config['log'];
/** Log levels accepted in `log.level`. */
export type LogLevel = LogConfig['level'];

/** The storage types, in the order error messages list them. */
export const knownStorageTypes: readonly string[] = storageTypes;

/** A human reason a cron expression is invalid (node-cron's field errors), for messages. */
function explainCron(expression: string): string {
  const detail = validateCronDetailed(expression);
  return detail.errors.map((e) => e.message).join('; ');
}
