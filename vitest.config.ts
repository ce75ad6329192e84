import {defineConfig} from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/helpers/network-guard.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default is one worker fewer than the CPUs: one at a time on the 2-core CI machine,
    // 673 s of a 10-minute budget there; two run it in 426 s (the tests wait on servers and timers
    // more than they compute, and each starts its own on free ports).
    maxWorkers: 2,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
