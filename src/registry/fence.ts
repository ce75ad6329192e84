/** What a fenced write checks: the leader key must still carry the create revision this replica won with. */
export interface Fence {
  /** Registry key (relative to the backend's prefix) of this replica's election entry. */
  readonly key: string;
  /** Create revision of that key when this replica became leader, as a decimal string. */
  readonly createRevision: string;
}
