/**
 * Just enough of the Dockerfile and .dockerignore languages to check deploy/Dockerfile
 * without a container engine: instructions per stage (continuations joined, ARG defaults
 * substituted), and the allow/deny decision .dockerignore makes for a context path.
 */

/** One instruction: keyword upper-cased, the rest of the line as written. */
export interface Instruction {
  readonly keyword: string;
  readonly args: string;
  readonly line: number;
}

/** A build stage: its base image (ARGs resolved), name and instructions. */
export interface Stage {
  readonly from: string;
  readonly name?: string;
  readonly instructions: readonly Instruction[];
}

/** Parses a Dockerfile into stages. */
export function parseDockerfile(text: string): Stage[] {
  const instructions: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) return;
    if (pending === '') start = index + 1;
    if (line.startsWith('#')) return; // comments inside a continued instruction
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      return;
    }
    const full = `${pending}${line}`.trim();
    pending = '';
    const m = /^(\w+)\s*(.*)$/.exec(full);
    if (m?.[1]) instructions.push({keyword: m[1].toUpperCase(), args: m[2] ?? '', line: start});
  });

  const globalArgs = new Map<string, string>();
  const stages: {from: string; name?: string; instructions: Instruction[]}[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      const image = (m?.[1] ?? '').replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => globalArgs.get(a ?? b ?? '') ?? '');
      stages.push({from: image, ...(m?.[2] ? {name: m[2]} : {}), instructions: []});
    } else if (stages.length === 0) {
      // ARGs before the first FROM are the only ones FROM lines may use.
      const m = /^(\w+)=(\S*)$/.exec(instruction.args);
      if (instruction.keyword === 'ARG' && m?.[1]) globalArgs.set(m[1], m[2] ?? '');
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

/** The JSON array of an exec-form instruction, or undefined for shell form. */
export function execForm(args: string): string[] | undefined {
  try {
    const parsed = JSON.parse(args) as unknown;
    return Array.isArray(parsed) && parsed.every((a) => typeof a === 'string') ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** A COPY instruction: flags, sources and destination. */
export interface Copy {
  readonly from?: string;
  readonly chown?: string;
  readonly sources: readonly string[];
  readonly destination: string;
}

/** Parses the arguments of a COPY (shell-word form only; that is what deploy/Dockerfile uses). */
export function parseCopy(args: string): Copy {
  const words = args.split(/\s+/).filter((w) => w !== '');
  const flags = new Map<string, string>();
  while (words[0]?.startsWith('--')) {
    const [key = '', value = ''] = (words.shift() ?? '').slice(2).split('=');
    flags.set(key, value);
  }
  const destination = words.pop() ?? '';
  const from = flags.get('from');
  const chown = flags.get('chown');
  return {...(from ? {from} : {}), ...(chown ? {chown} : {}), sources: words, destination};
}

/** Whether .dockerignore excludes a context path: the last matching pattern wins; a pattern matching a parent directory matches its contents. */
export function isIgnored(dockerignore: string, relPath: string): boolean {
  const patterns = dockerignore
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const parts = relPath.split('/');
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = (negate ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, '');
    const regex = globRegex(pattern);
    if (prefixes.some((p) => regex.test(p))) ignored = !negate;
  }
  return ignored;
}

function globRegex(pattern: string): RegExp {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] ?? '';
    if (pattern.startsWith('**/', i)) {
      out += '(?:.*/)?';
      i += 2;
    } else if (pattern.startsWith('**', i)) {
      out += '.*';
      i += 1;
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else out += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}
