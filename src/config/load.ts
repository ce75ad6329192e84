/**
 * Reads the YAML config and validates it, reporting every problem at once with the key
 * path, line and column, what was expected and what was found. YAML nodes keep
 * their source ranges, so each zod issue maps back to the text the operator wrote.
 */
import {readFile} from 'node:fs/promises';
import {LineCounter, isAlias, isMap, isScalar, isSeq, parseDocument} from 'yaml';
import type {Document, Node as YamlNode, Pair} from 'yaml';
import type * as z from 'zod';
import {errorMessage, InputError} from '../core/errors.ts';
import {configSchema} from './schema.ts';
import type {Config} from './schema.ts';
import {adaptTeleportConfig, teleportKeysAt} from './teleport.ts';
import {rememberWarnings} from './warnings.ts';
import {hideUrlUserInfo} from '../observability/redact.ts';

/** One problem in a config file. `message` is "expected ..., found ..."; line and column are 1-based (0 when unknown). */
export interface ConfigProblem {
  /** Key path such as `discovery_service.aws[0].regions` ('' for the file or document as a whole). */
  readonly path: string;
  readonly line: number;
  readonly column: number;
  readonly message: string;
}

/** A config file that cannot be used; `message` holds one `file:line:col: path: problem` line per problem. Exit code 2. */
export class ConfigError extends InputError {
  readonly fileName: string;
  readonly problems: readonly ConfigProblem[];

  constructor(fileName: string, problems: readonly ConfigProblem[]) {
    super(problems.map((problem) => formatProblem(fileName, problem)).join('\n'));
    this.fileName = fileName;
    this.problems = problems;
  }
}

/** Formats a problem as `discovery.yaml:12:7: discovery_service.aws[0].regions: expected ..., found ...`. */
export function formatProblem(fileName: string, problem: ConfigProblem): string {
  const where = problem.line > 0 ? `${fileName}:${problem.line}:${problem.column}` : fileName;
  return problem.path ? `${where}: ${problem.path}: ${problem.message}` : `${where}: ${problem.message}`;
}

/** Largest config text accepted (characters). */
export const MAX_CONFIG_CHARS = 2 ** 20;

/** Reads and validates a config file; throws `ConfigError` naming the path when it is missing or unreadable. */
export async function loadConfigFile(path: string): Promise<Config> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const found = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory' : `an unreadable file (${code ?? String(error)})`;
    throw new ConfigError(path, [{path: '', line: 0, column: 0, message: `expected a readable YAML config file, found ${found}`}]);
  }
  return parseConfig(text, path);
}

/** Parses and validates config text; `fileName` only labels the messages. Throws `ConfigError` with every problem. */
export function parseConfig(text: string, fileName: string): Config {
  // A real config is a few KB; parsing megabytes of YAML takes seconds. Refuse before parsing.
  if (text.length > MAX_CONFIG_CHARS) {
    const found = `${(text.length / 2 ** 20).toFixed(1)} MiB of text`;
    throw new ConfigError(fileName, [{path: '', line: 1, column: 1, message: `expected a config file of at most ${MAX_CONFIG_CHARS / 2 ** 20} MiB, found ${found}`}]);
  }
  const lineCounter = new LineCounter();
  // uniqueKeys is off so duplicates are found below, pointing at the second key and naming the first.
  const doc = parseDocument(text, {lineCounter, prettyErrors: false, uniqueKeys: false});
  const at = (offset: number): {line: number; column: number} => {
    const pos = lineCounter.linePos(offset);
    return {line: pos.line, column: pos.col};
  };

  const problems: ConfigProblem[] = [];
  for (const error of [...doc.errors, ...doc.warnings]) {
    // The tree around a syntax error is unreliable, so no key path: line and column say where.
    problems.push({
      path: '',
      ...at(error.pos[0]),
      message: `expected valid YAML, found ${lowerFirst(error.message)}`,
    });
  }
  problems.push(...duplicateKeys(doc, at));
  if (doc.errors.length > 0) throw new ConfigError(fileName, sortProblems(problems));

  let data: unknown;
  try {
    data = doc.toJS({maxAliasCount: 100});
  } catch (error) {
    // e.g. an alias to an anchor that is not defined (yet).
    problems.push({path: '', line: 1, column: 1, message: `expected valid YAML, found ${lowerFirst(errorMessage(error))}`});
    throw new ConfigError(fileName, problems);
  }

  // Teleport's own sections and spellings are adapted first; issues then point back into the file.
  const teleport = adaptTeleportConfig(data ?? undefined);
  const result = configSchema.safeParse(teleport.data, {error: expectedPhrase});
  if (result.success && problems.length === 0) return rememberWarnings(result.data, teleport.warnings);
  if (!result.success) {
    for (const issue of result.error.issues) problems.push(...issueProblems(doc, issue, at, teleport.originalPath));
  }
  throw new ConfigError(fileName, sortProblems(problems));
}

