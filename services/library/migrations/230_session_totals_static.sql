-- Issue 16 item 5: the session totals of migration 180 without dynamic SQL. session_totals_on_change() ran its two
-- statements through EXECUTE format(...), which PL/pgSQL parses and plans on every call: 0.24-0.30 ms of each
-- images insert (EXPLAIN ANALYZE of a pending image's commit: the insert with every index 0.26 ms, this trigger
-- 0.30 ms, day counts 0.03, tenant_stats 0.01). Static statements over the transition table are planned once per
-- session and trigger. Same effect as before: the session rows locked in key order first, then the totals moved by
-- the statement's rows per session (+ inserted, - deleted, both for an update), never below 0.
CREATE FUNCTION session_totals_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s JOIN (SELECT DISTINCT tenant_id, session_id FROM new_rows) d USING (tenant_id, session_id)
    ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s;
  UPDATE sessions s SET
    total_images = s.total_images + d.n,
    total_edits = s.total_edits + d.edits,
    total_bytes = s.total_bytes + d.bytes,
    total_tokens = s.total_tokens + d.tokens
  FROM (
    SELECT tenant_id, session_id, count(*)::int AS n, count(*) FILTER (WHERE operation = 'edit')::int AS edits,
      COALESCE(sum(size_bytes), 0)::bigint AS bytes, COALESCE(sum(tokens), 0)::bigint AS tokens
    FROM new_rows GROUP BY tenant_id, session_id
  ) d
  WHERE s.tenant_id = d.tenant_id AND s.session_id = d.session_id;
  RETURN NULL;
END $$;

CREATE FUNCTION session_totals_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s JOIN (SELECT DISTINCT tenant_id, session_id FROM old_rows) d USING (tenant_id, session_id)
    ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s;
  UPDATE sessions s SET
    total_images = GREATEST(s.total_images - d.n, 0),
    total_edits = GREATEST(s.total_edits - d.edits, 0),
    total_bytes = GREATEST(s.total_bytes - d.bytes, 0),
    total_tokens = GREATEST(s.total_tokens - d.tokens, 0)
  FROM (
    SELECT tenant_id, session_id, count(*)::int AS n, count(*) FILTER (WHERE operation = 'edit')::int AS edits,
      COALESCE(sum(size_bytes), 0)::bigint AS bytes, COALESCE(sum(tokens), 0)::bigint AS tokens
    FROM old_rows GROUP BY tenant_id, session_id
  ) d
  WHERE s.tenant_id = d.tenant_id AND s.session_id = d.session_id;
  RETURN NULL;
END $$;

-- An update (no code path makes one today): the old rows out, then the new rows in, each session row locked
-- once, in key order, before either change.
CREATE FUNCTION session_totals_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s JOIN (
    SELECT tenant_id, session_id FROM old_rows UNION SELECT tenant_id, session_id FROM new_rows
  ) d USING (tenant_id, session_id)
    ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s;
  UPDATE sessions s SET
    total_images = GREATEST(s.total_images + d.n, 0),
    total_edits = GREATEST(s.total_edits + d.edits, 0),
    total_bytes = GREATEST(s.total_bytes + d.bytes, 0),
    total_tokens = GREATEST(s.total_tokens + d.tokens, 0)
  FROM (
    SELECT tenant_id, session_id, sum(n)::int AS n, sum(edits)::int AS edits, sum(bytes)::bigint AS bytes,
      sum(tokens)::bigint AS tokens
    FROM (
      SELECT tenant_id, session_id, -1 AS n, CASE WHEN operation = 'edit' THEN -1 ELSE 0 END AS edits,
        -size_bytes AS bytes, -tokens AS tokens FROM old_rows
      UNION ALL
      SELECT tenant_id, session_id, 1, CASE WHEN operation = 'edit' THEN 1 ELSE 0 END, size_bytes, tokens FROM new_rows
    ) x GROUP BY tenant_id, session_id
  ) d
  WHERE s.tenant_id = d.tenant_id AND s.session_id = d.session_id;
  RETURN NULL;
END $$;

DROP TRIGGER images_by_session_insert ON images;
DROP TRIGGER images_by_session_delete ON images;
DROP TRIGGER images_by_session_update ON images;
CREATE TRIGGER images_by_session_insert AFTER INSERT ON images
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION session_totals_on_insert();
CREATE TRIGGER images_by_session_delete AFTER DELETE ON images
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION session_totals_on_delete();
CREATE TRIGGER images_by_session_update AFTER UPDATE ON images
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION session_totals_on_update();
DROP FUNCTION session_totals_on_change();
