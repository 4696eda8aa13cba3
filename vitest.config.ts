import { defineConfig } from 'vitest/config';
import LongestFirstImageLast from './test/support/sequencer.js';

export default defineConfig({
  test: {
    include: [
      'libs/*/test/**/*.test.ts',
      'services/*/test/**/*.test.ts',
      'test/e2e/**/*.test.ts',
      'test/distributed/**/*.test.ts',
      'test/deploy/**/*.test.ts',
      'test/faults/**/*.test.ts',
      'test/fuzz/**/*.test.ts',
      'test/upgrade/**/*.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: more workers only add contention (each e2e file runs a whole stack).
    maxWorkers: 2,
    sequence: { sequencer: LongestFirstImageLast },
    reporters: ['default', './test/support/count-reporter.ts'],
  },
});
