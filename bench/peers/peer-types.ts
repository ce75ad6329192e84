/** What the bench reports about a peer run. */

/** The peer's numbers on one workload, or why there are none. */
export type PeerReport =
  | {
      readonly ran: true;
      readonly peer: string;
      readonly versions: Readonly<Record<string, string>>;
      readonly wall_ms_median: number;
      readonly wall_ms_all: readonly number[];
      readonly api_calls_per_cycle: number;
      readonly clusters_found: number;
      readonly clusters_expected: number;
      readonly found_all: boolean;
      /** Locations (account/region) whose readLocation threw, with the first error. */
      readonly failed_locations: number;
      readonly first_error?: string;
      readonly cpu_ms_per_cluster: number;
      readonly peak_rss_mb: number;
      /** AwsIamStrategy.getCredential calls per second (it has no cache: every call signs). */
      readonly token_mints_per_second: number;
      readonly notes: readonly string[];
    }
  | {readonly ran: false; readonly peer: string; readonly reason: string};
