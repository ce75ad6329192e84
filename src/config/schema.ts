/**
 * The config schema: Teleport-compatible snake_case keys, strict objects so a
 * typo is an error rather than a silently disabled matcher, defaults filled in, durations
 * turned into milliseconds. Every issue message is the "expected ..." phrase; the loader
 * adds the path, the line and what was found.
 */
import {statSync} from 'node:fs';
import {validate as validateCron, validateDetailed as validateCronDetailed} from 'node-cron';
import * as z from 'zod';
import {MatcherError, compileTagMatcher} from '../../matchers/index.ts';
import {durationExpectation, formatDuration, tryParseDuration} from './duration.ts';
import {isValidLabelKey, labelKeyExpectation} from './label-key.ts';
import {hideUrlUserInfo} from '../observability/redact.ts';

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
      // Name the bound that was crossed: a huge value is too long, not too short.
      const range =
        max !== maxTimerMs
          ? `between ${formatDuration(bounds.min)} and ${formatDuration(max)}`
          : ms > max
            ? `of at most ${formatDuration(max)}`
            : `of at least ${formatDuration(bounds.min)}`;
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

/**
 * Reports the first repeated entry of a list, at the repeat, in one pass (a Set): a list of
 * 500,000 copies fails on its second item without quadratic work, and with one problem, not 499,999.
 */
function rejectDuplicates(items: readonly unknown[], ctx: z.core.$RefinementCtx): void {
  const seen = new Map<unknown, number>();
  for (let index = 0; index < items.length; index++) {
    const item = items[index];
    const first = seen.get(item);
    if (first !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'a list without duplicates',
        path: [index],
        params: {found: `${JSON.stringify(typeof item === 'string' ? hideUrlUserInfo(item) : item)} again (first at item ${first})`},
      });
      return;
    }
    seen.set(item, index);
  }
}

