/**
 * The tag-matcher engine (Teleport's label-matching rules): keys AND, values of one key OR; `{"*": "*"}` matches
 * everything; value `*` matches any value of an existing key; `^...$` is a full regular
 * expression; anything else is a glob anchored at both ends. A key `*` with another value
 * means "some label has a matching value". Pure: no I/O, no clock.
 */
import {GlobSyntaxError, globToRegExp, hasGlobSyntax} from './glob.ts';
import {errorMessage} from '../src/core/errors.ts';

/** The `tags` map of a matcher as written in the YAML config. */
export type TagMatcherInput = Readonly<Record<string, string | readonly string[]>>;

/** Labels a matcher runs on: the cluster's tags plus derived labels (`region`, `account-id` ...). */
export type Labels = Readonly<Record<string, string>>;

/** The wildcard used both as "any key" and "any value". */
export const WILDCARD = '*';

/** A tag matcher value (or key) that cannot be compiled; names the key and value at fault. */
export class MatcherError extends Error {
  override readonly name = 'MatcherError';
  readonly key: string;
  readonly value: string;
  /** What is wrong with the value, without the key and value (e.g. `Unterminated character class`). */
  readonly reason: string;

  constructor(message: string, key: string, value: string, reason: string) {
    super(message);
    this.key = key;
    this.value = value;
    this.reason = reason;
  }
}

/** One value of a key: how it was written and how it tests a label value. */
export interface ValuePattern {
  /** The value as written in the config. */
  readonly text: string;
  readonly kind: 'any' | 'regex' | 'glob' | 'literal';
  readonly test: (value: string) => boolean;
}

/** One key of the matcher with the values any of which may match. */
export interface KeyClause {
  readonly key: string;
  readonly values: readonly ValuePattern[];
}

/** A compiled matcher; build it once with `compileTagMatcher` and run it with `matchLabels`. */
export interface TagMatcher {
  /** The input it was compiled from, for logs and explanations. */
  readonly source: TagMatcherInput;
  /** True for `{"*": "*"}`: every cluster matches, even one without labels. */
  readonly matchesAll: boolean;
  readonly clauses: readonly KeyClause[];
}

/** The outcome of matching, with a human reason for debug logs and `once --explain`. */
export interface MatchDecision {
  readonly matched: boolean;
  readonly reason: string;
}

/** Compiles a `tags` map; throws `MatcherError` for an invalid regular expression or glob so bad input never fails later. */
export function compileTagMatcher(tags: TagMatcherInput): TagMatcher {
  const clauses: KeyClause[] = [];
  let matchesAll = false;
  for (const [key, raw] of Object.entries(tags)) {
    const texts: readonly string[] = typeof raw === 'string' ? [raw] : raw;
    if (texts.length === 0) {
      throw new MatcherError(`expected at least one value for key ${key}, found an empty list`, key, '', 'empty list of values');
    }
    const values = texts.map((text) => compileValue(key, text));
    if (key === WILDCARD && values.some((v) => v.kind === 'any')) matchesAll = true;
    clauses.push({key, values});
  }
  return {source: tags, matchesAll, clauses};
}

/** Runs a compiled matcher on a cluster's labels; the first key that fails explains the rejection. */
export function matchLabels(matcher: TagMatcher, labels: Labels): MatchDecision {
  if (matcher.matchesAll) return matchesEverything(matcher);
  // Teleport treats an empty selector as matching nothing; say so rather than silently dropping clusters.
  if (matcher.clauses.length === 0) {
    return {matched: false, reason: 'empty matcher {} matches nothing'};
  }
  // One clause (the usual matcher) decides alone: its shared decision is the matcher's.
  if (matcher.clauses.length === 1 && matcher.clauses[0]?.key !== WILDCARD) return matchKey(matcher.clauses[0] as KeyClause, labels);
  const reasons: string[] = [];
  for (const clause of matcher.clauses) {
    const decision = clause.key === WILDCARD ? matchAnyLabel(clause, labels) : matchKey(clause, labels);
    if (!decision.matched) return decision;
    reasons.push(decision.reason);
  }
  return {matched: true, reason: reasons.join('; ')};
}

// One decision per match-everything matcher, shared by every cluster it judges: a reason text of
// each cluster's own (kept with its judgement across cycles) was ~200 bytes per cluster.
const everything = new WeakMap<TagMatcher, MatchDecision>();

