/** Config of organization-wide AWS matchers: Teleport's keys, their defaults and located errors. */
import {describe, expect, it} from 'vitest';
import {parseConfig} from '../../src/config/load.ts';
import {itRejects, type RejectionCase} from './problems.ts';

function withMatcher(lines: string): string {
  return `version: v1\ndiscovery_service:\n  discovery_group: mgmt\n  aws:\n    - types: [eks]\n      regions: ["*"]\n${lines}`;
}

describe('config: organization matchers', () => {
  it('accepts Teleport keys and fills include ["*"] and exclude []', () => {
    const config = parseConfig(
      withMatcher(
        '      assume_role_name: kube-discovery\n      external_id: ext-1\n      organization:\n        organization_id: o-abcde12345\n',
      ),
      'discovery.yaml',
    );
    expect(config.discovery_service.aws[0]).toEqual({
      types: ['eks'],
      regions: ['*'],
      tags: {'*': '*'},
      assume_role_name: 'kube-discovery',
      external_id: 'ext-1',
      organization: {organization_id: 'o-abcde12345', organizational_units: {include: ['*'], exclude: []}},
    });
  });

  it('accepts OU ids in include and exclude', () => {
    const config = parseConfig(
      withMatcher(
        '      assume_role_name: kd\n      organization:\n        organization_id: o-abcde12345\n        organizational_units:\n          include: [ou-ab12-11111111, ou-ab12-22222222]\n          exclude: [ou-ab12-33333333]\n',
      ),
      'discovery.yaml',
    );
    expect(config.discovery_service.aws[0]?.organization?.organizational_units).toEqual({
      include: ['ou-ab12-11111111', 'ou-ab12-22222222'],
      exclude: ['ou-ab12-33333333'],
    });
  });

  const cases: RejectionCase[] = [
    {
      name: 'bad organization id',
      lines: '      assume_role_name: kd\n      organization:\n        organization_id: o-ABC\n',
      path: 'discovery_service.aws[0].organization.organization_id',
      line: 9,
      column: 26,
      message: /expected an organization id such as o-abcde12345.*found a string "o-ABC"/,
    },
    {
      name: 'bad OU id in include',
      lines: '      assume_role_name: kd\n      organization:\n        organization_id: o-abcde12345\n        organizational_units: {include: [ou-1]}\n',
      path: 'discovery_service.aws[0].organization.organizational_units.include[0]',
      line: 10,
      column: 42,
      message: /expected an organizational unit id such as ou-abcd-11111111, or "\*", found a string "ou-1"/,
    },
    {
      name: '"*" in exclude',
      lines: '      assume_role_name: kd\n      organization:\n        organization_id: o-abcde12345\n        organizational_units: {exclude: ["*"]}\n',
      path: 'discovery_service.aws[0].organization.organizational_units.exclude[0]',
      line: 10,
      column: 42,
      message: /expected an organizational unit id such as ou-abcd-11111111, found a string "\*"/,
    },
    {
      name: 'organization without assume_role_name',
      lines: '      organization:\n        organization_id: o-abcde12345\n',
      path: 'discovery_service.aws[0].organization',
      line: 8,
      column: 9,
      message: /expected assume_role_name together with organization.*found organization without assume_role_name/,
    },
    {
      name: 'assume_role_arn and organization together',
      lines:
        '      assume_role_arn: arn:aws:iam::222222222222:role/kd\n      assume_role_name: kd\n      organization:\n        organization_id: o-abcde12345\n',
      path: 'discovery_service.aws[0].assume_role_arn',
      line: 7,
      column: 24,
      message: /expected either assume_role_arn \(one account\) or organization \(every member account\), found both/,
    },
    {
      name: 'assume_role_name without organization',
      lines: '      assume_role_name: kd\n',
      path: 'discovery_service.aws[0].assume_role_name',
      line: 7,
      column: 25,
      message: /expected assume_role_name only together with organization/,
    },
    {
      name: 'role name with a slash',
      lines: '      assume_role_name: team/kd\n      organization: {organization_id: o-abcde12345}\n',
      path: 'discovery_service.aws[0].assume_role_name',
      line: 7,
      column: 25,
      message: /expected an IAM role name .*found a string "team\/kd"/,
    },
    {
      name: 'unknown key under organization',
      lines: '      assume_role_name: kd\n      organization: {organization_id: o-abcde12345, units: {}}\n',
      path: 'discovery_service.aws[0].organization.units',
      line: 8,
      column: 53,
      message: /found unknown key "units"/,
    },
  ];

  itRejects(cases, withMatcher);
});
