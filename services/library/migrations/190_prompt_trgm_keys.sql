-- Issue 16: the prompt search's trigram index keyed by tenant AND trigram. images_prompt_trgm (migration 150) holds
-- every tenant's prompts, and a (tenant_id, prompt gin_trgm_ops) btree_gin index, tried first, makes tenant_id a GIN
-- key of its own: a search intersected the tenant's posting tree (1M entries, ~140 pages) and every trigram of the
-- phrase, frequent ones included, with each candidate row: a 0.1% phrase at 1M images read 425 index pages (5.4 ms
-- of a 7 ms query). Here each key is hash(tenant, trigram), so a key's posting list
-- holds one tenant's rows with that trigram: the same phrase reads 29 pages (0.25 ms), at 10k as before.
--
-- prompt_trgm_keys(tenant, prompt): the keys of a row: pg_trgm's trigrams of the prompt (lowercased, per run of
--   letters and digits) except the space-padded word starts and ends.
-- search_trgm_keys(tenant, text): the keys every prompt containing `text` (case-insensitively) has: the
--   three-character trigrams inside its words. A word shorter than 3 characters gives none; multibyte trigrams
--   (shown by show_trgm as 0x...) are left out, since their padding cannot be told. An empty array matches every
--   row: the list code does not read this index then (list-query.ts trigramUsable).
-- Queries keep `prompt ILIKE ...` as the exact test of the candidates (a hash collision only adds a candidate).
-- Without pg_trgm both functions return '{}' (the index of 220 then holds no keys): searches stay correct and scan.
DO $do$
DECLARE
  trgm_schema text;
BEGIN
  SELECT n.nspname INTO trgm_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
  IF trgm_schema IS NULL THEN
    RAISE NOTICE 'pg_trgm is not available: prompt searches will scan';
    CREATE FUNCTION prompt_trgm_keys(tenant text, prompt text) RETURNS int8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $f$ SELECT '{}'::int8[] $f$;
    CREATE FUNCTION search_trgm_keys(tenant text, search text) RETURNS int8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $f$ SELECT '{}'::int8[] $f$;
    RETURN;
  END IF;
  EXECUTE format($f$
    CREATE FUNCTION prompt_trgm_keys(tenant text, prompt text) RETURNS int8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    $b$ SELECT COALESCE(array_agg(hashtextextended(tenant || ' ' || g, 0)), '{}') FROM unnest(%I.show_trgm(prompt)) g
        WHERE strpos(g, ' ') = 0 $b$$f$, trgm_schema);
  EXECUTE format($f$
    CREATE FUNCTION search_trgm_keys(tenant text, search text) RETURNS int8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    $b$ SELECT COALESCE(array_agg(hashtextextended(tenant || ' ' || g, 0)), '{}') FROM unnest(%I.show_trgm(search)) g
        WHERE strpos(g, ' ') = 0 AND length(g) = 3 $b$$f$, trgm_schema);
  -- The index itself is built by migration 220, concurrently (a large images table stays writable meanwhile).
END $do$;
