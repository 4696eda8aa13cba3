-- Session totals kept in the sessions row (issue 16: the sessions list read up to 1,000 image rows per
-- session at 1M images). They count the rows of `images` only (pending images are not listed; image_count,
-- kept by the store code, also counts them to reserve capacity). Maintained by statement-level triggers in
-- the transaction of every images insert/delete (store, pending commit, delete, bulk seeds).
--   total_images   rows in images of the session
--   total_edits    of which operation = 'edit'
--   total_bytes    sum of size_bytes; total_tokens sum of tokens
-- Only existing sessions are updated: every writer creates the session row before its images.
ALTER TABLE sessions
  ADD COLUMN total_images integer NOT NULL DEFAULT 0,
  ADD COLUMN total_edits integer NOT NULL DEFAULT 0,
  ADD COLUMN total_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN total_tokens bigint NOT NULL DEFAULT 0;

-- Applies the statement's rows per session: + for inserted rows, - for deleted ones (an update: both). The
-- session rows are locked in key order first, so multi-session statements cannot deadlock each other. The
-- trigger names (images_by_session_*) sort before images_day_counts_* and images_stats_*: session rows are
-- taken before those counters, the order of the store and delete code (which lock the session row first).
CREATE FUNCTION session_totals_on_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  changed text;
  sign integer;
BEGIN
  FOREACH changed IN ARRAY CASE TG_OP WHEN 'INSERT' THEN ARRAY['new_rows'] WHEN 'DELETE' THEN ARRAY['old_rows']
    ELSE ARRAY['old_rows', 'new_rows'] END LOOP
    sign := CASE changed WHEN 'new_rows' THEN 1 ELSE -1 END;
    EXECUTE format($q$
      SELECT 1 FROM sessions s JOIN (SELECT DISTINCT tenant_id, session_id FROM %I) d USING (tenant_id, session_id)
      ORDER BY s.tenant_id, s.session_id FOR UPDATE OF s$q$, changed);
    EXECUTE format($q$
      UPDATE sessions s SET
        total_images = GREATEST(s.total_images + $1 * d.n, 0),
        total_edits = GREATEST(s.total_edits + $1 * d.edits, 0),
        total_bytes = GREATEST(s.total_bytes + $1 * d.bytes, 0),
        total_tokens = GREATEST(s.total_tokens + $1 * d.tokens, 0)
      FROM (
        SELECT tenant_id, session_id, count(*)::int AS n, count(*) FILTER (WHERE operation = 'edit')::int AS edits,
          COALESCE(sum(size_bytes), 0)::bigint AS bytes, COALESCE(sum(tokens), 0)::bigint AS tokens
        FROM %I GROUP BY tenant_id, session_id
      ) d
      WHERE s.tenant_id = d.tenant_id AND s.session_id = d.session_id$q$, changed) USING sign;
  END LOOP;
  RETURN NULL;
END $$;

CREATE TRIGGER images_by_session_insert AFTER INSERT ON images
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION session_totals_on_change();
CREATE TRIGGER images_by_session_delete AFTER DELETE ON images
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION session_totals_on_change();
-- No code path updates these columns today (a trigger with transition tables takes no column list); a
-- statement that does keeps the totals right too.
CREATE TRIGGER images_by_session_update AFTER UPDATE ON images
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION session_totals_on_change();

-- Backfill of the sessions that already hold images.
UPDATE sessions s SET total_images = t.n, total_edits = t.edits, total_bytes = t.bytes, total_tokens = t.tokens
FROM (
  SELECT tenant_id, session_id, count(*)::int AS n, count(*) FILTER (WHERE operation = 'edit')::int AS edits,
    COALESCE(sum(size_bytes), 0)::bigint AS bytes, COALESCE(sum(tokens), 0)::bigint AS tokens
  FROM images GROUP BY tenant_id, session_id
) t
WHERE s.tenant_id = t.tenant_id AND s.session_id = t.session_id;