type PathSegment = string | number;
type Locate = (offset: number) => {line: number; column: number};

/** Turns one zod issue into problems (an unknown-keys issue yields one per key, at the key). */
function issueProblems(doc: Document, issue: z.core.$ZodIssue, at: Locate, originalPath: (path: readonly PathSegment[]) => PathSegment[]): ConfigProblem[] {
  const adaptedPath = issue.path.filter((segment): segment is PathSegment => typeof segment !== 'symbol');
  const path = originalPath(adaptedPath);
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeysFromMessage(issue.message);
    return issue.keys.map((key) => {
      const {pair} = locate(doc, [...path, key]);
      // A near miss of a Teleport key is suggested too: fixing it makes the key ignored, with a warning.
      const suggestion = closest(key, [...known, ...teleportKeysAt(adaptedPath)]);
      const hint = suggestion ? ` (did you mean ${suggestion}?)` : '';
      return {
        path: formatPath([...path, key]),
        ...at(rangeStart(pair?.key) ?? rangeStart(locate(doc, path).node) ?? 0),
        message: `expected one of the keys ${known.join(', ')}, found unknown key ${JSON.stringify(key)}${hint}`,
      };
    });
  }
  const found = locate(doc, path);
  // A bad map key is reported at the key; a missing value at the map that should hold it.
  const anchor = issue.code === 'invalid_key' || isEmptyValue(found.node) ? found.pair?.key : (found.node ?? found.nearest);
  const params = issue.code === 'custom' ? (issue.params as {found?: unknown} | undefined) : undefined;
  let foundText: string;
  if (typeof params?.found === 'string') foundText = params.found;
  else if (issue.code === 'invalid_key') foundText = `the key ${JSON.stringify(path.at(-1))}`;
  else if (path.length === 0 && doc.contents === null) foundText = 'an empty document';
  else foundText = found.exists ? describeNode(doc, found.node) : describeMissing(path);
  return [{path: formatPath(path), ...at(rangeStart(anchor) ?? 0), message: `expected ${issue.message}, found ${foundText}`}];
}

/**
 * The per-parse error map: turns zod's raw issues into the "expected ..." phrase for
 * schemas that did not set their own. Unknown keys carry the known ones (read from the
 * object schema) so the message can list them and suggest the closest.
 */
function expectedPhrase(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      return typePhrase(issue.expected);
    case 'invalid_value':
      return issue.values.length === 1 ? String(issue.values[0]) : `one of ${issue.values.map(String).join(', ')}`;
    case 'too_small':
      if (issue.origin === 'array') return Number(issue.minimum) <= 1 ? 'a non-empty list' : `a list of at least ${issue.minimum} items`;
      if (issue.origin === 'string') return 'a non-empty string';
      return `a number ${issue.inclusive ? '>=' : '>'} ${issue.minimum}`;
    case 'too_big':
      if (issue.origin === 'array') return `a list of at most ${issue.maximum} items`;
      if (issue.origin === 'string') return `a string of at most ${issue.maximum} characters`;
      return `a number ${issue.inclusive ? '<=' : '<'} ${issue.maximum}`;
    case 'invalid_format':
      return issue.format === 'regex' && issue.pattern ? `a string matching ${issue.pattern}` : `a valid ${issue.format}`;
    case 'unrecognized_keys': {
      const def = issue.inst?._zod.def as {shape?: Record<string, unknown>} | undefined;
      return `known keys: ${Object.keys(def?.shape ?? {}).join(', ')}`;
    }
    case 'invalid_union':
      if ('discriminator' in issue && issue.discriminator) {
        const options = (issue as {options?: unknown[]}).options ?? [];
        return `one of ${options.map(String).join(', ')}`;
      }
      return 'one of the allowed forms';
    case 'invalid_key':
      return issue.issues[0]?.message ?? 'a valid key';
    default:
      return undefined;
  }
}

function typePhrase(expected: string): string {
  const phrases: Record<string, string> = {
    string: 'a string',
    number: 'a number',
    int: 'an integer',
    boolean: 'true or false',
    object: 'a map',
    record: 'a map',
    array: 'a list',
  };
  return phrases[expected] ?? `a ${expected}`;
}

function knownKeysFromMessage(message: string): string[] {
  const list = message.startsWith('known keys: ') ? message.slice('known keys: '.length) : '';
  return list ? list.split(', ') : [];
}

