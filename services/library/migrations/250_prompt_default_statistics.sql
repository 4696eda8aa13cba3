-- Issue 16: the prompt column back to the default statistics target. Migration 150 raised it to 1000 so that the
-- planner could tell a rare ILIKE word from a frequent one by the prompt's histogram. No query reads those
-- statistics any more: a search chooses its plan by measuring (list-query.ts searchPlanQuery), and its match is
-- written `lower(prompt) LIKE ...`, an expression without statistics of its own. The target still sized every
-- ANALYZE of images (300 x the largest target = 300,000 sample rows, each also computing its prompt_trgm_keys for
-- the expression index's statistics): at 2M images ANALYZE took 14.3 s, and 1.3 s at the default. The plans of
-- the 20 list queries of `pnpm bench scale` at 1M images were the same with either sample (EXPLAIN, docs/BENCHMARKS.md).
ALTER TABLE images ALTER COLUMN prompt SET STATISTICS -1;
