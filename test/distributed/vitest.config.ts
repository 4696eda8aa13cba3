import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The distributed shape alone: `npx vitest run -c test/distributed/vitest.config.ts`.
 * (The root vitest.config.ts runs these files too as part of `pnpm test`.)
 */
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/distributed/**/*.test.ts', 'test/e2e/ops*.test.ts', 'test/e2e/k8s*.test.ts', 'test/e2e/telemetry*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
