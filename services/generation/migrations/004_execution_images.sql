-- A completed execution keeps the images it reported to its caller (ascending ids: the ones the library commits) and
-- how many the call asked for, so a caller whose answer was lost (its generation replica died after writing
-- 'completed', before the answer reached it) can rebuild that answer from GetExecution instead of answering 503 for
-- images that are listed and billed (README, "Faults, retries and billing"). NULL for failed executions and for rows
-- finished before this migration. Written by the UPDATE that finishes the execution (already a non-HOT update).
ALTER TABLE executions ADD COLUMN IF NOT EXISTS image_ids bigint[];
ALTER TABLE executions ADD COLUMN IF NOT EXISTS images_requested integer;
