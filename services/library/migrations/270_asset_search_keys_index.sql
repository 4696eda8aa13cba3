-- migrate: no-transaction
-- Issue 16 item 4: the asset searches' key indexes (asset_search_keys, migration 260), built concurrently so an upgrade
-- does not block writes to the asset tables. The expressions are the ones the lists' queries use
-- (services/library/src/assets/common.ts SEARCH_KEYS).
CREATE INDEX CONCURRENTLY IF NOT EXISTS characters_search_keys ON characters
  USING gin (asset_search_keys(tenant_id, ARRAY[character_name, description] || tags)) WITH (fastupdate = off);
CREATE INDEX CONCURRENTLY IF NOT EXISTS scenes_search_keys ON scenes
  USING gin (asset_search_keys(tenant_id, ARRAY[scene_name, description, scene_prompt] || tags)) WITH (fastupdate = off);
CREATE INDEX CONCURRENTLY IF NOT EXISTS products_search_keys ON products
  USING gin (asset_search_keys(tenant_id, ARRAY[product_name, product_description, tags])) WITH (fastupdate = off);
