/** Config of `management_groups` on an azure matcher: accepted ids and located errors. */
import {describe, expect, it} from 'vitest';
import {parseConfig} from '../../src/config/load.ts';
import {itRejects, type RejectionCase} from './problems.ts';

function withMatcher(lines: string): string {
  return `version: v1\ndiscovery_service:\n  discovery_group: mgmt\n  azure:\n    - types: [aks]\n${lines}`;
}

describe('config: azure management_groups', () => {
  it('accepts group ids with subscriptions left at their default ["*"]', () => {
    const config = parseConfig(withMatcher('      management_groups: [mg-prod, "Platform_(EU).2", 72f988bf-86f1-41af-91ab-2d7cd011db47]\n'), 'discovery.yaml');
    expect(config.discovery_service.azure[0]).toMatchObject({
      subscriptions: ['*'],
      management_groups: ['mg-prod', 'Platform_(EU).2', '72f988bf-86f1-41af-91ab-2d7cd011db47'],
    });
  });

  it('accepts them next to an explicit subscriptions: ["*"]', () => {
    const config = parseConfig(withMatcher('      subscriptions: ["*"]\n      management_groups: [mg-prod]\n'), 'discovery.yaml');
    expect(config.discovery_service.azure[0]?.management_groups).toEqual(['mg-prod']);
  });

  it('leaves the key out when it is not given', () => {
    const config = parseConfig(withMatcher('      subscriptions: ["*"]\n'), 'discovery.yaml');
    expect(config.discovery_service.azure[0]).not.toHaveProperty('management_groups');
  });

  const cases: RejectionCase[] = [
    {
      name: 'explicit subscriptions',
      lines: '      subscriptions: [00000000-0000-0000-0000-0000000000aa]\n      management_groups: [mg-prod]\n',
      path: 'discovery_service.azure[0].management_groups',
      line: 7,
      column: 26,
      message: /expected management_groups only with subscriptions: \["\*"\].*found subscriptions: \["00000000-0000-0000-0000-0000000000aa"\]/,
    },
    {
      name: 'a resource id instead of a group id',
      lines: '      management_groups: [/providers/Microsoft.Management/managementGroups/mg-prod]\n',
      path: 'discovery_service.azure[0].management_groups[0]',
      line: 6,
      column: 27,
      message: /expected a management group id such as mg-prod.*not the display name or resource id.*found a string "\/providers/,
    },
    {
      name: 'a display name with spaces',
      lines: '      management_groups: ["Production Platform"]\n',
      path: 'discovery_service.azure[0].management_groups[0]',
      line: 6,
      column: 27,
      message: /expected a management group id .*found a string "Production Platform"/,
    },
    {
      name: 'an id ending in a period',
      lines: '      management_groups: [mg.]\n',
      path: 'discovery_service.azure[0].management_groups[0]',
      line: 6,
      column: 27,
      message: /expected a management group id/,
    },
    {
      name: '"*"',
      lines: '      management_groups: ["*"]\n',
      path: 'discovery_service.azure[0].management_groups[0]',
      line: 6,
      column: 27,
      message: /expected a management group id/,
    },
    {
      name: 'an empty list',
      lines: '      management_groups: []\n',
      path: 'discovery_service.azure[0].management_groups',
      line: 6,
      column: 26,
      message: /expected a non-empty list of management group ids \(leave the key out for every subscription\)/,
    },
    {
      name: 'the same group twice, in another case',
      lines: '      management_groups: [mg-prod, MG-Prod]\n',
      path: 'discovery_service.azure[0].management_groups[1]',
      line: 6,
      column: 36,
      message: /expected a list without duplicates, found "mg-prod" again \(first at item 0\)/,
    },
    {
      name: 'a single string instead of a list',
      lines: '      management_groups: mg-prod\n',
      path: 'discovery_service.azure[0].management_groups',
      line: 6,
      column: 26,
      message: /expected a non-empty list of management group ids/,
    },
  ];

  itRejects(cases, withMatcher);
});
