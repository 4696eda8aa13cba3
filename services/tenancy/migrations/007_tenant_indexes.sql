-- A tenant's purge and export read every tenant table by tenant_id (issue 40, item 4): the tenancy tables that
-- had no index on it get one, so the purge reads the tenant's rows, not the whole table
-- (test/e2e/tenant-data.test.ts checks that every tenant table has one). Expand only.
CREATE INDEX IF NOT EXISTS admin_users_tenant ON admin_users (tenant_id);
CREATE INDEX IF NOT EXISTS invitations_tenant ON invitations (tenant_id);
CREATE INDEX IF NOT EXISTS console_sessions_tenant ON console_sessions (tenant_id);
