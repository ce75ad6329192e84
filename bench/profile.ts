/**
 * Reads a V8 CPU profile (`node --cpu-prof`) and says where the time went: self time by
 * function and by origin (our code per top folder, each npm package, Node internals, GC).
 */
import {readFile} from 'node:fs/promises';
import path from 'node:path';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: {readonly functionName: string; readonly url: string; readonly lineNumber: number};
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  /** When the profile was started (µs, the monotonic clock of `process.hrtime`). */
  readonly startTime?: number;
  /** The measured cycles, [start, end] in µs of the same clock (bench/cycle-driver.ts adds them). */
  readonly cycleWindowsUs?: readonly (readonly [number, number])[];
}

/** One line of the summary. */
export interface ProfileItem {
  readonly name: string;
  readonly self_ms: number;
  readonly share: number;
}

/** Where a profiled process spent its CPU time. */
export interface ProfileSummary {
  readonly file: string;
  readonly total_ms: number;
  /** Samples counted: only those inside the measured cycles when the profile names them, else all. */
  readonly counted: 'cycles' | 'whole profile';
  readonly by_origin: readonly ProfileItem[];
  readonly top_functions: readonly ProfileItem[];
}

/** The origin of a frame: `src/discovery`, an npm package, `node:internal`, or a V8 pseudo-frame. */
export function originOf(url: string, functionName: string, root: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node:internal';
  const file = url.startsWith('file://') ? new URL(url).pathname : url;
  const nm = file.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = file.slice(nm + '/node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1] ?? ''}` : parts[0] ?? file;
  }
  const rel = path.relative(root, file).split(path.sep);
  return rel.length > 2 ? `${rel[0]}/${rel[1]}` : rel.join('/');
}

function top(map: Map<string, number>, total: number, n: number): ProfileItem[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({name, self_ms: Math.round(us / 100) / 10, share: Math.round((us / total) * 1000) / 1000}));
}

/**
 * Summarises one `.cpuprofile`, excluding idle time and, when the profile carries the measured
 * cycles' windows, everything outside them: the full collection after each cycle (idle-gc.ts)
 * and the profiler's own `Session.post` ran outside the cycles and made up a third of a W5 steady
 * profile's samples.
 */
export async function summarizeProfile(file: string, root: string, n = 15): Promise<ProfileSummary> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const byFunction = new Map<string, number>();
  const byOrigin = new Map<string, number>();
  const windows = profile.startTime !== undefined && profile.cycleWindowsUs?.length ? profile.cycleWindowsUs : undefined;
  let at = profile.startTime ?? 0;
  let total = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (windows && !windows.some(([start, end]) => at >= start && at <= end)) return;
    if (!node || node.callFrame.functionName === '(idle)') return;
    const {functionName, url, lineNumber} = node.callFrame;
    const origin = originOf(url, functionName, root);
    const where = url === '' ? '' : ` ${origin}:${lineNumber + 1}`;
    const key = `${functionName || '(anonymous)'}${where}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + us);
    total += us;
  });
  return {file, total_ms: Math.round(total / 1000), counted: windows ? 'cycles' : 'whole profile', by_origin: top(byOrigin, total, n), top_functions: top(byFunction, total, n)};
}