/** A list of names where `*` means "all", alone or not at all; no name twice. */
function namesOrWildcard(item: z.ZodString, expect: string): z.ZodArray<z.ZodString> {
  return nonEmptyList(item, expect).superRefine((names, ctx) => {
    if (names.length > 1 && names.includes('*')) {
      ctx.addIssue({code: 'custom', message: `either ["*"] alone or ${expect.replace(/^a non-empty /, 'a ')}`});
    }
    rejectDuplicates(names, ctx);
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
  // Empty tags match every cluster, as in Teleport.
  .transform((tags) => (Object.keys(tags).length === 0 ? {...defaultTags} : tags));

const defaultTags = {'*': '*'};

/** `types: [eks]` and friends: the only type a cloud supports, at least once. */
function typesOf<T extends string>(type: T, cloud: string): z.ZodArray<z.ZodEnum<{[K in T]: K}>> {
  return nonEmptyList(
    z.enum([type] as [T], {error: `${type} (the only type of an ${cloud} matcher)`}),
    `a non-empty list of types, such as [${type}]`,
  ).superRefine(rejectDuplicates) as unknown as z.ZodArray<z.ZodEnum<{[K in T]: K}>>;
}

const awsRegion = patterned('an AWS region name such as us-east-1, or "*"', /^(?:\*|[a-z]{2}(?:-[a-z]+)+-\d{1,2})$/);

// --- Automatic EKS access set-up (issue 18; src/access/setup-step.ts). Off unless setup_access_for_arn is set.
const setupAccessKeys = {
  setup_access_for_arn: patterned(
    'an IAM role or user ARN such as arn:aws:iam::123456789012:role/kube-discovery',
    /^arn:(?:aws|aws-cn|aws-us-gov):iam::\d{12}:(?:role|user)\/[\w+=,.@/-]+$/,
  ).optional(),
  setup_access_group: patterned(
    'a Kubernetes group name not starting with system: or eks:, such as kube-discovery',
    /^(?!system:|eks:)[a-z0-9](?:[-a-z0-9.:]{0,61}[a-z0-9])?$/,
  ).optional(),
};
// --- end of automatic access set-up keys
// --- AWS Organizations (issue 17): `assume_role_name` + `organization` on an aws matcher. ---

const organizationIdExpectation = 'an organization id such as o-abcde12345 (o- and 10 to 32 lowercase letters or digits)';
const ouIdExpectation = 'an organizational unit id such as ou-abcd-11111111, or "*"';
const ouIdPattern = /^ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}$/;

/** `organization:` of an aws matcher: which organization, and which OUs of it (an OU includes its child OUs). */
const awsOrganizationSchema = z.strictObject({
  organization_id: patterned(organizationIdExpectation, /^o-[a-z0-9]{10,32}$/),
  organizational_units: z
    .strictObject({
      include: namesOrWildcard(patterned(ouIdExpectation, new RegExp(`^(?:\\*|${ouIdPattern.source.slice(1, -1)})$`)), 'a non-empty list of OU ids').default(['*']),
      exclude: z
        .array(patterned('an organizational unit id such as ou-abcd-11111111', ouIdPattern), {error: 'a list of OU ids'})
        .default([]),
    })
    .prefault({}),
});

/** An IAM role name (no path), the same in every member account. */
const assumeRoleName = patterned('an IAM role name such as kube-discovery (1 to 64 of letters, digits and +=,.@_-)', /^[\w+=,.@-]{1,64}$/);

/** The cross-key rules of `organization`, `assume_role_name` and `assume_role_arn`; every issue names its key. */
function refineOrganization(
  matcher: {organization?: unknown; assume_role_name?: string | undefined; assume_role_arn?: string | undefined},
  ctx: z.core.$RefinementCtx,
): void {
  if (matcher.organization !== undefined && matcher.assume_role_name === undefined) {
    ctx.addIssue({
      code: 'custom',
      message: 'assume_role_name together with organization (the role to assume in every member account)',
      path: ['organization'],
      params: {found: 'organization without assume_role_name'},
    });
  }
  if (matcher.organization !== undefined && matcher.assume_role_arn !== undefined) {
    ctx.addIssue({
      code: 'custom',
      message: 'either assume_role_arn (one account) or organization (every member account)',
      path: ['assume_role_arn'],
      params: {found: 'both'},
    });
  }
  if (matcher.assume_role_name !== undefined && matcher.organization === undefined) {
    ctx.addIssue({
      code: 'custom',
      message: 'assume_role_name only together with organization',
      path: ['assume_role_name'],
      params: {found: 'assume_role_name without organization'},
    });
  }
}

// --- end of AWS Organizations block ---

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
    ...setupAccessKeys,
    assume_role_name: assumeRoleName.optional(),
    organization: awsOrganizationSchema.optional(),
    // Teleport's AWS integration: reaches here only without a role naming the account (src/config/teleport.ts), and is refused.
    integration: z.unknown().optional(),
  })
  .superRefine((matcher, ctx) => {
    if (matcher.integration !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message:
          "assume_role_arn with the integration's role ARN (Teleport lists this matcher under its integration's role, in that account; without a role this service would list the default credentials' account instead)",
        path: ['integration'],
        params: {found: `integration ${JSON.stringify(matcher.integration)} alone`},
      });
    }
    if (matcher.external_id !== undefined && matcher.assume_role_arn === undefined && matcher.assume_role_name === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'external_id only together with assume_role_arn or assume_role_name',
        path: ['external_id'],
        params: {found: 'external_id without assume_role_arn'},
      });
    }
    if (matcher.setup_access_group !== undefined && matcher.setup_access_for_arn === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'setup_access_group only together with setup_access_for_arn',
        path: ['setup_access_group'],
        params: {found: 'setup_access_group without setup_access_for_arn'},
      });
    }
    refineOrganization(matcher, ctx);
  });

const azureClouds = ['AzurePublicCloud', 'AzureChinaCloud', 'AzureUSGovernment'] as const;

// --- Azure management groups (issue 17, src/clouds/azure/management-groups.ts) ---
const managementGroupExpectation = 'a management group id such as mg-prod (up to 90 letters, digits, -, _, ., ( and ), not ending in .; the id, not the display name or resource id)';

/** `management_groups:` of an azure matcher: narrows `subscriptions: ["*"]` to the subscriptions under these groups. */
const managementGroupsSchema = nonEmptyList(
  patterned(managementGroupExpectation, /^(?!.*\.$)[\w().-]{1,90}$/),
  'a non-empty list of management group ids (leave the key out for every subscription)',
).superRefine((groups, ctx) => rejectDuplicates(groups.map((g) => g.toLowerCase()), ctx));

