import { durationFromEnv, type Logger, type ObjectStorage, type Sql, type TransactionSql } from '@imagegen/platform';

/**
 * Object keys that storage must lose unless a row claims them (table object_gc, migration 200). Writes are
 * ordered so that no file can outlive a crash without an entry here:
 * - a store schedules its keys (due after OBJECT_GC_GRACE_MS) BEFORE it writes the files, and claims them
 *   (deletes the entries) in the transaction that inserts the row;
 * - a delete schedules the keys of the row (due after OBJECT_DELETE_GRACE) in the transaction that deletes the
 *   row; with no grace it then removes the files and the entries at once;
 * - the sweeper removes the files of due entries a crash left behind, then the entries.
 * Filesystem and S3 storage alike: it only uses ObjectStorage.deleteMany.
 */

/** OBJECT_GC_GRACE_MS: how long a store may take between scheduling its keys and committing its row. */
export const OBJECT_GC_GRACE_MS = durationFromEnv('OBJECT_GC_GRACE_MS', 10 * 60_000);
/** OBJECT_GC_SWEEP_MS: how often each library process sweeps due entries. */
export const OBJECT_GC_SWEEP_MS = durationFromEnv('OBJECT_GC_SWEEP_MS', 60_000);

type Db = Sql | TransactionSql;

/** Records that these keys are to be removed at `now + afterMs` unless claimed first. */
export async function scheduleRemoval(db: Db, keys: string[], afterMs: number): Promise<void> {
  if (keys.length === 0) return;
  await db`INSERT INTO object_gc (object_key, due_at)
    SELECT k, now() + ${`${Math.max(0, afterMs)} milliseconds`}::interval FROM unnest(${keys}::text[]) AS k
    ON CONFLICT (object_key) DO UPDATE SET due_at = LEAST(object_gc.due_at, excluded.due_at)`;
}

/**
 * In the transaction that deletes the rows owning these keys: their files go after `graceMs` (config
 * objectDeleteGraceMs, OBJECT_DELETE_GRACE: a database restored from a backup inside it finds every object it
 * lists; the gateway does not serve them meanwhile). With no grace, call removeDeletedObjects after the commit.
 */
export async function scheduleDeletedObjects(db: Db, keys: string[], graceMs: number): Promise<void> {
  await scheduleRemoval(db, keys, graceMs);
}

/** After the commit of a delete: removes the files at once when there is no grace (else the sweeper does, when due). */
export async function removeDeletedObjects(
  deps: { sql: Sql; storage: ObjectStorage; logger?: Logger },
  keys: string[],
  graceMs: number,
): Promise<void> {
  if (graceMs === 0) await removeObjects(deps, keys);
}

/** Whether a stored object may be served at its public URL: not while its key awaits removal. */
export async function objectServable(db: Db, key: string): Promise<boolean> {
  const [r] = await db`SELECT 1 FROM object_gc WHERE object_key = ${key}`;
  return !r;
}

/** A row now owns these keys: they are no longer to be removed. */
export async function claimKeys(db: Db, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await db`DELETE FROM object_gc WHERE object_key = ANY(${keys}::text[])`;
}

/**
 * Removes the files of keys scheduled for removal (their row is gone or was never committed), then their
 * entries. When storage fails, the entries stay and the sweeper tries again later.
 */
export async function removeObjects(deps: { sql: Sql; storage: ObjectStorage; logger?: Logger }, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  try {
    await deps.storage.deleteMany(keys);
    await claimKeys(deps.sql, keys);
  } catch (err) {
    deps.logger?.warn({ err, keys }, 'could not remove objects yet; the object sweeper will retry');
  }
}

/**
 * Removes the files of due entries, at most `limit` per call; replicas sweep side by side without taking
 * each other's entries (SKIP LOCKED). Returns how many entries were removed.
 */
export async function sweepObjects(deps: { sql: Sql; storage: ObjectStorage }, limit = 200): Promise<number> {
  return deps.sql.begin(async (tx) => {
    const due = await tx`SELECT object_key FROM object_gc WHERE due_at <= now()
      ORDER BY due_at LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
    if (due.length === 0) return 0;
    const keys = due.map((r) => r.object_key as string);
    await deps.storage.deleteMany(keys);
    await tx`DELETE FROM object_gc WHERE object_key = ANY(${keys}::text[])`;
    return keys.length;
  });
}
