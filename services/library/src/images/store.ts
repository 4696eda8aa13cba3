import { type Config, type Logger, notFound, type ObjectStorage, PLAIN_KEY_SQL, type Sql } from '@imagegen/platform';
import { adjustSessionCount } from '../sessions/store.js';
import { writeImageDeleted } from './events.js';
import { removeDeletedObjects, scheduleDeletedObjects } from './object-gc.js';
import { IMAGE_COLUMNS, type ImageRow, jsonStringContent, rowFromDb, sessionImageJsonText, sessionImageRawSafe } from './types.js';

export const imageNotFound = () => notFound('Image not found');

/** How far the edit chain of an image is followed upwards. */
export const MAX_HISTORY_DEPTH = 50;
export const MAX_EDITS_LISTED = 100;

export async function findImage(sql: Sql, tenantId: string, id: number): Promise<ImageRow | undefined> {
  if (!Number.isSafeInteger(id) || id < 1) return undefined;
  const [r] = await sql`SELECT ${sql.unsafe(IMAGE_COLUMNS)} FROM images WHERE tenant_id = ${tenantId} AND id = ${id}`;
  return r ? rowFromDb(r as Record<string, unknown>) : undefined;
}

export async function getImage(sql: Sql, tenantId: string, id: number): Promise<ImageRow> {
  const row = await findImage(sql, tenantId, id);
  if (!row) throw imageNotFound();
  return row;
}

/** The image's existing ancestors (oldest first, stopping at a deleted one) and its direct edits (oldest first). */
export async function editHistory(sql: Sql, row: ImageRow): Promise<{ ancestors: ImageRow[]; edits: ImageRow[] }> {
  const [ancestors, edits] = await Promise.all([
    row.parentImageId === null
      ? Promise.resolve([])
      : sql`
        WITH RECURSIVE chain AS (
          SELECT ${sql.unsafe(IMAGE_COLUMNS)}, 1 AS depth FROM images WHERE tenant_id = ${row.tenantId} AND id = ${row.parentImageId}
          UNION ALL
          SELECT ${sql.unsafe(IMAGE_COLUMNS.replace(/(^|,)\s*/g, '$1 i.'))}, c.depth + 1 FROM images i
          JOIN chain c ON i.id = c.parent_image_id AND i.tenant_id = c.tenant_id
          WHERE c.depth < ${MAX_HISTORY_DEPTH}
        )
        SELECT * FROM chain ORDER BY depth DESC`,
    sql`SELECT ${sql.unsafe(IMAGE_COLUMNS)} FROM images
        WHERE tenant_id = ${row.tenantId} AND parent_image_id = ${row.id}
        ORDER BY created_at, id LIMIT ${MAX_EDITS_LISTED}`,
  ]);
  return {
    ancestors: ancestors.map((r) => rowFromDb(r as Record<string, unknown>)),
    edits: edits.map((r) => rowFromDb(r as Record<string, unknown>)),
  };
}

/** Rows of the given ids owned by the tenant, in request order (duplicates collapsed); the others as missing. */
export async function resolveImages(sql: Sql, tenantId: string, ids: number[]): Promise<{ rows: ImageRow[]; missing: number[] }> {
  const unique = [...new Set(ids)];
  const valid = unique.filter((id) => Number.isSafeInteger(id) && id > 0);
  const found = valid.length
    ? await sql`SELECT ${sql.unsafe(IMAGE_COLUMNS)} FROM images WHERE tenant_id = ${tenantId} AND id = ANY(${valid}::bigint[])`
    : [];
  const byId = new Map(
    found.map((r) => {
      const row = rowFromDb(r as Record<string, unknown>);
      return [row.id, row] as const;
    }),
  );
  return {
    rows: unique.filter((id) => byId.has(id)).map((id) => byId.get(id) as ImageRow),
    missing: unique.filter((id) => !byId.has(id)),
  };
}

export interface DeleteDeps {
  sql: Sql;
  storage: ObjectStorage;
  config: Config;
  logger?: Logger;
}

/**
 * Deletes one image of the tenant: the row, the session count and the ImageDeleted event in one transaction,
 * then the files. Edit children are untouched and keep their parent_image_id. 404 'Image not found'.
 */
