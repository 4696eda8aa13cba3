import { appendFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/** Prints the line CI reads: `N passed, N failed` (a failed file with no tests counts as one failure). */
export default class CountReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    let passed = 0;
    let failed = 0;
    for (const m of modules) {
      let testsInModule = 0;
      for (const t of m.children.allTests()) {
        testsInModule++;
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
      }
      if (testsInModule === 0 && m.state() === 'failed') failed++;
    }
    // Errors thrown outside any test (unhandled rejections) fail the run too.
    failed += unhandledErrors.length;
    const line = `${passed} passed, ${failed} failed`;
    process.stdout.write(`\n${line}\n`);
    if (process.env.COUNT_FILE) appendFileSync(process.env.COUNT_FILE, `${line}\n`);
  }
}
