-- Issue 16 item 4: whether an image's session detail JSON may be written raw (sessionImageRawSafe: plain keys, and
-- enumerated fields holding nothing a JSON string escapes), decided once when the row is written instead of by two
-- regular expressions on every read of its session (~1.4 ms of a 1,000-image session's ~5.5 ms rendering).
--   json_plain: true/false as the writer decided it (images/types.ts sessionJsonPlain, the same patterns as the SQL
--   check); NULL: not decided (rows written before this migration, or whose checked columns an UPDATE changed since),
--   checked at read time as before. Nullable and without a default, so adding it rewrites no table.
-- A pending image carries it into images when its execution commits it (the move copies it).
-- Images are not updated in place by the services; an UPDATE that names a checked column (a fix by hand, a test)
-- resets the verdict, so it can never vouch for values it did not check. A change of PLAIN_KEY_SQL or of the
-- enumerated fields' pattern must reset it too (UPDATE ... SET json_plain = NULL).
ALTER TABLE images ADD COLUMN IF NOT EXISTS json_plain boolean;
ALTER TABLE pending_images ADD COLUMN IF NOT EXISTS json_plain boolean;

CREATE OR REPLACE FUNCTION json_plain_undecided() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.json_plain := NULL;
  RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS images_json_plain_undecided ON images;
CREATE TRIGGER images_json_plain_undecided
  BEFORE UPDATE OF object_key, thumbnail_key, operation, aspect_ratio, model_id, resolution_tier, format, mime_type ON images
  FOR EACH ROW WHEN (NEW.json_plain IS NOT NULL) EXECUTE FUNCTION json_plain_undecided();
DROP TRIGGER IF EXISTS pending_images_json_plain_undecided ON pending_images;
CREATE TRIGGER pending_images_json_plain_undecided
  BEFORE UPDATE OF object_key, thumbnail_key, operation, aspect_ratio, model_id, resolution_tier, format, mime_type ON pending_images
  FOR EACH ROW WHEN (NEW.json_plain IS NOT NULL) EXECUTE FUNCTION json_plain_undecided();
