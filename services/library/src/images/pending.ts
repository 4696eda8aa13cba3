import {
  type Config,
  type DirectEvent,
  type DirectPublisher,
  durationFromEnv,
  type Logger,
  type ObjectStorage,
  outboxInsertKeyed,
  type Sql,
  type SqlFragment,
  type TransactionSql,
} from '@imagegen/platform';
import { adjustSessionCount } from '../sessions/store.js';
import { imageStoredData, imageStoredSubject, type StoredImage, writeImageStored } from './events.js';
import { removeObjects, scheduleRemoval } from './object-gc.js';
import { IMAGE_COLUMNS, type ImageRow, rowFromDb } from './types.js';

/**
 * The second phase of storing an execution's images (pending_images, migration 200): an image is listed
 * and billed only when the execution that produced it completed. Both operations are idempotent and run
 * from two places: generation calls CommitExecutionImages right after it wrote 'completed', and the
 * library's ExecutionFinished consumer does the same for completed executions (the call may have been
 * lost with its process) and discards the images of failed ones.
 */

export interface PendingDeps {
  sql: Sql;
  storage: ObjectStorage;
  config: Config;
  logger?: Logger;
  /** The library relay's direct publishing: a commit's ImageStored events go out right after it, not through a relay round. */
  outbox?: DirectPublisher;
}

/** PENDING_IMAGE_MAX_AGE_MS: pending images with no outcome after this long are discarded (a lost event). */
export const PENDING_MAX_AGE_MS = durationFromEnv('PENDING_IMAGE_MAX_AGE_MS', 3_600_000);

/**
 * Commits of reported images made by this process, by execution id, while they run and for a while after they
 * succeeded: the ExecutionFinished consumer of this process then has nothing left to look for (generation's own
 * call moved the reported images and discarded the others), which spares it a query per execution. Only a
 * success is kept; a failed or unknown commit leaves the consumer its usual check.
 */
const ownCommits = new Map<string, Promise<boolean>>();
/** Executions remembered at most (the oldest go first); their events follow their commits within moments. */
const OWN_COMMITS_KEPT = 10_000;

/** Whether this process committed the execution's reported images (waiting for a commit still running). */
export async function committedHere(executionId: string): Promise<boolean> {
  const commit = ownCommits.get(executionId);
  if (!commit) return false;
  ownCommits.delete(executionId);
  return commit;
}

/** Sets `key` in a map kept to `max` entries: past it, the oldest entry goes. */
function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
}

/**
 * Moves the execution's pending images into the gallery with their ImageStored events; returns how many.
 * With `imageIds` (the images the execution reported to its caller), only those move, and the execution's
 * other pending images (a store whose answer was lost, so never reported) are discarded with their files.
 */
export async function commitExecutionImages(
  deps: PendingDeps,
  tenantId: string,
  executionId: string,
  imageIds?: number[],
  opts: { checkFirst?: boolean } = {},
): Promise<number> {
  if (!executionId) return 0;
  const reported = imageIds?.length ? imageIds : undefined;
  // Generation's call, with the images it reported: what this process's consumer of the event may skip.
  const ownCall = reported !== undefined && !opts.checkFirst;
  const commit = movePending(deps, tenantId, executionId, reported, ownCall);
  if (ownCall) {
    setBounded(
      ownCommits,
      executionId,
      commit.then(
        () => true,
        () => false,
      ),
      OWN_COMMITS_KEPT,
    );
  }
  return commit;
}

async function movePending(
  deps: PendingDeps,
  tenantId: string,
  executionId: string,
  reported: number[] | undefined,
  ownCall: boolean,
): Promise<number> {
  if (!ownCall) {
    // The ExecutionFinished consumer: generation's own call usually came first and left nothing (no transaction then).
    const [left] = await deps.sql`SELECT 1 FROM pending_images WHERE tenant_id = ${tenantId} AND execution_id = ${executionId} LIMIT 1`;
    if (!left) return 0;
  }
  const known = ownCall && reported ? knownPendingEvents(tenantId, executionId, reported) : undefined;
  let moved: { committed: number; unreported: number };
  try {
    moved = known
      ? await moveWithKnownEvents(deps, tenantId, executionId, known)
      : await moveThenWriteEvents(deps, tenantId, executionId, reported);
  } finally {
    for (const id of reported ?? []) pendingEvents.delete(id);
  }
  if (moved.unreported > 0) {
    const n = await discardExecutionImages(deps, tenantId, executionId);
    if (n > 0) deps.logger?.warn({ executionId, images: n }, 'discarded pending images the execution never reported');
  }
  return moved.committed;
}

/**
 * The move: the execution's pending images (only the reported ones when given) into `images`, and the count of its
 * pending images it did not report; `events` adds data-modifying CTEs that read the moved rows (`ins`).
 */
