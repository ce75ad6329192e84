// A typo'd AWS region (`us-wset-1`) is kept, so a region newer than this release still works,
// but `config check` warns with the closest known region, and `token eks` names it when it
// fails for lack of credentials.
import {mkdtemp, rm, writeFile} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {afterAll, beforeAll, describe, expect, it} from 'vitest';
import {runConfigCheck} from '../../src/cli/config-check.ts';
import {runToken} from '../../src/cli/token.ts';
import {unknownRegionHint} from '../../src/config/region-hints.ts';
import {captureIo} from '../helpers/env.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kd-regions-'));
});
afterAll(() => rm(dir, {recursive: true, force: true}));

describe('unknown regions', () => {
  it.each([
    ['us-wset-1', '"us-wset-1" is not a known region of partition aws; did you mean "us-west-1"?'],
    ['eu-wset-1', '"eu-wset-1" is not a known region of partition aws; did you mean "eu-west-1"?'],
    ['cn-nort-1', '"cn-nort-1" is not a known region of partition aws-cn; did you mean "cn-north-1"?'],
    ['xx-nowhere-9', '"xx-nowhere-9" is not a known region of partition aws'],
  ])('%s gets a hint', (region, hint) => {
    expect(unknownRegionHint(region)).toBe(hint);
  });

  it.each(['us-west-1', 'cn-north-1', 'us-gov-west-1', '*'])('%s is known', (region) => {
    expect(unknownRegionHint(region)).toBeUndefined();
  });

  it('config check warns with the key path and exits 0', async () => {
    const file = path.join(dir, 'typo.yaml');
    await writeFile(file, 'version: v1\ndiscovery_service:\n  discovery_group: g\n  aws: [{types: [eks], regions: [us-east-1, us-wset-1]}]\n');
    const out = captureIo({});

    expect(await runConfigCheck(['-c', file], out.io)).toBe(0);
    expect(out.stderr()).toContain(`${file}: warning: discovery_service.aws[0].regions[1]: "us-wset-1" is not a known region of partition aws; did you mean "us-west-1"?`);
  });

  it('token eks names the likely typo when it cannot find credentials', async () => {
    const out = captureIo({AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: '/nonexistent/c', AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/k'});

    expect(await runToken(['eks', '--cluster-name', 'prod', '--region', 'us-wset-1'], out.io)).toBe(1);
    expect(out.stderr()).toMatch(/did you mean "us-west-1"\?\)\n$/);
    expect(out.stderr().trimEnd().split('\n')).toHaveLength(1);
  });
});
