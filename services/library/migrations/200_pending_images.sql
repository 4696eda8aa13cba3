-- Two-phase image storing and object cleanup (issue: faults lose nothing, bill nothing twice).
--
-- pending_images: images of an execution that has not completed yet (StoreImage with pending). Same
--   columns as images (ids from the images identity, so an image keeps its id when committed); not listed,
--   not billed, no ImageStored event. CommitExecutionImages (or the execution's ExecutionFinished event,
--   status completed) moves them into images with their events; a failed execution's are deleted with their
--   files. The session's image_count counts them (capacity is reserved at store time).
CREATE TABLE pending_images (LIKE images INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
DO $$
BEGIN
  EXECUTE format('ALTER TABLE pending_images ALTER COLUMN id SET DEFAULT nextval(%L)', pg_get_serial_sequence('images', 'id'));
END $$;
ALTER TABLE pending_images ADD PRIMARY KEY (id);
CREATE INDEX pending_images_execution ON pending_images (tenant_id, execution_id);
CREATE INDEX pending_images_created ON pending_images (created_at);

-- object_gc: object keys that must be removed from storage unless a row claims them first. A store writes
--   its keys here (due after a grace period) before it writes the files, and deletes them in the
--   transaction that inserts the row; a delete writes them (due now) in the transaction that deletes the
--   row. The sweeper removes due keys' files, then the entries. So a crash at any point leaves no file
--   without a row for longer than the grace period (filesystem and S3 alike).
CREATE TABLE object_gc (
  object_key text PRIMARY KEY,
  due_at timestamptz NOT NULL
);
CREATE INDEX object_gc_due ON object_gc (due_at);
