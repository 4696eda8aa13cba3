-- A tenant's data: export jobs and the purge's progress (issue 40, item 4). Expand only: a new table and two
-- nullable columns the previous version never reads.

-- One row per export: its job's progress and heartbeat (updated_at), the ZIP's object key once complete.
CREATE TABLE tenant_exports (
  export_id text PRIMARY KEY,
  tenant_id text NOT NULL,
  status text NOT NULL DEFAULT 'queued', -- queued | running | completed | failed | expired
  phase text NOT NULL DEFAULT 'data', -- data | files | done
  items_done bigint NOT NULL DEFAULT 0,
  items_total bigint NOT NULL DEFAULT 0,
  size_bytes bigint NOT NULL DEFAULT 0,
  object_key text NOT NULL,
  error text,
  requested_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  completed_at timestamptz,
  expires_at timestamptz
);
CREATE INDEX tenant_exports_tenant ON tenant_exports (tenant_id, created_at, export_id);
CREATE INDEX tenant_exports_expiry ON tenant_exports (expires_at) WHERE status = 'completed';

-- A purge under way: when it started and the steps done with what each removed. The row goes with the tenant's
-- last step, so nothing of the tenant is left but its audit records.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS purge_started_at timestamptz;
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS purge_steps jsonb;
