-- Liveness of generation processes, so an execution whose process died is marked failed within a minute
-- (not after the 15-minute stale sweep).
--   instances: one row per running generation process (a random id per start), heartbeat_at moved every
--   few seconds. executions.instance_id: the process that runs the execution (NULL for rows written
--   before this migration: those keep the stale-progress sweep).
CREATE TABLE instances (
  instance_id text PRIMARY KEY,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE executions ADD COLUMN instance_id text;
CREATE INDEX executions_running_instance ON executions (instance_id) WHERE status = 'running';
