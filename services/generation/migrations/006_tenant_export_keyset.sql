-- migrate: no-transaction
-- A tenant's export (issue 40, item 4) pages its executions on execution_id: one index range per page at any size.
CREATE INDEX CONCURRENTLY IF NOT EXISTS executions_tenant_id ON executions (tenant_id, execution_id);
