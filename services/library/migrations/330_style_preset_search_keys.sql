-- migrate: no-transaction
-- The style presets' search (extension: `search` in GET /api/style-presets, in the name and the prompt): its key
-- index, as the other asset lists' (migrations 260 and 270), built concurrently so an upgrade does not block writes.
-- The expression is the one the list's query uses (services/library/src/assets/common.ts ASSET_SEARCH). Expand only.
CREATE INDEX CONCURRENTLY IF NOT EXISTS style_presets_search_keys ON style_presets
  USING gin (asset_search_keys(tenant_id, ARRAY[name, prompt])) WITH (fastupdate = off);
