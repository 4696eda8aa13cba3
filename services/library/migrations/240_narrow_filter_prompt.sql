-- migrate: no-transaction
-- Issue 16: a search combined with a rare filter (isReference, stylePresetId, productReferenceId) walks that
-- filter's partial index in page order and tests each row's prompt (list-query.ts `narrow`). Through the table
-- that was one heap page per row: at 1M images, `all` two words + isReference (3,000 references, 23 matches)
-- fetched 2,913 heap pages and took 16.3 ms, then sorted. With the prompt in the index the walk reads the index
-- alone and stops after the page: 2.0 ms. The same keys, prompt INCLUDEd; built before the old ones go, without
-- blocking writes.
CREATE INDEX CONCURRENTLY IF NOT EXISTS images_tenant_reference_prompt ON images (tenant_id, created_at DESC, id DESC)
  INCLUDE (prompt) WHERE is_reference;
CREATE INDEX CONCURRENTLY IF NOT EXISTS images_tenant_style_prompt ON images (tenant_id, style_preset_id, created_at DESC, id DESC)
  INCLUDE (prompt) WHERE style_preset_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS images_tenant_product_prompt ON images (tenant_id, product_reference_id, created_at DESC, id DESC)
  INCLUDE (prompt) WHERE product_reference_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS images_tenant_reference;
DROP INDEX CONCURRENTLY IF EXISTS images_tenant_style;
DROP INDEX CONCURRENTLY IF EXISTS images_tenant_product;
