/**
 * The two-walk rule of member walks (an AWS organization's accounts, the subscriptions under Azure
 * management groups), kept across restarts. A walk is no snapshot: a member moved while it ran
 * can be missing from a successful, well-formed walk. The first walk without a member keeps its
 * entries (a skipped source marks them stale, its reason carrying the walk's `marker`); the next
 * one deregisters them. "The previous walk" is the planner's memory when it has one; a planner
 * that has none (a start, a leader change, a rebuilt planner, every `once`) reads the registry:
 * a member any of whose entries carries the marker was already missed by the walk before. (Any,
 * not every: entries carry no matcher, and another matcher that lists the member keeps some of
 * its entries fresh; with "every", a cluster that vanished there was kept again by each new
 * process. A walk that has the member lists it, which clears the mark from its entries.)
 */
import type {KubeServer} from '../../heartbeats/kube-server.ts';
import {LABEL} from '../core/label-names.ts';
import type {PlanContext} from './fetcher.ts';

/** Which entries belong to a walk's members, and the phrase a missed member's stale reason carries. */
export interface WalkMembers {
  /** `teleport.dev/cloud` of the entries. */
  readonly cloud: string;
  /** `teleport.dev/discovery-type` of the entries. */
  readonly type: string;
  /** The label naming the member (`account-id`, `subscription-id`). */
  readonly memberLabel: string;
  /** Part of the skipped reason of a missed member, found again in its entries' `stale_reason`. */
  readonly marker: string;
}

/** Per matcher, the members of its last good walk; see the file comment. */
export class WalkGrace {
  readonly #members: WalkMembers;
  readonly #lastWalk = new Map<number, ReadonlySet<string>>();

  constructor(members: WalkMembers) {
    this.#members = members;
  }

  /**
   * Records a good walk of one matcher and returns the members it lacks that are kept this once
   * (sorted). Without memory and without a registry to ask (`context` absent), none are.
   */
  async missedOnce(matcherIndex: number, walked: ReadonlySet<string>, context?: PlanContext): Promise<string[]> {
    const before = this.#lastWalk.get(matcherIndex);
    let missed: string[] = [];
    if (before) {
      missed = [...before].filter((member) => !walked.has(member));
    } else if (context) {
      // A registry that cannot be read throws here: the planner fails its catch-all source, deleting nothing.
      for (const [member, alreadyMissed] of registeredMembers(await context.registered(), this.#members)) {
        if (!walked.has(member) && !alreadyMissed) missed.push(member);
      }
    }
    this.#lastWalk.set(matcherIndex, walked);
    return missed.sort();
  }

  /** Whether some matcher's last good walk has the member (its per-member state is worth keeping). */
  walked(member: string): boolean {
    for (const members of this.#lastWalk.values()) if (members.has(member)) return true;
    return false;
  }
}

/** Members with registered entries, each with whether one of its entries was left stale by a walk that missed it. */
export function registeredMembers(entries: readonly KubeServer[], members: WalkMembers): Map<string, boolean> {
  const found = new Map<string, boolean>();
  for (const entry of entries) {
    const labels = entry.spec.cluster.metadata.labels;
    if (labels[LABEL.cloud] !== members.cloud || labels[LABEL.discoveryType] !== members.type) continue;
    const member = labels[members.memberLabel];
    if (!member) continue;
    const missed = entry.status?.stale === true && (entry.status.stale_reason ?? '').includes(members.marker);
    found.set(member, (found.get(member) ?? false) || missed);
  }
  return found;
}