function moveStatement(
  sql: Sql | TransactionSql,
  tenantId: string,
  executionId: string,
  reported: number[] | undefined,
  thumbnailSizes: Map<number, number>,
  events?: { ctes: SqlFragment; notify: SqlFragment },
) {
  const only = reported ? sql`AND id = ANY(${reported}::bigint[])` : sql``;
  // A row written while its thumbnail rendered has no size (NULL): it is given here. One still without a size fails
  // the statement (images.thumbnail_size_bytes is NOT NULL) rather than list a wrong one.
  const thumbnailSize = sql`COALESCE(thumbnail_size_bytes, (SELECT t.size FROM unnest(${[...thumbnailSizes.keys()]}::bigint[],
    ${[...thumbnailSizes.values()]}::bigint[]) AS t(id, size) WHERE t.id = pending_images.id)) AS thumbnail_size_bytes`;
  return sql`
    WITH moved AS (
      DELETE FROM pending_images WHERE tenant_id = ${tenantId} AND execution_id = ${executionId} ${only}
      RETURNING ${sql.unsafe(COLUMNS_BEFORE_THUMBNAIL_SIZE)} ${thumbnailSize}, ${sql.unsafe(COLUMNS_AFTER_THUMBNAIL_SIZE)}, json_plain
    ), ins AS (
      INSERT INTO images (${sql.unsafe(IMAGE_COLUMNS)}, json_plain) SELECT ${sql.unsafe(IMAGE_COLUMNS)}, json_plain FROM moved ORDER BY id
      RETURNING ${sql.unsafe(IMAGE_COLUMNS)}
    )${events ? sql`, ${events.ctes}` : sql``}
    SELECT others.n AS unreported_count, ${events ? sql`${events.notify} AS notified, ` : sql``}ins.* FROM (
      SELECT count(*)::int AS n FROM pending_images
      WHERE tenant_id = ${tenantId} AND execution_id = ${executionId} AND ${reported ? sql`NOT (id = ANY(${reported}::bigint[]))` : sql`false`}
    ) AS others LEFT JOIN ins ON true`;
}

const [COLUMNS_BEFORE_THUMBNAIL_SIZE, COLUMNS_AFTER_THUMBNAIL_SIZE] = IMAGE_COLUMNS.split(/\bthumbnail_size_bytes,/);

/** What a moveStatement answered: the moved rows (none is a row of NULLs) and the count of unreported pending images. */
function moveOutcome(rows: Record<string, unknown>[]): { moved: Record<string, unknown>[]; unreported: number } {
  return { moved: rows.filter((r) => r.id !== null), unreported: Number(rows[0]?.unreported_count ?? 0) };
}

/**
 * One statement when this process stored every reported image (the usual case: generation stores and commits
 * through the same library): their ImageStored payloads are known beforehand, so the move and the events of the
 * rows it moved are one atomic statement, and one round trip.
 */
async function moveWithKnownEvents(deps: PendingDeps, tenantId: string, executionId: string, known: StoredImage[]) {
  const ordered = [...known].sort((a, b) => a.imageId - b.imageId);
  const direct = deps.outbox?.ready() ?? false;
  const { insert, notify, events } = outboxInsertKeyed(
    deps.sql,
    imageStoredSubject(deps.config.eventsPrefix),
    ordered.map((e) => ({ key: e.imageId, data: imageStoredData(e) })),
    { cte: 'ins', column: 'id' },
    undefined,
    { direct },
  );
  const rows = await moveStatement(
    deps.sql,
    tenantId,
    executionId,
    ordered.map((e) => e.imageId),
    new Map(ordered.map((e) => [e.imageId, e.thumbnailSizeBytes])),
    { ctes: deps.sql`ev AS (${insert})`, notify },
  );
  const { moved, unreported } = moveOutcome(rows);
  if (direct) {
    // The events of the rows the statement moved (they committed with them), in id order as written.
    const movedIds = new Set(moved.map((r) => Number(r.id)));
    deps.outbox?.publish(ordered.filter((e) => movedIds.has(e.imageId)).map((e) => events.get(e.imageId) as DirectEvent));
  }
  return { committed: moved.length, unreported };
}

/**
 * A transaction: the move, then the events of the moved rows (read back). Rows stored without their thumbnail's size
 * (by a process that is not this one, or that forgot it) get it from the thumbnail object first.
 */
async function moveThenWriteEvents(deps: PendingDeps, tenantId: string, executionId: string, reported: number[] | undefined) {
  const thumbnailSizes = await storedThumbnailSizes(deps, tenantId, executionId, reported);
  return deps.sql.begin(async (tx) => {
    const { moved, unreported } = moveOutcome(await moveStatement(tx, tenantId, executionId, reported, thumbnailSizes));
    const images = moved.map((r) => rowFromDb(r)).sort((a, b) => a.id - b.id);
    // The events are sent together (one write on the transaction's connection), in id order.
    await Promise.all(images.map((row) => writeImageStored(tx, deps.config.eventsPrefix, { ...row, imageId: row.id })));
    return { committed: images.length, unreported };
  });
}

/**
 * The sizes of the thumbnails of the execution's pending rows that hold none (see storePending), read off the
 * objects. A thumbnail gone missing is listed as 0 bytes (its image is reported, so its store wrote it): the
 * image and its bill stay as its caller was told.
 */
