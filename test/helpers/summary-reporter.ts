/** Adds one plain closing line, `vitest: N passed, N failed, N skipped`, that CI log readers understand. */
import type {Reporter, TestModule} from 'vitest/node';

/** Counts test results at the end of the run and prints them on one line. */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = {passed: 0, failed: 0, skipped: 0};
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
    }
    process.stdout.write(`vitest: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}
