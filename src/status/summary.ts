/**
 * One-line readings of the status for operators: the summary /v1/status leads with, and the
 * reason /readyz gives when the service is up but no source has ever answered (typically no
 * cloud credentials at all): ready for reads, yet not doing its job.
 */
import type {CycleStatus, SourceStatus} from './status.ts';
import {redactedStart} from '../observability/redact.ts';

/** What the summary line is made of. */
export interface SummaryInput {
  readonly role: 'leader' | 'follower';
  readonly leader?: string;
  /** Entries in the inventory; undefined until the registry has been read (not 0: an inventory never read is not an empty one). */
  readonly clusters: number | undefined;
  readonly sources: readonly SourceStatus[];
  readonly lastCycle?: CycleStatus;
}

/** The reason for a degraded readiness when sources ran but none has ever succeeded; undefined otherwise. */
export function noSourceSucceeded(sources: readonly SourceStatus[]): string | undefined {
  if (sources.length === 0 || sources.some((s) => s.ok || s.last_success !== undefined)) return undefined;
  // /readyz is unauthenticated: reason classes only; ids and error texts are in /v1/status.
  const reasons = [...new Set(sources.map((s) => s.last_error?.reason).filter((r) => r !== undefined))].sort();
  return `no discovery source has succeeded yet (${sources.length} failing${reasons.length > 0 ? `: ${reasons.join(', ')}` : ''}); serving the registry as it is, details in /v1/status`;
}

/** E.g. `leader; 48 clusters; 2 of 11 sources failing (eks:ap-southeast-2:…: ServiceUnavailableException); last cycle partial at …`. */
export function summaryLine(input: SummaryInput): string {
  const parts: string[] = [input.role === 'leader' ? 'leader' : `follower${input.leader ? ` of ${input.leader}` : ''}`, input.clusters === undefined ? 'registry not read yet' : `${input.clusters} cluster${input.clusters === 1 ? '' : 's'}`];
  if (input.role === 'leader') {
    const failing = input.sources.filter((s) => !s.ok);
    if (input.sources.length === 0) parts.push('no sources yet');
    else if (failing.length === 0) parts.push(`all ${input.sources.length} sources ok`);
    else parts.push(`${failing.length} of ${input.sources.length} sources failing${firstFailure(failing)}`);
    parts.push(input.lastCycle ? `last cycle ${input.lastCycle.result} at ${input.lastCycle.started_at}` : 'first cycle not completed yet');
  }
  return parts.join('; ');
}

function firstFailure(sources: readonly SourceStatus[]): string {
  const failed = sources.find((s) => !s.ok && s.last_error);
  if (!failed?.last_error) return '';
  const more = sources.filter((s) => !s.ok).length > 1 ? ', first' : '';
  // Redacted before it is cut: the body's redaction afterwards would not know a credential cut in two.
  return `${more}: ${failed.id}: ${failed.last_error.code}${failed.last_error.message ? ` — ${redactedStart(failed.last_error.message, 160)}` : ''}`;
}
