-- Issue 16: the live session stream lists (and counts, capped at 1,001 rows) the session's executions that are
-- running or finished since an instant: `status = 'running' OR completed_at >= $since`. The running arm is
-- served by executions_running_instance, this index serves the other (a BitmapOr), so the query reads the
-- few matching rows instead of every execution of the session (or the table). completed_at is written once,
-- when the execution finishes (already a non-HOT update: status is indexed), so log appends stay HOT.
CREATE INDEX IF NOT EXISTS executions_session_completed ON executions (tenant_id, session_id, completed_at);
