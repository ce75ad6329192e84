/**
 * The Teleport drop-in: Teleport's documented configs load unchanged through `config check`,
 * with one warning listing what is ignored and why; what neither Teleport nor this service
 * knows is still an error with line, column and a suggestion.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {parse} from 'yaml';
import {runConfigCheck} from '../../src/cli/config-check.ts';
import {parseConfig} from '../../src/config/load.ts';
import {configWarnings} from '../../src/config/warnings.ts';
import {captureIo} from '../helpers/env.ts';
import {problemsOf} from './problems.ts';

const fixture = (name: string): string => new URL(`./teleport/${name}`, import.meta.url).pathname;

async function check(file: string): Promise<{code: number; printed: Record<string, Record<string, unknown>>; warnings: string[]}> {
  const cap = captureIo({});
  const code = await runConfigCheck(['-c', file], cap.io);
  const warnings = cap
    .stderr()
    .split('\n')
    .filter((l) => l.includes(': warning: '))
    .map((l) => l.slice(l.indexOf(': warning: ') + ': warning: '.length));
  return {code, printed: code === 0 ? (parse(cap.stdout()) as Record<string, Record<string, unknown>>) : {}, warnings};
}

const problemsOfTeleport = (text: string) => problemsOf(text, 'teleport.yaml');

describe("Teleport's documented configs pass config check", () => {
  it('the EKS guide\'s whole teleport.yaml: exit 0, its matcher kept, the other sections in one warning', async () => {
    const {code, printed, warnings} = await check(fixture('eks-teleport.yaml'));
    expect(code).toBe(0);
    expect(printed['discovery_service']).toMatchObject({enabled: true, discovery_group: 'aws-prod', aws: [{types: ['eks'], regions: ['*'], tags: {env: 'prod'}}]});
    const ignored = warnings.filter((w) => w.startsWith('Teleport settings this service does not use are ignored'));
    expect(ignored).toHaveLength(1);
    for (const key of ['teleport', 'auth_service', 'proxy_service', 'ssh_service', 'kubernetes_service.enabled', 'kubernetes_service.resources']) {
      expect(ignored[0]).toContain(key);
    }
    expect(ignored[0]).toContain("other Teleport services' sections");
  });

  it("the AKS guide's whole teleport.yaml: exit 0 with its azure matcher", async () => {
    const {code, printed, warnings} = await check(fixture('aks-teleport.yaml'));
    expect(code).toBe(0);
    expect(printed['discovery_service']).toMatchObject({
      discovery_group: 'aks-prod',
      azure: [{types: ['aks'], regions: ['*'], subscriptions: ['*'], resource_groups: ['*'], tags: {env: 'prod'}}],
    });
    expect(warnings.filter((w) => w.startsWith('Teleport settings'))).toHaveLength(1);
  });

  it("the config reference's discovery_service section alone: exit 0, other types and keys ignored, every warning said once", async () => {
    const {code, printed, warnings} = await check(fixture('discovery-reference.yaml'));
    expect(code).toBe(0);
    const service = printed['discovery_service'] as {aws: {types: string[]; tags: unknown; regions: string[]}[]; azure: {types: string[]}[]; discovery_group: string};
    // The EC2-only matcher does nothing here and is gone; the mixed one keeps eks; empty tags match everything.
    expect(service.aws).toEqual([
      expect.objectContaining({types: ['eks'], regions: ['us-west-2'], tags: {'*': '*'}, assume_role_arn: 'arn:aws:iam::123456789012:role/example-role-name'}),
      expect.objectContaining({types: ['eks'], regions: ['*'], tags: {'*': '*'}}),
    ]);
    expect(service.azure).toEqual([expect.objectContaining({types: ['aks']})]);
    expect(service.discovery_group).toBe('default');

    const [ignored, ...others] = warnings;
    expect(ignored).toMatch(/^Teleport settings this service does not use are ignored: /);
    for (const key of [
      'discovery_service.gcp',
      'discovery_service.kubernetes',
      'discovery_service.aws[0].install',
      'discovery_service.aws[0].ssm',
      'discovery_service.aws[1].integration',
      'discovery_service.aws[1].kube_app_discovery',
      'discovery_service.azure[0].install',
      'discovery_service.aws[0].types [ec2]',
      'discovery_service.aws[1].types [ec2, rds]',
      'discovery_service.azure[0].types [vm]',
    ]) {
      expect(ignored).toContain(key);
    }
    expect(ignored).toContain('this service discovers EKS and AKS clusters only');
    expect(warnings.filter((w) => w.startsWith('Teleport settings'))).toHaveLength(1);
    expect(others).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^discovery_service\.discovery_group is not set: using "default"\. Two deployments without a group .*delete each other's entries/),
        'discovery_service.aws[0] has no eks type (types [ec2]): it does nothing here.',
      ]),
    );
    // Keys this service implements (organization walk, access set-up) reach the schema: no "no effect" warning.
    expect(warnings.join('\n')).not.toMatch(/no effect/);
  });
});

describe('Teleport spellings and defaults', () => {
  const section = (enabled: string): string => `discovery_service:\n  enabled: ${enabled}\n  discovery_group: g\n  aws: [{types: [eks], regions: [us-east-1]}]\n`;

  it.each([
    ['yes', true],
    ['"yes"', true],
    ['Yes', true],
    ['on', true],
    ['true', true],
    ['"true"', true],
    ['no', false],
    ['"no"', false],
    ['off', false],
    ['false', false],
  ])('enabled: %s reads as %s', (spelling, expected) => {
    expect(parseConfig(section(spelling), 'teleport.yaml').discovery_service.enabled).toBe(expected);
  });

  it('rejects a spelling Teleport does not have either, naming the accepted ones', () => {
    expect(problemsOfTeleport(section('maybe'))).toEqual([
      {path: 'discovery_service.enabled', line: 2, column: 12, message: 'expected true or false (Teleport spellings yes/no, on/off too), found a string "maybe"'},
    ]);
  });

  it('reads absent, empty and null tags as {"*": "*"}', () => {
    const text = 'discovery_service:\n  discovery_group: g\n  aws:\n    - {types: [eks], regions: [us-east-1]}\n    - {types: [eks], regions: [us-east-1], tags: {}}\n    - types: [eks]\n      regions: [us-east-1]\n      tags:\n';
    expect(parseConfig(text, 'teleport.yaml').discovery_service.aws.map((m) => m.tags)).toEqual([{'*': '*'}, {'*': '*'}, {'*': '*'}]);
  });

  it('gives no Teleport warning for a native config', () => {
    const config = parseConfig('version: v1\ndiscovery_service:\n  discovery_group: g\n  aws: [{types: [eks], regions: [us-east-1]}]\n', 'discovery.yaml');
    expect(configWarnings(config)).toEqual([]);
  });
});

describe('what neither Teleport nor this service knows is an error at its line and column', () => {
  it('suggests the Teleport key a typo was meant to be', () => {
    const text = 'discovery_service:\n  discovery_group: g\n  aws:\n    - types: [eks]\n      regions: [us-east-1]\n      instal: {script_name: x}\n';
    expect(problemsOfTeleport(text)).toEqual([
      expect.objectContaining({path: 'discovery_service.aws[0].instal', line: 6, column: 7, message: expect.stringMatching(/found unknown key "instal" \(did you mean install\?\)$/)}),
    ]);
  });

  it('suggests our own key as before', () => {
    const problems = problemsOfTeleport('discovery_servce:\n  discovery_group: g\n');
    expect(problems).toContainEqual(expect.objectContaining({path: 'discovery_servce', line: 1, column: 1, message: expect.stringContaining('(did you mean discovery_service?)')}));
  });

  it('points into the file even after Teleport-only matchers and types were taken out', () => {
    const text = [
      'discovery_service:',
      '  discovery_group: g',
      '  aws:',
      '    - types: [ec2]',
      '      regions: [us-east-1]',
      '    - types: [rds, ekss]',
      '      regions: [us-east-1]',
      '    - types: [eks]',
      '      regions: [Mars]',
      '',
    ].join('\n');
    expect(problemsOfTeleport(text).map((p) => [p.path, p.line, p.column])).toEqual([
      ['discovery_service.aws[1].types[1]', 6, 20],
      ['discovery_service.aws[2].regions[0]', 9, 17],
    ]);
  });

  it('still rejects an unknown top-level section', () => {
    expect(problemsOfTeleport('discovery_service:\n  discovery_group: g\nwidget_service:\n  enabled: yes\n')).toEqual([
      expect.objectContaining({path: 'widget_service', line: 3, column: 1, message: expect.stringMatching(/^expected one of the keys .*found unknown key "widget_service"/)}),
    ]);
  });
});

describe('config check of a file holding only a discovery_service section', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kd-teleport-'));
  });
  afterAll(async () => {
    await rm(dir, {recursive: true, force: true});
  });

  it('loads with the default group and its warning', async () => {
    const file = join(dir, 'section.yaml');
    await writeFile(file, 'discovery_service:\n  enabled: "yes"\n  aws:\n    - types: ["eks"]\n      regions: ["us-west-2"]\n');
    const {code, printed, warnings} = await check(file);
    expect(code).toBe(0);
    expect(printed['version']).toBe('v1');
    expect(printed['discovery_service']).toMatchObject({discovery_group: 'default', aws: [{types: ['eks'], tags: {'*': '*'}}]});
    expect(warnings).toEqual([expect.stringContaining('discovery_group is not set')]);
  });
});

describe("a Teleport matcher's AWS integration (found by the adv13 review)", () => {
  // Teleport lists an EKS matcher with `integration` under that integration's role (AWS OIDC), in
  // the integration's account. Ignoring the key here listed the default credentials' account
  // instead: the integration's clusters were never registered, and the management account's were,
  // a different inventory from the one the pasted config asks for.
  it('refuses an integration without assume_role_arn or assume_role_name, at its key, line and column', () => {
    const text = [
      'discovery_service:',
      '  discovery_group: g',
      '  aws:',
      '    - types: [eks]',
      '      regions: [us-west-2]',
      '      integration: my-aws-integration',
      '',
    ].join('\n');
    expect(problemsOfTeleport(text)).toEqual([
      {
        path: 'discovery_service.aws[0].integration',
        line: 6,
        column: 20,
        message: expect.stringMatching(/^expected assume_role_arn with the integration's role ARN .*found integration "my-aws-integration" alone/),
      },
    ]);
  });

  it('still ignores an integration next to assume_role_arn (the role names the account), with the warning', () => {
    const text = 'discovery_service:\n  discovery_group: g\n  aws:\n    - {types: [eks], regions: [us-west-2], integration: i, assume_role_arn: "arn:aws:iam::123456789012:role/r"}\n';
    const config = parseConfig(text, 'teleport.yaml');
    expect(config.discovery_service.aws[0]?.assume_role_arn).toBe('arn:aws:iam::123456789012:role/r');
    expect(configWarnings(config).join('\n')).toContain('discovery_service.aws[0].integration');
  });
});