function matchesEverything(matcher: TagMatcher): MatchDecision {
  let decision = everything.get(matcher);
  if (!decision) {
    decision = Object.freeze({matched: true, reason: `matcher ${describeMatcher(matcher)} matches everything`});
    everything.set(matcher, decision);
  }
  return decision;
}

/** A compact one-line form of the matcher for logs, e.g. `{"env":["prod","staging"],"region":"us-*"}`. */
export function describeMatcher(matcher: TagMatcher): string {
  return JSON.stringify(matcher.source);
}

/**
 * Decisions of a key clause by label value ('' key: the label is missing), shared by every cluster
 * with that value: a decision and reason text of each cluster's own, kept with its judgement across
 * cycles, were ~130 bytes per cluster. Bounded: values unique to each cluster are not kept.
 */
const byValue = new WeakMap<KeyClause, Map<string | undefined, MatchDecision>>();
const MAX_SHARED_VALUES = 256;

function matchKey(clause: KeyClause, labels: Labels): MatchDecision {
  const value = Object.hasOwn(labels, clause.key) ? (labels[clause.key] ?? '') : undefined;
  let shared = byValue.get(clause);
  const known = shared?.get(value);
  if (known) return known;
  const decision = Object.freeze(decideKey(clause, value));
  if (!shared) byValue.set(clause, (shared = new Map()));
  if (shared.size < MAX_SHARED_VALUES) shared.set(value, decision);
  return decision;
}

function decideKey(clause: KeyClause, value: string | undefined): MatchDecision {
  if (value === undefined) {
    return {matched: false, reason: `no label ${JSON.stringify(clause.key)}`};
  }
  const hit = clause.values.find((pattern) => pattern.test(value));
  if (hit) {
    return {matched: true, reason: `tag ${clause.key}=${value} matches ${JSON.stringify(hit.text)}`};
  }
  return {matched: false, reason: `label ${clause.key}=${value} does not match ${listPatterns(clause.values)}`};
}

function matchAnyLabel(clause: KeyClause, labels: Labels): MatchDecision {
  for (const [key, value] of Object.entries(labels)) {
    const hit = clause.values.find((pattern) => pattern.test(value));
    if (hit) {
      return {matched: true, reason: `tag ${key}=${value} matches ${JSON.stringify(hit.text)} (any key)`};
    }
  }
  return {matched: false, reason: `no label value matches ${listPatterns(clause.values)}`};
}

function listPatterns(values: readonly ValuePattern[]): string {
  if (values.length === 1 && values[0]) return JSON.stringify(values[0].text);
  return `any of ${values.map((v) => v.text).join(', ')}`;
}

function compileValue(key: string, text: string): ValuePattern {
  if (typeof text !== 'string') {
    throw new MatcherError(`expected a string value for key ${key}, found ${typeof text}`, key, String(text), 'not a string');
  }
  if (text === WILDCARD) return {text, kind: 'any', test: () => true};
  if (text.length >= 2 && text.startsWith('^') && text.endsWith('$')) {
    const regex = compileRegex(key, text);
    return {text, kind: 'regex', test: (value) => regex.test(value)};
  }
  if (!hasGlobSyntax(text)) return {text, kind: 'literal', test: (value) => value === text};
  try {
    const regex = globToRegExp(text);
    return {text, kind: 'glob', test: (value) => regex.test(value)};
  } catch (error) {
    if (error instanceof GlobSyntaxError) {
      throw new MatcherError(`invalid glob ${text} for key ${key}: ${error.message}`, key, text, error.message);
    }
    throw error;
  }
}

/** Compiles `^...$`; a leading RE2-style `(?i)` (as Teleport users write it) becomes the `i` flag. */
function compileRegex(key: string, text: string): RegExp {
  let source = text;
  let flags = 'u';
  const inline = /^\^\(\?([ims]+)\)/.exec(source);
  if (inline?.[1]) {
    flags += [...new Set(inline[1])].join('');
    source = `^${source.slice(inline[0].length)}`;
  }
  try {
    return new RegExp(source, flags);
  } catch (error) {
    // V8 says "Invalid regular expression: /<source>/<flags>: <reason>"; keep just the reason.
    const message = errorMessage(error);
    const reason = message.slice(message.lastIndexOf(': ') + 2) || message;
    throw new MatcherError(`invalid regular expression ${text} for key ${key}: ${reason}`, key, text, reason);
  }
}
