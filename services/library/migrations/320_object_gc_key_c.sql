-- A tenant's purge reads the objects awaiting removal under its prefix (tenants/<id>/...) as a range of keys.
-- Under a natural-language collation (en_US.UTF-8 and the like) punctuation such as '/' may weigh less than
-- letters and digits, so a range by the column's own collation can miss keys: the range is read in bytewise
-- order ("C"), which this index serves. Expand only.
CREATE INDEX IF NOT EXISTS object_gc_key_c ON object_gc ((object_key COLLATE "C"));
