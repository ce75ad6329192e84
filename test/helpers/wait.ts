/** Budgets for tests that wait on real loopback I/O rather than on a fake clock. */

/**
 * `vi.waitFor` and `expect.poll` options for a wait on a real round trip to a fake server.
 * Vitest's default budget (1 s) is shorter than such a round trip can take on a loaded machine;
 * this one only bounds a hung test, as the wait ends as soon as the answer is in.
 */
export const ROUND_TRIP = {timeout: 20_000, interval: 20} as const;
