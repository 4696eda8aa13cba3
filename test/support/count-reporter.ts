import { appendFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the line CI reads: `N passed, N failed`. A file that failed outside its tests counts every test it did not
 * pass as failed (at least one).
 */
export default class CountReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    let passed = 0;
    let failed = 0;
    for (const m of modules) {
      // In a file that failed outside its tests (e.g. in beforeAll), the tests it never ran are failures too.
      const moduleFailed = m.state() === 'failed';
      let failedInModule = 0;
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed' || moduleFailed) failedInModule++;
      }
      failed += moduleFailed ? Math.max(1, failedInModule) : failedInModule;
    }
    // Errors thrown outside any test (unhandled rejections) fail the run too.
    failed += unhandledErrors.length;
    const line = `${passed} passed, ${failed} failed`;
    process.stdout.write(`\n${line}\n`);
    if (process.env.COUNT_FILE) appendFileSync(process.env.COUNT_FILE, `${line}\n`);
  }
}
