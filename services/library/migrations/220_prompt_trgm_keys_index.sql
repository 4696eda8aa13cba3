-- migrate: no-transaction
-- The index of migration 190's trigram keys, built without blocking writes to images (CREATE INDEX CONCURRENTLY:
-- ~64 s for 2M rows on the 2-core CI machine, during which a transactional build would hold every insert).
-- Databases that applied 190 before it moved here already have it (IF NOT EXISTS). fastupdate off: a search never
-- scans a pending list (up to 4 MB between vacuums); an insert updates the index directly instead.
CREATE INDEX CONCURRENTLY IF NOT EXISTS images_prompt_trgm_keys ON images USING gin (prompt_trgm_keys(tenant_id, prompt))
  WITH (fastupdate = off);
-- Nothing reads them any more (the search's ILIKE must not be answered through them either): the trigram index of
-- migration 150, and the btree_gin index of a migration 170 that databases made during development may hold.
DROP INDEX CONCURRENTLY IF EXISTS images_tenant_prompt_trgm;
DROP INDEX CONCURRENTLY IF EXISTS images_prompt_trgm;