/** What the YAML holds at a node, for "found ...": its type and a truncated value. */
function describeNode(doc: Document, node: YamlNode | null | undefined): string {
  const target = isAlias(node) ? node.resolve(doc) : node;
  if (target === undefined || target === null) return 'an empty value';
  if (isScalar(target)) {
    const value = target.value;
    if (value === null || value === undefined) return 'an empty value';
    // A URL's user name and password never reach the message (an etcd endpoint written with them).
    if (typeof value === 'string') return value === '' ? 'an empty string' : `a string ${truncate(JSON.stringify(hideUrlUserInfo(value)))}`;
    if (typeof value === 'number' || typeof value === 'bigint') return `a number ${String(target.source ?? value)}`;
    if (typeof value === 'boolean') return `a boolean ${String(value)}`;
    return `a ${typeof value}`;
  }
  if (isMap(target)) {
    if (target.items.length === 0) return 'an empty map';
    const keys = target.items.map((pair) => (isScalar(pair.key) ? String(pair.key.value) : '?'));
    return `a map with keys ${truncate(keys.join(', '))}`;
  }
  if (isSeq(target)) {
    if (target.items.length === 0) return 'an empty list';
    return target.items.length === 1 ? 'a list of 1 item' : `a list of ${target.items.length} items`;
  }
  return 'an unsupported YAML node';
}

function describeMissing(path: readonly PathSegment[]): string {
  const last = path.at(-1);
  if (last === undefined) return 'an empty document';
  return typeof last === 'number' ? `no item ${last}` : `no key ${last}`;
}

function truncate(text: string, max = 60): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

interface Located {
  /** Whether the full path exists in the YAML (a key with an empty value exists). */
  readonly exists: boolean;
  readonly node: YamlNode | null | undefined;
  /** The pair holding the last map segment, when it exists. */
  readonly pair?: Pair;
  /** The deepest node on the path that exists. */
  readonly nearest: YamlNode | null | undefined;
}

/** Walks the YAML along a zod path; keys compare as strings so `1:` matches a path segment "1". */
function locate(doc: Document, path: readonly PathSegment[]): Located {
  let node: YamlNode | null | undefined = doc.contents;
  let nearest: YamlNode | null | undefined = node;
  let pair: Pair | undefined;
  for (const segment of path) {
    const current: unknown = isAlias(node) ? node.resolve(doc) : node;
    pair = undefined;
    if (isMap(current)) {
      pair = current.items.findLast((item) => isScalar(item.key) && String(item.key.value) === String(segment));
      if (!pair) return {exists: false, node: undefined, nearest};
      node = pair.value as YamlNode | null;
      // A key with no value has no range of its own; point at its key instead.
      nearest = node && rangeStart(node) !== undefined ? node : (pair.key as YamlNode);
    } else if (isSeq(current) && typeof segment === 'number' && segment < current.items.length) {
      node = current.items[segment] as YamlNode | null;
      nearest = node ?? nearest;
    } else {
      return {exists: false, node: undefined, nearest};
    }
  }
  return pair ? {exists: true, node, pair, nearest} : {exists: true, node, nearest};
}

/** `key:` with nothing after it: its zero-width node sits after the colon, so problems point at the key. */
function isEmptyValue(node: unknown): boolean {
  const range = (node as {range?: readonly number[] | null} | null | undefined)?.range;
  return isScalar(node) && node.value === null && range?.[0] === range?.[1];
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as {range?: readonly number[] | null} | null | undefined)?.range;
  return range?.[0];
}

/** Finds keys that appear twice in one map; reported at the later key, naming the line of the first. */
function duplicateKeys(doc: Document, at: Locate): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const visit = (node: unknown, path: PathSegment[]): void => {
    if (isMap(node)) {
      const first = new Map<string, Pair>();
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : undefined;
        if (key === undefined) continue;
        const earlier = first.get(key);
        if (earlier) {
          const where = at(rangeStart(pair.key) ?? 0);
          const firstLine = at(rangeStart(earlier.key) ?? 0).line;
          problems.push({
            path: formatPath([...path, key]),
            ...where,
            message: `expected each key once per map, found ${JSON.stringify(key)} again (first on line ${firstLine})`,
          });
        } else {
          first.set(key, pair);
        }
        visit(pair.value, [...path, key]);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, index) => visit(item, [...path, index]));
    }
  };
  visit(doc.contents, []);
  return problems;
}

/** `discovery_service.aws[0].tags["teleport.dev/origin"]`: plain keys dotted, odd ones quoted. */
function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[A-Za-z0-9_-]+$/.test(segment)) out += out ? `.${segment}` : segment;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

function sortProblems(problems: ConfigProblem[]): ConfigProblem[] {
  return problems.sort((a, b) => a.line - b.line || a.column - b.column);
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}

/** Edit distance based suggestion for a mistyped key; undefined when nothing is close. */
function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({length: b.length + 1}, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

