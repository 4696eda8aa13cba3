-- Executions (SPEC 2 "Execution"): one row per generate / edit / upload, with timed log lines.
CREATE TABLE executions (
  execution_id text PRIMARY KEY,
  tenant_id text NOT NULL,
  session_id text NOT NULL,
  tool_name text NOT NULL,
  tool_source text NOT NULL,
  status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
  progress_percent integer NOT NULL DEFAULT 0 CHECK (progress_percent BETWEEN 0 AND 100),
  current_step text NOT NULL DEFAULT '',
  model_id text NOT NULL DEFAULT '',
  key_type text NOT NULL DEFAULT 'live',
  started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  completed_at timestamptz,
  duration_ms bigint,
  result_summary text,
  error text,
  images integer NOT NULL DEFAULT 0,
  log_count integer NOT NULL DEFAULT 0
);
CREATE INDEX executions_session ON executions (tenant_id, session_id, started_at DESC);
CREATE INDEX executions_running ON executions (tenant_id, started_at DESC) WHERE status = 'running';

CREATE TABLE execution_logs (
  id bigserial PRIMARY KEY,
  execution_id text NOT NULL REFERENCES executions (execution_id) ON DELETE CASCADE,
  tenant_id text NOT NULL,
  logged_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  level text NOT NULL DEFAULT 'info',
  message text NOT NULL
);
CREATE INDEX execution_logs_execution ON execution_logs (execution_id, id);
