-- Issue 16 item 5: a pending image's row goes in while libvips renders its thumbnail (the row is the record of its
-- keys, written before its files, and it no longer waits for the image work), so the thumbnail's size is not known
-- yet when the row is written. NULL: not known to the row. The commit that moves the row into images takes the size
-- from what the store answered (this process) or from the thumbnail object itself (storage stat, any process).
-- images.thumbnail_size_bytes stays NOT NULL. Dropping NOT NULL changes the catalog only: no table rewrite.
ALTER TABLE pending_images ALTER COLUMN thumbnail_size_bytes DROP NOT NULL;
