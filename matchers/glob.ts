/** Translates shell-style globs (`*`, `?`, `[abc]`, `[!a-z]`, `\x`) into regular expressions anchored at both ends. */

/** A glob that cannot be compiled; `reason` says what is wrong with it. */
export class GlobSyntaxError extends Error {
  override readonly name = 'GlobSyntaxError';
}

const regexSpecial = /[\\^$.*+?()[\]{}|/]/g;
const classSpecial = /[\\^\]\-[]/g;

/** Returns a regular expression matching exactly the strings the glob matches (`*` spans any characters, `/` included). */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob.charAt(i);
    if (ch === '*') {
      source += '.*';
    } else if (ch === '?') {
      source += '.';
    } else if (ch === '\\') {
      // A trailing backslash has nothing to escape; Go's filepath.Match rejects it too.
      if (i + 1 >= glob.length) throw new GlobSyntaxError('trailing backslash escapes nothing');
      i++;
      source += escapeRegExp(glob.charAt(i));
    } else if (ch === '[') {
      const end = classEnd(glob, i);
      if (end < 0) throw new GlobSyntaxError('unterminated character class');
      source += classToRegExp(glob.slice(i + 1, end));
      i = end;
    } else {
      source += escapeRegExp(ch);
    }
  }
  return new RegExp(`^${source}$`, 'su');
}

/** Whether the text uses any glob syntax at all (plain values compare as strings, faster and clearer in reasons). */
export function hasGlobSyntax(text: string): boolean {
  return /[*?[\\]/.test(text);
}

/** Index of the `]` closing the class opened at `start`, or -1. A `]` right after `[` or `[!` is literal. */
function classEnd(glob: string, start: number): number {
  let i = start + 1;
  if (glob.charAt(i) === '!' || glob.charAt(i) === '^') i++;
  if (glob.charAt(i) === ']') i++;
  for (; i < glob.length; i++) {
    const ch = glob.charAt(i);
    if (ch === '\\') i++;
    else if (ch === ']') return i;
  }
  return -1;
}

function classToRegExp(body: string): string {
  let negate = false;
  let rest = body;
  if (rest.startsWith('!') || rest.startsWith('^')) {
    negate = true;
    rest = rest.slice(1);
  }
  if (rest === '') throw new GlobSyntaxError('empty character class');
  let out = '';
  for (let i = 0; i < rest.length; i++) {
    const ch = rest.charAt(i);
    if (ch === '\\') {
      i++;
      out += escapeClassChar(rest.charAt(i));
    } else if (ch === '-' && i > 0 && i < rest.length - 1) {
      // A range; validate its order so `[z-a]` is reported instead of a cryptic RegExp error.
      const from = rest.charAt(i - 1);
      const to = rest.charAt(i + 1) === '\\' ? rest.charAt(i + 2) : rest.charAt(i + 1);
      if (from > to) throw new GlobSyntaxError(`range ${from}-${to} out of order in character class`);
      out += '-';
    } else {
      out += escapeClassChar(ch);
    }
  }
  return `[${negate ? '^' : ''}${out}]`;
}

function escapeRegExp(text: string): string {
  return text.replace(regexSpecial, '\\$&');
}

function escapeClassChar(text: string): string {
  return text.replace(classSpecial, '\\$&');
}
