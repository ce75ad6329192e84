import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {formatDuration, parseDuration} from '../../src/config/duration.ts';
import {ConfigError, loadConfigFile, parseConfig} from '../../src/config/load.ts';
import {formatConfigYaml} from '../../src/config/print.ts';
import {problemsOf} from './problems.ts';

const examplePath = new URL('../../discovery.example.yaml', import.meta.url);

function minimal(extra = ''): string {
  return `version: v1\ndiscovery_service:\n  discovery_group: mgmt\n${extra}`;
}

describe('config: the example file', () => {
  it('loads and fills every default', async () => {
    const config = await loadConfigFile(examplePath.pathname);
    expect(config.discovery_service).toMatchObject({
      enabled: true,
      discovery_group: 'mgmt-prod',
      poll_interval: 300_000,
      concurrency: {sources: 20, per_region: 100},
    });
    expect(config.discovery_service.schedule).toBeUndefined();
    expect(config.discovery_service.aws).toHaveLength(3);
    expect(config.discovery_service.aws[0]).toEqual({types: ['eks'], regions: ['us-west-1'], tags: {env: 'prod'}});
    expect(config.discovery_service.aws[1]?.external_id).toBe('example-external-id');
    expect(config.discovery_service.azure[0]).toEqual({
      types: ['aks'],
      subscriptions: ['*'],
      resource_groups: ['*'],
      regions: ['*'],
      tags: {env: ['prod', 'staging']},
      cloud: 'AzurePublicCloud',
    });
    expect(config.kubernetes_service).toEqual({
      labels: {team: 'platform'},
      commands: [{name: 'hostname', command: ['hostname'], period: 3_600_000}],
    });
    expect(config.heartbeat).toEqual({ttl: 600_000, keepalive_interval: 200_000});
    expect(config.probe).toEqual({enabled: true, timeout: 5000, concurrency: 10});
    expect(config.storage).toEqual({type: 'sqlite', path: './data/registry.db'});
    expect(config.http).toEqual({listen_addr: '127.0.0.1:3000', watch: {max_watchers: 256, max_buffered_bytes: 4194304, history: 4096}});
    expect(config.metrics).toEqual({});
    expect(config.log).toEqual({level: 'info', format: 'json'});
  });

  it('a minimal config gets the documented defaults', () => {
    const config = parseConfig(minimal(), 'discovery.yaml');
    expect(config.discovery_service.aws).toEqual([]);
    expect(config.discovery_service.poll_interval).toBe(300_000);
    expect(config.storage).toEqual({type: 'sqlite', path: './data/registry.db'});
    expect(config.heartbeat.keepalive_interval).toBe(200_000);
  });

  it('fills matcher and etcd defaults', () => {
    const config = parseConfig(
      minimal(
        '  aws:\n    - {types: [eks], regions: ["*"]}\n' + 'storage: {type: etcd, endpoints: ["https://etcd-0:2379"]}\n',
      ),
      'discovery.yaml',
    );
    expect(config.discovery_service.aws[0]?.tags).toEqual({'*': '*'});
    expect(config.storage).toEqual({
      type: 'etcd',
      endpoints: ['https://etcd-0:2379'],
      prefix: '/kube-discovery/',
      session_ttl: 15_000,
      dial_timeout: 5000,
    });
  });

  it('fills kubernetes storage defaults; the namespace may come from the pod', () => {
    const config = parseConfig(minimal('storage: {type: kubernetes, namespace: kube-discovery}\n'), 'discovery.yaml');
    expect(config.storage).toEqual({type: 'kubernetes', namespace: 'kube-discovery', qps: 20, burst: 40, session_ttl: 15_000});
    expect(parseConfig(minimal('storage: {type: kubernetes}\n'), 'discovery.yaml').storage).toEqual({type: 'kubernetes', qps: 20, burst: 40, session_ttl: 15_000});
  });

  it('allow-list entries may name a discovered cluster by name or label selector', () => {
    const config = parseConfig(minimal('http:\n  auth:\n    allowed_service_accounts: [monitoring:grafana, prod-a/monitoring:grafana, "env=prod,team=a/apps:reader"]\n'), 'discovery.yaml');
    expect(config.http.auth?.allowed_service_accounts).toEqual(['monitoring:grafana', 'prod-a/monitoring:grafana', 'env=prod,team=a/apps:reader']);
  });

  it('a cron schedule replaces the poll interval default', () => {
    const config = parseConfig(minimal('  schedule: "*/5 * * * *"\n'), 'discovery.yaml');
    expect(config.discovery_service.schedule).toBe('*/5 * * * *');
    expect(config.discovery_service.poll_interval).toBeUndefined();
  });

  it('the printed effective config parses back to the same config', async () => {
    const text = await readFile(examplePath, 'utf8');
    const config = parseConfig(text, 'discovery.yaml');
    const printed = formatConfigYaml(config);
    expect(printed).toContain('poll_interval: 5m\n');
    expect(printed).toContain('keepalive_interval: 3m20s\n');
    expect(parseConfig(printed, 'printed.yaml')).toEqual(config);
  });
});

