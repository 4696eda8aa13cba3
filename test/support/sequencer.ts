import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suite's order on two workers: the longest files first (a clean clone has no timing cache, and vitest would
 * order by file size), then vitest's own order, and the container image's test last: .ci/run builds the image
 * beside the suite and that file waits for the build's result, so it must not hold a worker while the build runs.
 */
const LONGEST_FIRST = [
  'test/upgrade/rolling-upgrade.test.ts',
  'test/faults/truthful-answers.test.ts',
  'test/faults/faults.test.ts',
  'test/distributed/replicas.test.ts',
  'test/e2e/backup-restore.test.ts',
  'test/distributed/journeys.test.ts',
  'test/faults/db-outage.test.ts',
];
const LAST = 'test/deploy/image.test.ts';

export default class LongestFirstImageLast extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = LONGEST_FIRST.findIndex((p) => f.moduleId.endsWith(p));
      if (i >= 0) return i;
      return f.moduleId.endsWith(LAST) ? LONGEST_FIRST.length + 1 : LONGEST_FIRST.length;
    };
    // Array.prototype.sort is stable: vitest's order holds within each rank.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
