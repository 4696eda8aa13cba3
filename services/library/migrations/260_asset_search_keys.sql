-- Issue 16 item 4: the character, scene and product searches (SPEC 4.2, 4.4, 4.5: `search` in the name, description,
-- tags, and a scene's prompt) read their candidates from a GIN index of (tenant, trigram) keys, as the image search does
-- (migration 190), instead of testing every asset of the tenant: at 10,000 characters a 1% search took 101 / 204 ms
-- (p50 / p99, 8 connections) against 5 / 12 ms at 100.
--
-- asset_search_keys(tenant, parts): the keys of the searchable fields joined by spaces (NULLs left out): pg_trgm
--   splits words at the spaces, so the keys are the union of each field's keys. Every asset matching `field ILIKE
--   %term%` in any field holds search_trgm_keys(tenant, term); the queries keep the ILIKEs as the exact test.
-- Written with the schema's own prompt_trgm_keys by name: an index expression must not depend on the search_path
-- (ANALYZE and autovacuum evaluate it with their own).
DO $do$
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION %1$I.asset_search_keys(tenant text, parts text[]) RETURNS int8[] LANGUAGE sql IMMUTABLE
      PARALLEL SAFE AS $b$ SELECT %1$I.prompt_trgm_keys(tenant, array_to_string(parts, ' ')) $b$$f$, current_schema());
END $do$;
