-- The audit log (issue 40, item 5): one row per admin write and per security-relevant tenant write (webhook
-- endpoints, OAuth client registrations and revocations), written after the write succeeded. Append-only: no
-- route or RPC updates or deletes a row; the trigger refuses any UPDATE, and any DELETE outside the retention
-- sweep (which sets imagegen.audit_sweep for its own transaction). A tenant purge leaves these rows.
CREATE TABLE audit_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- milliseconds, as a cursor carries them (keyset paging on (at, id))
  at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  -- admin_user (actor = user id), admin_token (actor = 'admin-token'), tenant (actor = tenant id), anonymous
  actor_type text NOT NULL,
  actor text NOT NULL,
  actor_role text,
  -- the operation catalogue's operationId (or the OAuth action)
  action text NOT NULL,
  tenant_id text,
  resource_id text,
  request_id text NOT NULL,
  source text NOT NULL DEFAULT '',
  -- the fields the request changed and their new values, secrets replaced by "[redacted]"
  changes jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- Keyset paging newest first on (at, id), per filter: each filtered list reads one index range in order.
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at DESC, id DESC) WHERE tenant_id IS NOT NULL;
CREATE INDEX audit_log_actor_at ON audit_log (actor, at DESC, id DESC);
CREATE INDEX audit_log_action_at ON audit_log (action, at DESC, id DESC);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('imagegen.audit_sweep', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP;
END $$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