/** `management_groups` scopes the `"*"` subscription walk; next to explicit subscriptions it would silently drop some. */
function refineManagementGroups(matcher: {subscriptions: readonly string[]; management_groups?: readonly string[] | undefined}, ctx: z.core.$RefinementCtx): void {
  if (matcher.management_groups !== undefined && !(matcher.subscriptions.length === 1 && matcher.subscriptions[0] === '*')) {
    ctx.addIssue({
      code: 'custom',
      message: 'management_groups only with subscriptions: ["*"] (it narrows every visible subscription to those under the groups)',
      path: ['management_groups'],
      params: {found: `subscriptions: ${JSON.stringify(matcher.subscriptions)}`},
    });
  }
}
// --- end of Azure management groups block ---

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
  })
    .superRefine((text, ctx) => {
      const url = parseUrl(text);
      // ARM takes bearer tokens only: credentials in the URL never serve, and `config check` (or an error) would print them.
      if (url !== undefined && (url.username !== '' || url.password !== '')) {
        ctx.addIssue({
          code: 'custom',
          message: 'an https URL without credentials in it (ARM is reached with the Entra ID token of the matcher\'s identity)',
          params: {found: 'a URL with a user name or password in it (not shown)'},
        });
      }
    })
    .optional(),
  client_id: patterned('a client id (a GUID)', guidPattern).optional(),
  // Automatic AKS access set-up (issue 18, src/access/aks-setup-step.ts): an Entra object id; off unless set.
  setup_access_for_principal_id: patterned('an Entra object id (a GUID such as 00000000-0000-0000-0000-000000000000)', guidPattern).optional(),
  management_groups: managementGroupsSchema.optional(),
}).superRefine(refineManagementGroups);

const cronExpectation = 'a cron expression such as "*/5 * * * *"';

const discoveryGroupExpectation =
  'a discovery group name: lowercase letters, digits, ".", "_" and "-", starting and ending alphanumeric, at most 63 characters';