async function storedThumbnailSizes(
  deps: PendingDeps,
  tenantId: string,
  executionId: string,
  reported: number[] | undefined,
): Promise<Map<number, number>> {
  const only = reported ? deps.sql`AND id = ANY(${reported}::bigint[])` : deps.sql``;
  const rows = await deps.sql`SELECT id, thumbnail_key FROM pending_images
    WHERE tenant_id = ${tenantId} AND execution_id = ${executionId} ${only} AND thumbnail_size_bytes IS NULL`;
  const sizes = new Map<number, number>();
  await Promise.all(
    rows.map(async (r) => {
      const stat = await deps.storage.stat(r.thumbnail_key as string);
      if (!stat)
        deps.logger?.warn({ imageId: Number(r.id), executionId }, 'the thumbnail of a pending image is missing; committed as 0 bytes');
      sizes.set(Number(r.id), stat?.size ?? 0);
    }),
  );
  return sizes;
}

/**
 * What ImageStored says of the pending images this process stored, by image id, until their execution's commit:
 * the commit then writes the events in the statement that moves the rows. The oldest go first past the bound (a
 * commit made elsewhere, or never); a miss costs the commit a transaction instead of one statement.
 */
const pendingEvents = new Map<number, { executionId: string; event: StoredImage }>();
const PENDING_EVENTS_KEPT = 10_000;

/** Called by storeImage for a pending image it inserted. */
export function rememberPendingImage(row: ImageRow): void {
  if (!row.executionId) return;
  // Only the event's fields, not the whole row (its prompt among them).
  const event: StoredImage = {
    tenantId: row.tenantId,
    imageId: row.id,
    sizeBytes: row.sizeBytes,
    thumbnailSizeBytes: row.thumbnailSizeBytes,
    createdAt: row.createdAt,
    modelId: row.modelId,
    operation: row.operation,
    sessionId: row.sessionId,
    keyType: row.keyType,
  };
  setBounded(pendingEvents, row.id, { executionId: row.executionId, event }, PENDING_EVENTS_KEPT);
}

/** The events of every reported image when all are known here (for this tenant and execution), else undefined. */
function knownPendingEvents(tenantId: string, executionId: string, reported: number[]): StoredImage[] | undefined {
  const out: StoredImage[] = [];
  for (const id of reported) {
    const p = pendingEvents.get(id);
    if (!p || p.executionId !== executionId || p.event.tenantId !== tenantId) return undefined;
    out.push(p.event);
  }
  return out;
}

/** Tests: forgets the pending images this process stored (as a process that did not store them). */
export function forgetPendingImages(): void {
  pendingEvents.clear();
}

/** Deletes the pending images of a failed execution (rows, session counts, then files); returns how many. */
export async function discardExecutionImages(deps: PendingDeps, tenantId: string, executionId: string): Promise<number> {
  if (!executionId) return 0;
  return discard(deps, deps.sql`tenant_id = ${tenantId} AND execution_id = ${executionId}`);
}

/** Deletes one pending image (its row, its session's count, then its files): a store whose files failed after its row went in. */
export async function discardPendingImage(deps: PendingDeps, tenantId: string, imageId: number): Promise<number> {
  pendingEvents.delete(imageId);
  return discard(deps, deps.sql`tenant_id = ${tenantId} AND id = ${imageId}`);
}

/** Discards pending images older than `olderThanMs` whose execution never reported an outcome. */
export async function discardStalePending(deps: PendingDeps, olderThanMs = PENDING_MAX_AGE_MS): Promise<number> {
  return discard(deps, deps.sql`created_at < now() - ${`${olderThanMs} milliseconds`}::interval`);
}

async function discard(deps: PendingDeps, where: ReturnType<Sql>): Promise<number> {
  const removed = await deps.sql.begin(async (tx) => {
    const rows = await tx`
      DELETE FROM pending_images WHERE id IN (SELECT id FROM pending_images WHERE ${where} ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED)
      RETURNING tenant_id, session_id, object_key, thumbnail_key`;
    if (rows.length === 0) return [];
    // Session rows in key order (as every other writer locks them), one update per session.
    const perSession = new Map<string, { tenantId: string; sessionId: string; n: number }>();
    for (const r of rows) {
      const k = `${r.tenant_id}\u0000${r.session_id}`;
      const e = perSession.get(k) ?? { tenantId: r.tenant_id as string, sessionId: r.session_id as string, n: 0 };
      e.n++;
      perSession.set(k, e);
    }
    for (const k of [...perSession.keys()].sort()) {
      const e = perSession.get(k) as { tenantId: string; sessionId: string; n: number };
      await adjustSessionCount(tx, e.tenantId, e.sessionId, -e.n);
    }
    const keys = rows.flatMap((r) => [r.object_key as string, r.thumbnail_key as string]);
    await scheduleRemoval(tx, keys, 0);
    return keys;
  });
  await removeObjects(deps, removed);
  return removed.length / 2;
}