describe('config: durations', () => {
  it.each([
    ['90s', 90_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['500ms', 500],
    ['1.5h', 5_400_000],
    ['2h45m30.5s', 9_930_500],
    ['.5s', 500],
    ['1500us', 1.5],
  ])('parses %s', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['5', '0', '5 m', '-5m', '', 'm', '5x', '1h 30m', '+5m', '5M', 's5'])('rejects %j', (text) => {
    expect(() => parseDuration(text)).toThrow(/expected a duration with a unit/);
  });

  it.each([
    [300_000, '5m'],
    [5_400_000, '1h30m'],
    [90_000, '1m30s'],
    [500, '500ms'],
    [1500, '1.5s'],
    [3_600_000, '1h'],
    [3_605_000, '1h5s'],
    [0, '0s'],
  ])('formats %d ms as %s and back', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    if (ms > 0) expect(parseDuration(text)).toBe(ms);
  });
});

interface BadCase {
  readonly name: string;
  readonly yaml: string;
  readonly path: string;
  readonly line: number;
  readonly column?: number;
  readonly message: RegExp;
}

const bad: BadCase[] = [
  {
    name: 'typo in a key',
    yaml: minimal('  aws:\n    - types: [eks]\n      regoins: [us-east-1]\n'),
    path: 'discovery_service.aws[0].regoins',
    line: 6,
    column: 7,
    message: /expected one of the keys types, regions, .*found unknown key "regoins" \(did you mean regions\?\)/,
  },
  {
    name: 'unknown top-level key',
    yaml: minimal('heartbeats: {ttl: 5m}\n'),
    path: 'heartbeats',
    line: 4,
    column: 1,
    message: /found unknown key "heartbeats" \(did you mean heartbeat\?\)/,
  },
  {
    name: 'string instead of a list of regions',
    yaml: minimal('  aws:\n    - types: [eks]\n      regions: us-east-1\n'),
    path: 'discovery_service.aws[0].regions',
    line: 6,
    column: 16,
    message: /expected a non-empty list of region names, found a string "us-east-1"/,
  },
  {
    name: 'empty regions',
    yaml: minimal('  aws:\n    - types: [eks]\n      regions: []\n'),
    path: 'discovery_service.aws[0].regions',
    line: 6,
    column: 16,
    message: /expected a non-empty list of region names, found an empty list/,
  },
  {
    name: 'unknown matcher type gke',
    yaml: minimal('  aws:\n    - types: [gke]\n      regions: [us-east-1]\n'),
    path: 'discovery_service.aws[0].types[0]',
    line: 5,
    column: 15,
    message: /expected eks .*found a string "gke"/,
  },
  {
    name: 'bad duration without a unit',
    yaml: minimal('  poll_interval: 5\n'),
    path: 'discovery_service.poll_interval',
    line: 4,
    column: 18,
    message: /expected a duration with a unit such as 90s, 5m.*found a number 5/,
  },
  {
    name: 'poll interval below the minimum',
    yaml: minimal('  poll_interval: 2s\n'),
    path: 'discovery_service.poll_interval',
    line: 4,
    column: 18,
    message: /expected a duration of at least 10s, found a string "2s"/,
  },
  {
    name: 'both poll_interval and schedule',
    yaml: minimal('  poll_interval: 5m\n  schedule: "*/5 * * * *"\n'),
    path: 'discovery_service.schedule',
    line: 5,
    column: 13,
    message: /expected either poll_interval or schedule, found both/,
  },
  {
    name: 'bad cron expression',
    yaml: minimal('  schedule: "every five minutes"\n'),
    path: 'discovery_service.schedule',
    line: 4,
    column: 13,
    message: /expected a cron expression .*found "every five minutes" \(expected 5 or 6 fields but got 3\)/,
  },
  {
    name: 'external_id without assume_role_arn',
    yaml: minimal('  aws:\n    - types: [eks]\n      regions: ["*"]\n      external_id: abc\n'),
    path: 'discovery_service.aws[0].external_id',
    line: 7,
    column: 20,
    message: /expected external_id only together with assume_role_arn/,
  },
  {
    name: 'bad role ARN',
    yaml: minimal('  aws:\n    - types: [eks]\n      regions: ["*"]\n      assume_role_arn: arn:aws:iam::12:user/bob\n'),
    path: 'discovery_service.aws[0].assume_role_arn',
    line: 7,
    column: 24,
    message: /expected an IAM role ARN .*found a string "arn:aws:iam::12:user\/bob"/,
  },
  {
    name: 'bad kubernetes namespace',
    yaml: minimal('storage: {type: kubernetes, namespace: Kube_Discovery}\n'),
    path: 'storage.namespace',
    line: 4,
    column: 40,
    message: /expected a namespace name such as kube-discovery, found a string "Kube_Discovery"/,
  },
  {
    name: 'unknown storage type',
    yaml: minimal('storage: {type: postgres}\n'),
    path: 'storage.type',
    line: 4,
    column: 17,
    message: /expected one of memory, sqlite, etcd, kubernetes, found a string "postgres"/,
  },
  {
    name: 'bad Kubernetes label key',
    yaml: minimal('kubernetes_service:\n  labels:\n    team: platform\n    "bad key!": x\n'),
    path: 'kubernetes_service.labels["bad key!"]',
    line: 7,
    column: 5,
    message: /expected a Kubernetes label key .*found the key "bad key!"/,
  },
  {
    name: 'invalid regex in tags',
    yaml: minimal('  aws:\n    - types: [eks]\n      regions: ["*"]\n      tags: {env: "^([a$"}\n'),
    path: 'discovery_service.aws[0].tags.env',
    line: 7,
    column: 19,
    message: /expected a valid regular expression, found "\^\(\[a\$" \(Unterminated character class\)/,
  },
  {
    name: 'YAML syntax error',
    yaml: minimal('  aws: [unclosed\nheartbeat: {}\n'),
    path: '',
    line: 5,
    column: 1,
    message: /expected valid YAML, found .*flow sequence/,
  },
  {
    name: 'duplicate key',
    yaml: minimal('  poll_interval: 5m\n  enabled: true\n  poll_interval: 10m\n'),
    path: 'discovery_service.poll_interval',
    line: 6,
    column: 3,
    message: /expected each key once per map, found "poll_interval" again \(first on line 4\)/,
  },
  {
    name: 'discovery group with a slash',
    yaml: 'version: v1\ndiscovery_service:\n  discovery_group: mgmt/prod\n',
    path: 'discovery_service.discovery_group',
    line: 3,
    column: 20,
    message: /expected a discovery group name.*found a string "mgmt\/prod"/,
  },
  {
    name: 'a version neither this service nor Teleport has',
    yaml: 'version: v4\ndiscovery_service:\n  discovery_group: mgmt\n',
    path: 'version',
    line: 1,
    column: 10,
    message: /expected v1 \(or a Teleport config version v2, v3\), found a string "v4"/,
  },
  {
    name: 'bad listen_addr',
    yaml: minimal('http:\n  listen_addr: localhost\n'),
    path: 'http.listen_addr',
    line: 5,
    column: 16,
    message: /expected an address host:port .*found a string "localhost"/,
  },
  {
    name: 'port out of range',
    yaml: minimal('metrics: {listen_addr: "0.0.0.0:70000"}\n'),
    path: 'metrics.listen_addr',
    line: 4,
    column: 24,
    message: /expected an address host:port/,
  },
  {
    name: 'ttl too short',
    yaml: minimal('heartbeat: {ttl: 10s}\n'),
    path: 'heartbeat.ttl',
    line: 4,
    column: 18,
    message: /expected a duration of at least 30s, found a string "10s"/,
  },
  {
    name: 'keepalive not shorter than ttl',
    yaml: minimal('heartbeat:\n  ttl: 1m\n  keepalive_interval: 1m\n'),
    path: 'heartbeat.keepalive_interval',
    line: 6,
    column: 23,
    message: /expected a keepalive_interval shorter than ttl \(1m\), found a string "1m"/,
  },
  {
    name: 'bad azure cloud name',
    yaml: minimal('  azure:\n    - types: [aks]\n      cloud: AzureGermanCloud\n'),
    path: 'discovery_service.azure[0].cloud',
    line: 6,
    column: 14,
    message: /expected one of AzurePublicCloud, AzureChinaCloud, AzureUSGovernment, found a string "AzureGermanCloud"/,
  },
  {
    name: 'plain http resource manager endpoint off loopback',
    yaml: minimal('  azure:\n    - types: [aks]\n      resource_manager_endpoint: http://management.example.com\n'),
    path: 'discovery_service.azure[0].resource_manager_endpoint',
    line: 6,
    column: 34,
    message: /expected an https URL \(http only for a loopback host\)/,
  },
  {
    name: 'etcd cert without key',
    yaml: minimal('storage:\n  type: etcd\n  endpoints: ["https://etcd:2379"]\n  tls: {cert: /tls/cert.pem}\n'),
    path: 'storage.tls.key',
    line: 7,
    column: 8,
    message: /expected cert and key together, found cert without key/,
  },
  {
    name: 'wrong type: boolean as a string',
    yaml: minimal('probe: {enabled: "yes"}\n'),
    path: 'probe.enabled',
    line: 4,
    column: 18,
    message: /expected true or false, found a string "yes"/,
  },
  {
    name: 'bad log level',
    yaml: minimal('log: {level: verbose}\n'),
    path: 'log.level',
    line: 4,
    column: 14,
    message: /expected one of trace, debug, info, warn, error, fatal, found a string "verbose"/,
  },
  {
    name: 'number as a label value',
    yaml: minimal('kubernetes_service:\n  labels: {tier: 1}\n'),
    path: 'kubernetes_service.labels.tier',
    line: 5,
    column: 18,
    message: /expected a string \(quote numbers and booleans\), found a number 1/,
  },
  {
    name: 'bad service account in the allow-list',
    yaml: minimal('http:\n  auth:\n    allowed_service_accounts: [monitoring]\n'),
    path: 'http.auth.allowed_service_accounts[0]',
    line: 6,
    column: 32,
    message: /expected namespace:serviceaccount.*found a string "monitoring"/,
  },
];

