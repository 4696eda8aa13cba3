-- Issue 16 item 4: a version of each session's images, so that the session detail's rendered JSON (about 750 KB for
-- 1,000 images, 10-20 ms of PostgreSQL) can be kept and served again while nothing changed. Images are inserted and
-- deleted, never updated in place; every statement that inserts, deletes (or updates) a session's images moves its
-- version, in the same trigger and under the same row lock as its totals (migration 230's functions, plus one line
-- each). The values come from one sequence, so a version is never reused, not even by a session deleted and created
-- again under the same id. 0: no change since this migration, never cached.
CREATE SEQUENCE IF NOT EXISTS session_images_version;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS images_version bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION session_totals_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s JOIN (SELECT DISTINCT tenant_id, session_id FROM new_rows) d USING (tenant_id, session_id)
    ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s;
  UPDATE sessions s SET
    total_images = s.total_images + d.n,
    total_edits = s.total_edits + d.edits,
    total_bytes = s.total_bytes + d.bytes,
    total_tokens = s.total_tokens + d.tokens,
    images_version = nextval('session_images_version')
  FROM (
    SELECT tenant_id, session_id, count(*)::int AS n, count(*) FILTER (WHERE operation = 'edit')::int AS edits,
      COALESCE(sum(size_bytes), 0)::bigint AS bytes, COALESCE(sum(tokens), 0)::bigint AS tokens
    FROM new_rows GROUP BY tenant_id, session_id
  ) d
  WHERE s.tenant_id = d.tenant_id AND s.session_id = d.session_id;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION session_totals_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s JOIN (SELECT DISTINCT tenant_id, session_id FROM old_rows) d USING (tenant_id, session_id)
    ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s;
  UPDATE sessions s SET
    total_images = GREATEST(s.total_images - d.n, 0),
    total_edits = GREATEST(s.total_edits - d.edits, 0),
    total_bytes = GREATEST(s.total_bytes - d.bytes, 0),
    total_tokens = GREATEST(s.total_tokens - d.tokens, 0),
    images_version = nextval('session_images_version')
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
CREATE OR REPLACE FUNCTION session_totals_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s JOIN (
    SELECT tenant_id, session_id FROM old_rows UNION SELECT tenant_id, session_id FROM new_rows
  ) d USING (tenant_id, session_id)
    ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s;
  UPDATE sessions s SET
    total_images = GREATEST(s.total_images + d.n, 0),
    total_edits = GREATEST(s.total_edits + d.edits, 0),
    total_bytes = GREATEST(s.total_bytes + d.bytes, 0),
    total_tokens = GREATEST(s.total_tokens + d.tokens, 0),
    images_version = nextval('session_images_version')
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
