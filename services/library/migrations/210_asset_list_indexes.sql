-- Keyset paging of the asset lists (issue 16, services/library/src/assets/keyset.ts): every sort order of
-- characters, scenes, style presets and products is one index range scan from the cursor, reading about a page.
-- `created` is served by the *_tenant_created indexes of migration 100. last_used_at is ordered as
-- coalesce(last_used_at, '-infinity') (= DESC NULLS LAST, never a real value) so that the key has no NULL and
-- one row comparison continues the order.
CREATE INDEX characters_tenant_name_order ON characters (tenant_id, lower(character_name), character_name, id);
CREATE INDEX characters_tenant_used ON characters
  (tenant_id, times_used DESC, coalesce(last_used_at, '-infinity'::timestamptz) DESC, id DESC);
CREATE INDEX characters_tenant_recent ON characters
  (tenant_id, coalesce(last_used_at, '-infinity'::timestamptz) DESC, created_at DESC, id DESC);

CREATE INDEX scenes_tenant_name_order ON scenes (tenant_id, lower(scene_name), scene_name, id);
CREATE INDEX scenes_tenant_used ON scenes
  (tenant_id, times_used DESC, coalesce(last_used_at, '-infinity'::timestamptz) DESC, id DESC);
CREATE INDEX scenes_tenant_recent ON scenes
  (tenant_id, coalesce(last_used_at, '-infinity'::timestamptz) DESC, created_at DESC, id DESC);

CREATE INDEX style_presets_tenant_name_order ON style_presets (tenant_id, lower(name), name, id);
