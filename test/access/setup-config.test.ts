// The setup_access_for_arn keys: off by default, validated with the key, line and column.
import {describe, expect, it} from 'vitest';
import {ConfigError, parseConfig} from '../../src/config/load.ts';

const config = (matcher: string): string => `version: v1
discovery_service:
  discovery_group: g
  aws:
    - types: [eks]
      regions: [us-east-1]
${matcher}`;

describe('setup_access_for_arn config', () => {
  it('is off unless set, and takes a role or user ARN and a group', () => {
    expect(parseConfig(config(''), 'c.yaml').discovery_service.aws[0]?.setup_access_for_arn).toBeUndefined();
    const matcher = parseConfig(config('      setup_access_for_arn: arn:aws:iam::111111111111:role/ops/kube-discovery\n      setup_access_group: platform-readers\n'), 'c.yaml')
      .discovery_service.aws[0];
    expect(matcher).toMatchObject({setup_access_for_arn: 'arn:aws:iam::111111111111:role/ops/kube-discovery', setup_access_group: 'platform-readers'});
  });

  it('rejects setup_access_group without setup_access_for_arn, which would silently do nothing', () => {
    expect(() => parseConfig(config('      setup_access_group: readers\n'), 'c.yaml')).toThrow(
      /c\.yaml:7:\d+: discovery_service\.aws\[0\]\.setup_access_group: expected setup_access_group only together with setup_access_for_arn/,
    );
  });

  it('rejects an assumed-role session ARN and a reserved group, naming key, line and column', () => {
    let error: unknown;
    try {
      parseConfig(config('      setup_access_for_arn: arn:aws:sts::111111111111:assumed-role/kube-discovery/pod-1\n      setup_access_group: "system:masters"\n'), 'c.yaml');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const text = (error as ConfigError).message;
    expect(text).toMatch(/c\.yaml:7:\d+: discovery_service\.aws\[0\]\.setup_access_for_arn: expected an IAM role or user ARN/);
    expect(text).toMatch(/c\.yaml:8:\d+: discovery_service\.aws\[0\]\.setup_access_group: expected a Kubernetes group name/);
  });
});

describe('setup_access_for_principal_id config', () => {
  const azure = (matcher: string): string => `version: v1
discovery_service:
  discovery_group: g
  azure:
    - types: [aks]
${matcher}`;

  it('is off unless set, and takes an Entra object id', () => {
    expect(parseConfig(azure(''), 'c.yaml').discovery_service.azure[0]?.setup_access_for_principal_id).toBeUndefined();
    expect(parseConfig(azure('      setup_access_for_principal_id: 0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6\n'), 'c.yaml').discovery_service.azure[0]?.setup_access_for_principal_id)
      .toBe('0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6');
  });

  it('rejects what is not a GUID (a client id URI, a display name), naming key, line and column', () => {
    for (const value of ['api://kube-discovery', 'kube-discovery-identity', '0d1e2f3a4b5c4d6e8f708192a3b4c5d6']) {
      expect(() => parseConfig(azure(`      setup_access_for_principal_id: ${value}\n`), 'c.yaml')).toThrow(
        /c\.yaml:6:\d+: discovery_service\.azure\[0\]\.setup_access_for_principal_id: expected an Entra object id \(a GUID/,
      );
    }
  });
});
