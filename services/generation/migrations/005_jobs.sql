-- Issue 37: async jobs. A job is its execution: submitted with `Prefer: respond-async` it is written 'queued' with
-- the request it runs (job_request, a GenerateImagesRequest) and the caller it runs as (job_principal), and any
-- replica claims it (FOR UPDATE SKIP LOCKED, services/generation/src/jobs/queue.ts). A cancel ends a queued job
-- at once and asks a running one to stop (cancel_requested). Expand-only: the previous version never reads these.
ALTER TABLE executions DROP CONSTRAINT IF EXISTS executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check
  CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled'));
ALTER TABLE executions ADD COLUMN IF NOT EXISTS queued_at timestamptz;
ALTER TABLE executions ADD COLUMN IF NOT EXISTS job_request bytea;
ALTER TABLE executions ADD COLUMN IF NOT EXISTS job_principal jsonb;
ALTER TABLE executions ADD COLUMN IF NOT EXISTS operation text NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN IF NOT EXISTS presentation text NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false;
-- The queue: a tenant's queued jobs in order (its next job, its depth, a job's position), and the distinct
-- tenants with queued jobs (a skip scan over the same index).
CREATE INDEX IF NOT EXISTS executions_queued ON executions (tenant_id, queued_at, execution_id) WHERE status = 'queued';