describe('config: bad configs', () => {
  it.each(bad)('$name', ({yaml, path, line, column, message}) => {
    const problems = problemsOf(yaml);
    const problem = problems.find((p) => p.path === path);
    expect(problem, `no problem at ${path}; got ${JSON.stringify(problems)}`).toBeDefined();
    expect(problem?.line).toBe(line);
    if (column !== undefined) expect(problem?.column).toBe(column);
    expect(problem?.message).toMatch(message);
    expect(problem?.message).toMatch(/^expected .*, found /s);
  });

  it('reports several problems at once, in file order, formatted with file:line:column', () => {
    const text = [
      'version: v9',
      'discovery_service:',
      '  discovery_group: mgmt',
      '  poll_interval: soon',
      '  aws:',
      '    - types: [eks]',
      '      regions: []',
      'heartbeat: {ttl: 1m, ttl: 2m}',
      'storage: {type: redis}',
      '',
    ].join('\n');
    let error: ConfigError | undefined;
    try {
      parseConfig(text, 'discovery.yaml');
    } catch (caught) {
      error = caught as ConfigError;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error?.problems.map((p) => [p.path, p.line])).toEqual([
      ['version', 1],
      ['discovery_service.poll_interval', 4],
      ['discovery_service.aws[0].regions', 7],
      ['heartbeat.ttl', 8],
      ['storage.type', 9],
    ]);
    expect(error?.message.split('\n')[0]).toBe('discovery.yaml:1:10: version: expected v1 (or a Teleport config version v2, v3), found a string "v9"');
    expect(error?.message.split('\n')[2]).toBe(
      'discovery.yaml:7:16: discovery_service.aws[0].regions: expected a non-empty list of region names, found an empty list',
    );
  });

  it('an empty file is rejected', () => {
    expect(problemsOf('')).toEqual([{path: '', line: 1, column: 1, message: 'expected a map, found an empty document'}]);
  });
});

describe('config: files', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kube-discovery-config-'));
  });
  afterAll(async () => {
    await rm(dir, {recursive: true, force: true});
  });

  it('a missing file is a ConfigError naming the path', async () => {
    const path = join(dir, 'nope.yaml');
    await expect(loadConfigFile(path)).rejects.toThrow(`${path}: expected a readable YAML config file, found no such file`);
    await expect(loadConfigFile(path)).rejects.toBeInstanceOf(ConfigError);
  });

  it('a directory is a ConfigError naming the path', async () => {
    await expect(loadConfigFile(dir)).rejects.toThrow(`${dir}: expected a readable YAML config file, found a directory`);
  });

  it('problems carry the file path given', async () => {
    const path = join(dir, 'bad.yaml');
    await writeFile(path, minimal('log: {format: xml}\n'));
    await expect(loadConfigFile(path)).rejects.toThrow(`${path}:4:15: log.format: expected one of json, text, found a string "xml"`);
  });
});
