-- The guard of the usage statement (consumer.ts applyBatch): a batch of stored images is applied in one statement,
-- without a transaction, while it reaches no quota threshold that has no alert yet. When it would, this raises
-- (SQLSTATE UQ001), the statement rolls back whole, and the batch is applied again in a transaction that also
-- writes the alert row and its QuotaCrossed event.
CREATE FUNCTION quota_threshold_unalerted() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'a quota threshold without an alert is reached' USING ERRCODE = 'UQ001';
END
$$;
