/**
 * Duplicate keys in listing answers. `JSON.parse` keeps the last of two equal keys, so a broken or
 * hostile endpoint answering `{"clusters":["a","b"],"clusters":[]}` would be read as an empty
 * listing, and `{"clusters":["a"],"nextToken":"t2","nextToken":null}` as the last page: both
 * would deregister clusters that exist. An answer that decides what exists (a cluster, account,
 * region or subscription listing) is judged here before it is parsed: a key given twice in its
 * top-level object, or in one of the top-level objects named in `within` (where pagination lives
 * nested, like Kubernetes' `metadata.continue`), makes it malformed. What a record holds (two tags
 * of one name in one cluster's record) is that record's data, not the listing's, and is left alone.
 *
 * One pass over the text without building values: strings are skipped with `indexOf` (escapes
 * counted back from each quote), nested containers by depth. A text that is not a JSON object gets
 * no verdict here: the parser that reads it next says what is wrong with it.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Longest key quoted in a message: a key is the answer's text, and an endpoint chooses its length. */
const MAX_KEY_IN_MESSAGE = 60;

/**
 * The first key given twice in the top-level object of `text`, or in an object held by one of
 * its top-level keys named in `within` (then `parent.key`); undefined when none is, or when the
 * text is not a JSON object. Keys are compared as JSON.parse reads them (`"clu\u0073ters"` is
 * `clusters`).
 */
export function duplicateKey(text: string, within: readonly string[] = []): string | undefined {
  const start = skipSpace(text, 0);
  if (text.charCodeAt(start) !== OPEN_BRACE) return undefined;
  const found = scanObject(text, start, within);
  return typeof found === 'string' ? found : undefined;
}

/** The message of an answer with a key given twice (the key quoted, cut short). */
export function duplicateKeyProblem(key: string): string {
  const shown = key.length > MAX_KEY_IN_MESSAGE ? `${key.slice(0, MAX_KEY_IN_MESSAGE)}…` : key;
  return `malformed answer: duplicate key ${JSON.stringify(shown)}`;
}

/**
 * Reads the object whose `{` is at `open`: the first key given twice (`parent.key` for one in a
 * `within` object), else the index after its `}`; -1 when the text is not well-formed JSON there.
 */
function scanObject(text: string, open: number, within: readonly string[]): string | number {
  const keys = new Set<string>();
  let i = skipSpace(text, open + 1);
  if (text.charCodeAt(i) === CLOSE_BRACE) return i + 1;
  for (;;) {
    if (text.charCodeAt(i) !== QUOTE) return -1;
    const end = skipString(text, i);
    if (end < 0) return -1;
    const key = keyOf(text, i, end);
    if (key === undefined) return -1;
    if (keys.has(key)) return key;
    keys.add(key);
    i = skipSpace(text, end);
    if (text.charCodeAt(i) !== COLON) return -1;
    i = skipSpace(text, i + 1);
    if (within.length > 0 && text.charCodeAt(i) === OPEN_BRACE && within.includes(key)) {
      // Only one level down: the objects named are judged for their own keys, not for `within` again.
      const inner = scanObject(text, i, []);
      if (typeof inner === 'string') return `${key}.${inner}`;
      i = inner;
    } else {
      i = skipValue(text, i);
    }
    if (i < 0) return -1;
    i = skipSpace(text, i);
    const c = text.charCodeAt(i);
    if (c === CLOSE_BRACE) return i + 1;
    if (c !== COMMA) return -1;
    i = skipSpace(text, i + 1);
  }
}

/** The key whose quoted text spans [open, end), as JSON.parse reads it; undefined when its escapes are not JSON. */
function keyOf(text: string, open: number, end: number): string | undefined {
  const raw = text.slice(open + 1, end - 1);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(text.slice(open, end)) as string;
  } catch {
    return undefined;
  }
}

/** The index after the value at `i` (any kind, nested containers by depth); -1 when it is not well-formed. */
function skipValue(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === QUOTE) return skipString(text, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) return skipContainer(text, i);
  // A number, true, false or null: up to the next delimiter. What it is, the parser checks.
  let j = i;
  for (; j < text.length; j++) {
    const d = text.charCodeAt(j);
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) break;
  }
  return j === i ? -1 : j;
}

/** The index after the object or array opened at `open`, its strings skipped whole; -1 when it does not close. */
function skipContainer(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = skipString(text, i);
      if (end < 0) return -1;
      i = end - 1;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}

/** The index after the closing quote of the string opened at `open`; -1 when it does not close. */
function skipString(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return -1;
    // The quote ends the string unless an odd run of backslashes escapes it.
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** JSON's whitespace: space, tab, line feed, carriage return. */
function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}