export async function deleteImage(deps: DeleteDeps, tenantId: string, id: number): Promise<ImageRow> {
  if (!Number.isSafeInteger(id) || id < 1) throw imageNotFound();
  const row = await deps.sql.begin(async (tx) => {
    // Lock order as in storeImage: session row, then the tenant_stats row (taken by the delete trigger).
    const [target] = await tx`SELECT session_id FROM images WHERE tenant_id = ${tenantId} AND id = ${id} FOR UPDATE`;
    if (!target) throw imageNotFound();
    await adjustSessionCount(tx, tenantId, target.session_id as string, -1);
    const [r] = await tx`DELETE FROM images WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING ${tx.unsafe(IMAGE_COLUMNS)}`;
    if (!r) throw imageNotFound();
    const deleted = rowFromDb(r as Record<string, unknown>);
    await Promise.all([
      writeImageDeleted(tx, deps.config.eventsPrefix, { ...deleted, imageId: deleted.id }),
      // The files go after OBJECT_DELETE_GRACE (a restored backup still finds them), scheduled with the delete.
      scheduleDeletedObjects(tx, [deleted.objectKey, deleted.thumbnailKey], deps.config.objectDeleteGraceMs),
    ]);
    return deleted;
  });
  await removeDeletedObjects(deps, [row.objectKey, row.thumbnailKey], deps.config.objectDeleteGraceMs);
  return row;
}

/** Deletes each id on its own (own/foreign/missing mixed); foreign and missing ids fail with 'Image not found'. */
export async function deleteImages(
  deps: DeleteDeps,
  tenantId: string,
  ids: number[],
): Promise<{ deleted: number[]; failed: { id: number; error: string }[] }> {
  const deleted: number[] = [];
  const failed: { id: number; error: string }[] = [];
  for (const id of [...new Set(ids)]) {
    try {
      await deleteImage(deps, tenantId, id);
      deleted.push(id);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === undefined || status >= 500) deps.logger?.error({ err, id }, 'bulk delete failed for an image');
      failed.push({
        id,
        error: status === 404 ? 'Image not found' : status && status < 500 ? (err as Error).message : 'Internal server error',
      });
    }
  }
  return { deleted, failed };
}

/** Images of one session, oldest first (a session holds at most 1,000). */
export async function sessionImages(sql: Sql, tenantId: string, sessionId: string, limit = 1000): Promise<ImageRow[]> {
  const rows = await sql`SELECT ${sql.unsafe(IMAGE_COLUMNS)} FROM images
    WHERE tenant_id = ${tenantId} AND session_id = ${sessionId}
    ORDER BY created_at, id LIMIT ${limit}`;
  return rows.map((r) => rowFromDb(r as Record<string, unknown>));
}

/**
 * SQL of both session renderings (sessionImagesJson, sessionImagesJsonParts), parameters $1 tenant, $2 session,
 * $3 limit, $4 PLAIN_KEY_SQL, $5 URL prefix (jsonStringContent): the session's images oldest first, one image's
 * JSON object and whether it is the row's JSON (of a row of `images`), and the session's images_version read in
 * the same statement (one snapshot with the images).
 */
const SESSION_IMAGES_FROM = 'FROM images WHERE tenant_id = $1 AND session_id = $2 ORDER BY created_at, id LIMIT $3';
const SESSION_IMAGE_JSON = sessionImageJsonText('$5::text');
const SESSION_IMAGE_RAW_SAFE = sessionImageRawSafe('$4');
const SESSION_VERSION = '(SELECT images_version FROM sessions WHERE tenant_id = $1 AND session_id = $2)';

/**
 * The same images rendered by PostgreSQL as the JSON array of their session detail form (present.ts sessionImageJson of
 * toImageRecord, field for field; URLs are `urlPrefix` + key, as publicUrl makes them for plain keys). A full session's
 * 1,000 images then cost the Node process one text value instead of 1,000 rows parsed, copied as messages and
 * serialized again (docs/BENCHMARKS.md, session 17). With the session's images_version in the same statement, so the
 * same snapshot: what the session JSON cache keeps it under ('0' when the session has no images). Undefined when a key
 * is not plain (its URL is the storage's to encode) or an enumerated field holds what JSON escapes: the caller renders
 * the rows instead. The text arrives as bytes (raw), neither decoded nor encoded again.
 */