const discoveryServiceSchema = z
  .strictObject({
    enabled: z.boolean({error: 'true or false (Teleport spellings yes/no, on/off too)'}).default(true),
    discovery_group: patterned(discoveryGroupExpectation, /^(?=.{1,63}$)[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$/),
    poll_interval: duration({min: 10_000}).optional(),
    // Incremental discovery: each cluster's full re-description period; `0s` describes every cluster every cycle.
    refresh_interval: z.union([z.literal('0s').transform(() => 0), duration({min: 60_000})]).default(3_600_000),
    // Client-side rate shaping of AWS calls per (account, region, operation); overrides the defaults per operation.
    aws_rate_limits: z
      .record(z.string().regex(/^(\*|[A-Z][A-Za-z]+)$/, {error: 'an AWS operation name such as DescribeCluster, or "*"'}), z.strictObject({rate_per_second: z.number().positive(), burst: z.number().int().min(1)}))
      .optional(),
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
        per_region: int('an integer from 1 to 1000', 1, 1000).default(100),
      })
      .prefault({}),
    // Every cloud call has a deadline: a peer that never answers fails its source as `timeout`.
    request_timeout: duration({min: 100, max: 600_000}).default(20_000),
    // A cycle's sources still running after this fail as `timeout` and the cycle counts an overrun.
    cycle_timeout: duration({min: 1000}).optional(),
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
    if (service.cycle_timeout !== undefined && service.poll_interval !== undefined && service.cycle_timeout >= service.poll_interval) {
      ctx.addIssue({
        code: 'custom',
        message: `a duration below poll_interval (${formatDuration(service.poll_interval)}), so a stuck cycle ends before the next is due`,
        path: ['cycle_timeout'],
        params: {found: formatDuration(service.cycle_timeout)},
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

/** A file that must exist when the config is loaded (a missing token file would make every request fail). */
const existingFile = filePath.superRefine((file, ctx) => {
  let found: string | undefined;
  try {
    if (!statSync(file).isFile()) found = `${JSON.stringify(file)}, which is not a regular file`;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    found = code === 'ENOENT' ? `${JSON.stringify(file)}, which does not exist` : `${JSON.stringify(file)}, which cannot be read (${code ?? 'error'})`;
  }
  if (found) ctx.addIssue({code: 'custom', message: 'an existing, readable file', params: {found}});
});

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

const ETCD_ENDPOINT = 'an etcd endpoint URL such as https://etcd-0.etcd:2379';
const etcdEndpoint = checked(ETCD_ENDPOINT, (text) => {
  const url = parseUrl(text);
  return url !== undefined && (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
}).superRefine((text, ctx) => {
  const url = parseUrl(text);
  // The client never uses credentials in the URL, but every etcd error would quote them: refused, and never echoed.
  if (url !== undefined && (url.username !== '' || url.password !== '')) {
    ctx.addIssue({
      code: 'custom',
      message: `${ETCD_ENDPOINT} without credentials in it (set storage.username, and storage.password_file or $KUBE_DISCOVERY_ETCD_PASSWORD)`,
      params: {found: 'a URL with a user name or password in it (not shown)'},
    });
  }
});

const storageTypes = ['memory', 'sqlite', 'etcd', 'kubernetes'] as const;

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
          endpoints: nonEmptyList(etcdEndpoint, 'a non-empty list of etcd endpoint URLs').superRefine(rejectDuplicates),
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
      z.strictObject({
        type: z.literal('kubernetes'),
        // A namespace is a DNS label; empty means the pod's own (in-cluster) or the kubeconfig context's.
        namespace: patterned('a namespace name such as kube-discovery', /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/).optional(),
        kubeconfig: filePath.optional(),
        context: z.string({error: 'a string'}).min(1, {error: 'a non-empty string'}).optional(),
        qps: z.number({error: 'a number'}).positive({error: 'a number > 0'}).default(20),
        burst: z.number({error: 'a number'}).int({error: 'an integer'}).min(1, {error: 'an integer >= 1'}).default(40),
        // leaseDurationSeconds of the leader Lease: how long a crashed leader blocks a successor.
        session_ttl: duration({min: 2000, max: 3_600_000}).default(15_000),
      }),
    ],
    {error: onlyType(`a map with type ${storageTypes.join(', ')}`)},
  )
  .prefault({type: 'sqlite'});

// Optionally prefixed by a discovered cluster: its kube_server name or a k=v[,k=v] label selector, then "/".
const serviceAccountPattern =
  /^(?:[^/\s:]+\/)?[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$/;

const httpSchema = z.strictObject({
  listen_addr: listenAddr.default('127.0.0.1:3000'),
  auth: z
    .strictObject({
      token_file: existingFile.optional(),
      allowed_service_accounts: z
        .array(patterned('namespace:serviceaccount, optionally after a discovered cluster (name or label selector) and "/", such as monitoring:dashboard or env=prod/monitoring:grafana', serviceAccountPattern), {
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

// A Lease election for storages whose own election is not wanted (etcd) or not shared (see README).
const leaderElectionSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('kubernetes_lease'),
      namespace: patterned('a namespace name such as kube-discovery', /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/).optional(),
      kubeconfig: filePath.optional(),
      context: z.string({error: 'a string'}).min(1, {error: 'a non-empty string'}).optional(),
      // leaseDurationSeconds: how long a crashed leader blocks its successor.
      lease_duration: duration({min: 2000, max: 3_600_000}).default(15_000),
    }),
  ],
  {error: onlyType('a map with type kubernetes_lease')},
);

/** The whole config file. Parse with `parseConfig` (src/config/load.ts) to get line-accurate errors. */
export const configSchema = z.strictObject({
  version: z.literal('v1', {error: 'v1 (or a Teleport config version v2, v3)'}),
  discovery_service: discoveryServiceSchema,
  kubernetes_service: kubernetesServiceSchema.prefault({}),
  heartbeat: heartbeatSchema.prefault({}),
  probe: probeSchema.prefault({}),
  storage: storageSchema,
  http: httpSchema.prefault({}),
  metrics: metricsSchema.prefault({}),
  log: logSchema.prefault({}),
  leader_election: leaderElectionSchema.optional(),
}).superRefine((config, ctx) => {
  // Followers serve their own storage: a file only the leader writes would leave them empty.
  if (config.leader_election && (config.storage.type === 'sqlite' || config.storage.type === 'memory')) {
    ctx.addIssue({
      code: 'custom',
      message: 'a storage the replicas share (etcd or kubernetes): with sqlite or memory each replica has its own registry',
      path: ['leader_election', 'type'],
      params: {found: `${config.leader_election.type} with storage ${config.storage.type}`},
    });
  }
});

/** The effective config: YAML keys kept, defaults filled, durations in milliseconds. */
export type Config = z.output<typeof configSchema>;
/** `discovery_service`; exactly one of `poll_interval` (ms) and `schedule` (cron) is set. */
export type DiscoveryServiceConfig = Config['discovery_service'];
/** One `discovery_service.aws[]` matcher. */
export type AwsMatcher = DiscoveryServiceConfig['aws'][number];
/** `aws[].organization`: the organization and OUs whose member accounts a matcher covers. */
export type AwsOrganizationMatcher = NonNullable<AwsMatcher['organization']>;
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
/** `storage` with `type: kubernetes`. */
export type KubernetesStorageConfig = Extract<StorageConfig, {type: 'kubernetes'}>;
/** `leader_election` with `type: kubernetes_lease`; `lease_duration` in ms. */
export type LeaderElectionConfig = NonNullable<Config['leader_election']>;
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

/** A human reason a cron expression is invalid (node-cron's field errors), for messages. */
function explainCron(expression: string): string {
  const detail = validateCronDetailed(expression);
  return detail.errors.map((e) => e.message).join('; ');
}
