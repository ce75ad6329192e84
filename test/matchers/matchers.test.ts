import {describe, expect, it} from 'vitest';
import {MatcherError, compileTagMatcher, describeMatcher, matchLabels} from '../../matchers/index.ts';
import type {Labels, TagMatcherInput} from '../../matchers/index.ts';

const prodCluster: Labels = {
  env: 'prod',
  team: 'platform',
  region: 'us-east-1',
  'account-id': '123456789012',
  'teleport.dev/cloud': 'AWS',
};

function matches(tags: TagMatcherInput, labels: Labels = prodCluster): boolean {
  return matchLabels(compileTagMatcher(tags), labels).matched;
}

describe('tag matchers', () => {
  it.each<[string, TagMatcherInput, Labels, boolean]>([
    ['exact value', {env: 'prod'}, prodCluster, true],
    ['exact value is case sensitive', {env: 'Prod'}, prodCluster, false],
    ['exact value is not a substring match', {env: 'pro'}, prodCluster, false],
    ['glob * prefix', {region: 'us-*'}, prodCluster, true],
    ['glob * is anchored at the start', {region: 'east-*'}, prodCluster, false],
    ['glob * is anchored at the end', {region: 'us-east'}, prodCluster, false],
    ['glob ? is one character', {env: 'pro?'}, prodCluster, true],
    ['glob ? is exactly one character', {env: 'pr?'}, prodCluster, false],
    ['glob [abc] class', {region: 'us-[ew]*-1'}, prodCluster, true],
    ['glob [!abc] negated class', {region: 'us-[!e]*'}, prodCluster, false],
    ['glob range', {'account-id': '[0-9]*'}, prodCluster, true],
    ['glob escaped * is literal', {env: 'prod\\*'}, prodCluster, false],
    ['glob characters special to regexes are literal', {team: 'plat.orm'}, prodCluster, false],
    ['full regex', {env: '^(prod|staging)$'}, prodCluster, true],
    ['full regex that does not match', {env: '^dev.*$'}, prodCluster, false],
    ['(?i) makes a regex case-insensitive', {env: '^(?i)PROD$'}, prodCluster, true],
    ['^ without $ is a glob, not a regex', {env: '^prod'}, prodCluster, false],
    ['value * needs the key to exist', {env: '*'}, prodCluster, true],
    ['value * with a missing key', {owner: '*'}, prodCluster, false],
    ['value * matches an empty value', {env: '*'}, {env: ''}, true],
    ['values of one key OR', {env: ['staging', 'prod']}, prodCluster, true],
    ['values of one key OR, none match', {env: ['staging', 'dev']}, prodCluster, false],
    ['keys AND, all match', {env: 'prod', team: 'plat*'}, prodCluster, true],
    ['keys AND, one fails', {env: 'prod', team: 'data'}, prodCluster, false],
    ['derived label region', {region: ['us-east-1', 'eu-west-1']}, prodCluster, true],
    ['derived label account-id', {'account-id': '123456789012'}, prodCluster, true],
    ['prefixed label keys', {'teleport.dev/cloud': 'AWS'}, prodCluster, true],
    ['{"*": "*"} matches everything', {'*': '*'}, prodCluster, true],
    ['{"*": "*"} matches a cluster without labels', {'*': '*'}, {}, true],
    ['{"*": ["*"]} matches everything too', {'*': ['*']}, {}, true],
    ['key * with a glob: some label value matches', {'*': 'plat*'}, prodCluster, true],
    ['key * with a glob: no label value matches', {'*': 'data*'}, prodCluster, false],
    ['key * combined with another key', {'*': 'AWS', env: 'prod'}, prodCluster, true],
    ['an empty matcher matches nothing', {}, prodCluster, false],
    ['inherited object keys are not labels', {constructor: '*'}, prodCluster, false],
    ['values with newlines are matched whole', {env: 'prod*'}, {env: 'prod\nx'}, true],
  ])('%s', (_name, tags, labels, expected) => {
    expect(matches(tags, labels)).toBe(expected);
  });

  it('explains a match with the key, value and pattern', () => {
    const decision = matchLabels(compileTagMatcher({env: 'prod'}), prodCluster);
    expect(decision).toEqual({matched: true, reason: 'tag env=prod matches "prod"'});
  });

  it('explains every matching key', () => {
    const decision = matchLabels(compileTagMatcher({env: ['dev', 'prod'], region: 'us-*'}), prodCluster);
    expect(decision.reason).toBe('tag env=prod matches "prod"; tag region=us-east-1 matches "us-*"');
  });

  it('explains a missing label', () => {
    expect(matchLabels(compileTagMatcher({owner: 'alice'}), prodCluster)).toEqual({
      matched: false,
      reason: 'no label "owner"',
    });
  });

  it('explains a value that matches none of the alternatives', () => {
    const decision = matchLabels(compileTagMatcher({env: ['prod', 'staging']}), {env: 'dev'});
    expect(decision).toEqual({matched: false, reason: 'label env=dev does not match any of prod, staging'});
  });

  it('explains a single-value mismatch with the pattern quoted', () => {
    const decision = matchLabels(compileTagMatcher({env: 'prod'}), {env: 'dev'});
    expect(decision.reason).toBe('label env=dev does not match "prod"');
  });

  it('names the first failing key when several are required', () => {
    const decision = matchLabels(compileTagMatcher({env: 'prod', team: 'data'}), prodCluster);
    expect(decision).toEqual({matched: false, reason: 'label team=platform does not match "data"'});
  });

  it('explains each cluster by its own value, however many clusters one matcher judges', () => {
    // Decisions are shared between clusters with the same value (a bounded number of values): the
    // reasons must still be each cluster's own, past the bound too, and for a missing label.
    const matcher = compileTagMatcher({team: 'plat*'});
    for (let i = 0; i < 600; i++) {
      const team = i % 2 === 0 ? `platform-${i}` : `data-${i}`;
      expect(matchLabels(matcher, {team})).toEqual(
        i % 2 === 0 ? {matched: true, reason: `tag team=${team} matches "plat*"`} : {matched: false, reason: `label team=${team} does not match "plat*"`},
      );
      expect(matchLabels(matcher, {env: team})).toEqual({matched: false, reason: 'no label "team"'});
      expect(matchLabels(matcher, {team: 'platform'})).toEqual({matched: true, reason: 'tag team=platform matches "plat*"'});
    }
  });

  it('explains the match-everything matcher', () => {
    expect(matchLabels(compileTagMatcher({'*': '*'}), {}).reason).toBe('matcher {"*":"*"} matches everything');
  });

  it('explains which label satisfied an any-key matcher', () => {
    expect(matchLabels(compileTagMatcher({'*': 'plat*'}), prodCluster).reason).toBe(
      'tag team=platform matches "plat*" (any key)',
    );
  });

  it('explains an empty matcher', () => {
    expect(matchLabels(compileTagMatcher({}), prodCluster).reason).toMatch(/matches nothing/);
  });

  it('rejects an invalid regular expression at compile time, naming key and value', () => {
    let caught: unknown;
    try {
      compileTagMatcher({team: 'x', env: '^([a$'});
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(MatcherError);
    const error = caught as MatcherError;
    expect(error.key).toBe('env');
    expect(error.value).toBe('^([a$');
    expect(error.message).toBe('invalid regular expression ^([a$ for key env: Unterminated character class');
  });

  it.each([
    ['unterminated class', {env: 'prod[ab'}, /invalid glob prod\[ab for key env: unterminated character class/],
    ['reversed range', {env: '[z-a]'}, /range z-a out of order/],
    ['trailing backslash', {env: 'prod\\'}, /trailing backslash/],
    ['empty list of values', {env: []}, /expected at least one value for key env/],
    ['bad regex among list values', {env: ['prod', '^(unclosed$']}, /invalid regular expression \^\(unclosed\$ for key env/],
  ])('rejects a bad value: %s', (_name, tags, message) => {
    expect(() => compileTagMatcher(tags)).toThrow(message);
  });

  it('a compiled matcher never throws while matching, whatever the labels', () => {
    const matcher = compileTagMatcher({env: '^(prod|staging)$', region: 'us-*', '*': '[a-c]?'});
    const samples: Labels[] = [{}, {env: ''}, {env: 'prod', region: '\u0000'}, {'': ''}];
    for (const labels of samples) {
      expect(() => matchLabels(matcher, labels)).not.toThrow();
    }
  });

  it('describes a matcher compactly for logs', () => {
    expect(describeMatcher(compileTagMatcher({env: ['prod', 'staging'], region: 'us-*'}))).toBe(
      '{"env":["prod","staging"],"region":"us-*"}',
    );
  });
});