export async function sessionImagesJson(
  sql: Sql,
  tenantId: string,
  sessionId: string,
  limit: number,
  urlPrefix: string,
): Promise<{ version: string; json: Buffer } | undefined> {
  // A NULL image text (none is expected: every column it reads raw is NOT NULL) would be left out by string_agg,
  // so it fails the check instead.
  const [r] = (await sql
    .unsafe(
      `WITH i AS (SELECT created_at, id, ${SESSION_IMAGE_RAW_SAFE} AS plain, ${SESSION_IMAGE_JSON} AS json ${SESSION_IMAGES_FROM})
      SELECT bool_and(plain AND json IS NOT NULL) IS NOT FALSE AS plain,
        COALESCE('[' || string_agg(json, ',' ORDER BY created_at, id) || ']', '[]') AS images,
        CASE WHEN count(*) > 0 THEN ${SESSION_VERSION} ELSE 0 END::text AS version
      FROM i`,
      [tenantId, sessionId, limit, PLAIN_KEY_SQL, jsonStringContent(urlPrefix)],
    )
    .raw()) as unknown as [Buffer, Buffer, Buffer][];
  const [plain, images, version] = r;
  if (plain.toString() === 'f') return undefined;
  // The raw value is a view into the connection's read buffer. The session JSON cache counts what it keeps by its
  // length, so a view of a small part of a larger read (other answers in the same socket read) is copied. A large
  // rendering is nearly all of its buffer (that answer's bytes, joined), and is kept as it arrived: a copy of it cost
  // a measurable share of a cold read's CPU (docs/BENCHMARKS.md, session 20).
  const json = images.length * 2 < images.buffer.byteLength ? Buffer.from(images) : images;
  return { version: version?.toString() ?? '0', json };
}

/** A session's images in order, each with its JSON unless the caller knew it (sessionImagesJsonParts). */
export interface SessionImagesJson {
  /** The session's images_version in the same snapshot ('0' when the session has no images). */
  version: string;
  /**
   * Oldest first. `key` names the image's row version (its id and the row's xmin, which an UPDATE changes), `json`
   * (UTF-8) is null for the keys the caller said it knows.
   */
  images: { key: string; json: Buffer | null }[];
}

/**
 * sessionImagesJson image by image, for a caller that keeps the images it rendered before (the session JSON cache):
 * those of `knownKeys` come back as keys only, so a session read again after one more image renders that one. The
 * new images' JSON comes back as one text value with each one's length in bytes. Undefined as sessionImagesJson.
 */
export async function sessionImagesJsonParts(
  sql: Sql,
  tenantId: string,
  sessionId: string,
  limit: number,
  urlPrefix: string,
  knownKeys: string[],
): Promise<SessionImagesJson | undefined> {
  // One statement, so one snapshot, as sessionImagesJson. Known rows join by hash.
  const [r] = await sql.unsafe(
    `WITH i AS (SELECT *, id || '.' || xmin AS row_key ${SESSION_IMAGES_FROM}),
    r AS (SELECT i.created_at, i.id, i.row_key, k.key IS NOT NULL AS known,
      CASE WHEN k.key IS NULL THEN ${SESSION_IMAGE_JSON} END AS json, CASE WHEN k.key IS NULL THEN ${SESSION_IMAGE_RAW_SAFE} END AS plain
      FROM i LEFT JOIN unnest($6::text[]) k(key) ON k.key = i.row_key)
    SELECT ${SESSION_VERSION}::text AS version,
      bool_and(known OR (plain AND json IS NOT NULL)) AS plain, array_agg(row_key ORDER BY created_at, id) AS keys,
      array_agg(COALESCE(octet_length(json), -1) ORDER BY created_at, id) AS lengths, string_agg(json, '' ORDER BY created_at, id) AS json
    FROM r`,
    [tenantId, sessionId, limit, PLAIN_KEY_SQL, jsonStringContent(urlPrefix), knownKeys],
  );
  if (r.plain === false) return undefined;
  // No images: no version kept ('0'; an empty session costs little to read again).
  if (r.keys === null) return { version: '0', images: [] };
  const json = Buffer.from((r.json as string | null) ?? '');
  const lengths = r.lengths as number[]; // -1: a known image (postgres.js parses a NULL in an int[] as NaN)
  let at = 0;
  const images = (r.keys as string[]).map((key, i) => {
    const length = lengths[i];
    if (length < 0) return { key, json: null };
    at += length;
    return { key, json: json.subarray(at - length, at) };
  });
  return { version: (r.version as string | null) ?? '0', images };
}
