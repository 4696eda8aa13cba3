import { randomUUID } from 'node:crypto';
import {
  badRequest,
  type Config,
  invalidPayload,
  type Logger,
  type ObjectStorage,
  readPngHeader,
  type Sql,
  sniffFormat,
  type TransactionSql,
  tenantKey,
  withSpanInTrace,
} from '@imagegen/platform';
import sharp, { type Metadata } from 'sharp';
import {
  type ContentCredentials,
  type CredentialsSummary,
  IMPORTED_OPERATIONS,
  type IngredientAsset,
} from '../credentials/content-credentials.js';
import { MAX_IMAGES_PER_SESSION, newSessionId, sessionFullError, sessionImageCount, validateSessionId } from '../sessions/store.js';
import { writeImageStored } from './events.js';
import { OBJECT_GC_GRACE_MS, removeObjects, scheduleRemoval } from './object-gc.js';
import { discardPendingImage, rememberPendingImage } from './pending.js';
import { IMAGE_COLUMNS, type ImageRow, rowFromDb, sessionJsonPlain } from './types.js';

export const THUMBNAIL_SIZE = 200;
export const THUMBNAIL_MIME_TYPE = 'image/webp';

/** Formats kept as originals (SPEC 8: PNG, JPEG, WebP, GIF). SVG and friends are refused: /files serves them back. */
const FORMATS: Record<string, { mime: string; ext: string }> = {
  png: { mime: 'image/png', ext: 'png' },
  jpeg: { mime: 'image/jpeg', ext: 'jpg' },
  webp: { mime: 'image/webp', ext: 'webp' },
  gif: { mime: 'image/gif', ext: 'gif' },
};

export interface StoreImageDeps {
  sql: Sql;
  storage: ObjectStorage;
  config: Config;
  logger?: Logger;
  /** Signs provider output (every operation but the imports) and reads what imports carry: required, so no path skips it. */
  credentials: ContentCredentials;
}

export interface StoreImageInput {
  tenantId: string;
  /** 1-200 chars; a new id is generated when absent or empty. */
  sessionId?: string;
  data: Buffer;
  /** Informative only: the stored type is detected from the bytes. */
  mimeType?: string;
  prompt?: string;
  negativePrompt?: string | null;
  operation: string;
  aspectRatio?: string;
  modelId?: string;
  resolutionTier?: string;
  parentImageId?: number | null;
  stylePresetId?: number | null;
  productReferenceId?: number | null;
  characterId?: number | null;
  /** null/undefined: no reference groups (referenceGroupIds is null in the Image form). */
  referenceGroupIds?: number[] | null;
  isReference?: boolean;
  executionId?: string | null;
  hasSynthid?: boolean;
  keyType?: string;
  tokens?: number;
  /** Held back until its execution completes (pending_images): not listed, not billed, no ImageStored yet. */
  pending?: boolean;
  /** Storage keys (the tenant's) of the reference images sent upstream: componentOf ingredients of its credentials. */
  referenceObjectKeys?: string[];
  /** The tenant includes the prompt in its Content Credentials (off by default). */
  credentialsIncludePrompt?: boolean;
}

/** What the header of an accepted image says: its format, type, extension and (EXIF-oriented) dimensions. */
export interface ImageHeader {
  format: string;
  mimeType: string;
  ext: string;
  width: number;
  height: number;
}

export interface ProcessedImage extends ImageHeader {
  thumbnail: Buffer;
}

/** Reads the image header and renders the 200x200 thumbnail (EXIF-rotated, fit inside, never enlarged). */
export function processImage(data: Buffer): Promise<ProcessedImage> {
  return withSpanInTrace('image thumbnail', { attributes: { 'imagegen.image.bytes': data.length } }, async (span) => {
    const p = await decodeAndThumbnail(data);
    span?.setAttributes(headerAttributes(p));
    return p;
  });
}

/** The thumbnail of an image whose header was read already (its rendering perhaps started: startThumbnail), traced as processImage. */
function renderedThumbnail(data: Buffer, header: ImageHeader, started: Promise<Buffer> | undefined): Promise<Buffer> {
  const attributes = { 'imagegen.image.bytes': data.length, ...headerAttributes(header) };
  return withSpanInTrace('image thumbnail', { attributes }, () => thumbnailOf(data, started));
}

const headerAttributes = (h: ImageHeader) => ({
  'imagegen.image.format': h.format,
  'imagegen.image.width': h.width,
  'imagegen.image.height': h.height,
});

const renderThumbnail = (data: Buffer): Promise<Buffer> =>
  sharp(data)
    .rotate()
    .resize(THUMBNAIL_SIZE, THUMBNAIL_SIZE, { fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 80, effort: 2 })
    .toBuffer();

/**
 * The thumbnail's rendering, started at once when the first bytes announce an accepted format (it needs nothing from
 * the header: rotate() reads the orientation itself), so its wait does not start after the header's. Anything else
 * is rendered only once the header named an accepted format (thumbnailOf): no other libvips loader (SVG, PDF,
 * TIFF...) decodes its pixels.
 */
function startThumbnail(data: Buffer): Promise<Buffer> | undefined {
  if (!FORMATS[sniffFormat(data) ?? '']) return undefined;
  const rendering = renderThumbnail(data);
  rendering.catch(() => {}); // awaited by thumbnailOf, unless the header is refused first
  return rendering;
}

/** The thumbnail started early (startThumbnail), or rendered now; 400 when the pixels cannot be decoded. */
async function thumbnailOf(data: Buffer, started: Promise<Buffer> | undefined): Promise<Buffer> {
  try {
    return await (started ?? renderThumbnail(data));
  } catch {
    throw badRequest('Invalid image data', ['the image could not be decoded']);
  }
}

/** The header of an accepted image (400 otherwise). A sound PNG header is read here, without a thread-pool trip. */
async function readImageHeader(data: Buffer): Promise<ImageHeader> {
  const png = readPngHeader(data);
  let meta: Pick<Metadata, 'format' | 'width' | 'height' | 'autoOrient'>;
  try {
    meta = png ? { format: 'png', ...png, autoOrient: png } : await sharp(data).metadata();
  } catch {
    throw badRequest('Invalid image data', ['the data is not a decodable image']);
  }
  const fmt = FORMATS[meta.format ?? ''];
  if (!fmt) throw badRequest('Invalid image data', [`unsupported image format: ${meta.format ?? 'unknown'}`]);
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  if (!width || !height) throw badRequest('Invalid image data', ['the image has no dimensions']);
  return { format: meta.format as string, mimeType: fmt.mime, ext: fmt.ext, width, height };
}

async function decodeAndThumbnail(data: Buffer): Promise<ProcessedImage> {
  const rendering = startThumbnail(data);
  const header = await readImageHeader(data);
  return { ...header, thumbnail: await thumbnailOf(data, rendering) };
}

/**
 * Content Credentials (issue 39): provider output (every operation that is not an import) is signed here, the one
 * place it reaches storage, before anything reads its bytes (header, thumbnail, size); an edit names its parent (with
 * the parent's own manifest) as the parentOf ingredient and the reference images sent upstream as componentOf ones.
 * An import keeps its bytes, and what its own manifest says is recorded.
 */
async function withCredentials(
  deps: StoreImageDeps,
  input: StoreImageInput,
  parentImageId: number | null,
): Promise<{ data: Buffer; summary: CredentialsSummary }> {
  const mimeType = FORMATS[sniffFormat(input.data) ?? '']?.mime;
  if (!mimeType) return { data: input.data, summary: { present: false, validationState: null, issuer: null } }; // refused below
  if (IMPORTED_OPERATIONS.has(input.operation)) {
    const { manifestStore: _, ...summary } = await deps.credentials.read(input.data, mimeType).catch((err) => {
      deps.logger?.warn({ err }, 'could not read the Content Credentials of an imported image; recorded as none');
      return { present: false, validationState: null, issuer: null, manifestStore: null };
    });
    return { data: input.data, summary };
  }
  if (!deps.credentials.signing) return { data: input.data, summary: { present: false, validationState: null, issuer: null } };
  const [parent, references] = await Promise.all([
    parentImageId === null ? undefined : ingredientOfImage(deps, input.tenantId, parentImageId),
    Promise.all((input.referenceObjectKeys ?? []).map((key, i) => ingredientOfObject(deps, input.tenantId, key, `reference ${i + 1}`))),
  ]);
  return withSpanInTrace('image credentials', { attributes: { 'imagegen.image.bytes': input.data.length } }, () =>
    deps.credentials.sign({
      data: input.data,
      mimeType,
      operation: input.operation,
      modelId: input.modelId ?? '',
      prompt: input.credentialsIncludePrompt ? input.prompt : undefined,
      parent,
      references: references.filter((r): r is IngredientAsset => r !== undefined),
    }),
  );
}

/** The stored original of the tenant's image `id` (an edit's parent), as an ingredient. */
async function ingredientOfImage(deps: StoreImageDeps, tenantId: string, id: number): Promise<IngredientAsset> {
  const [row] = await deps.sql`SELECT object_key, mime_type FROM images WHERE tenant_id = ${tenantId} AND id = ${id}`;
  if (!row) throw badRequest('Invalid request payload', [`parent image ${id} not found`]);
  return { data: await deps.storage.get(row.object_key as string), mimeType: row.mime_type as string, title: `image ${id}` };
}

/** A reference image under the tenant's own prefix (others are refused), as an ingredient. */
async function ingredientOfObject(
  deps: StoreImageDeps,
  tenantId: string,
  key: string,
  title: string,
): Promise<IngredientAsset | undefined> {
  const prefix = `tenants/${tenantId}/`;
  if (!key.startsWith(prefix) || tenantKey(tenantId, key.slice(prefix.length)) !== key) {
    throw badRequest('Invalid request payload', ["reference_object_keys must be keys of the tenant's own objects"]);
  }
  const data = await deps.storage.get(key);
  const mimeType = FORMATS[sniffFormat(data) ?? '']?.mime;
  if (!mimeType) return undefined; // nothing c2pa can name as an ingredient (never a reference the provider accepted)
  return { data, mimeType, title };
}

/** What the row records of the credentials: null when none (a GET answers present:false). */
const credentialsState = (c: CredentialsSummary): string | null => (c.present ? (c.validationState ?? 'Unknown') : null);

function optionalId(v: number | null | undefined, field: string): number | null {
  if (v === null || v === undefined) return null;
  if (!Number.isSafeInteger(v) || v < 1) throw invalidPayload([`${field} must be a positive integer`]);
  return v;
}

/**
 * Stores an image: original + thumbnail in object storage under the tenant's prefix, then the row, the
 * session update and the ImageStored outbox event in one transaction. When it fails the files are removed
 * again; when the process dies before it commits, the object sweeper removes them (the keys are scheduled in
 * object_gc before the files are written and claimed by the row's statement).
 * With `pending`, the row goes to pending_images (one statement, no event) before the files are written (see
 * storePendingRow): CommitExecutionImages (or the execution's ExecutionFinished event) lists and bills it
 * later, a failed execution discards it.
 * Throws 400 'Session image limit reached' when the session already holds 1,000 images.
 */
export async function storeImage(deps: StoreImageDeps, inputGiven: StoreImageInput): Promise<ImageRow> {
  const { sql, storage, config } = deps;
  let input = inputGiven;
  const tenantId = input.tenantId;
  if (!tenantId) throw badRequest('Tenant is required');
  const sessionId = input.sessionId ? validateSessionId(input.sessionId) : newSessionId();
  if (!input.data || input.data.length === 0) throw badRequest('Invalid image data', ['data is empty']);
  if (!input.operation) throw invalidPayload(['operation is required']);
  const referenceGroupIds =
    input.referenceGroupIds == null ? null : input.referenceGroupIds.map((id) => optionalId(id, 'reference_group_ids') as number);
  const parentImageId = optionalId(input.parentImageId, 'parent_image_id');
  const stylePresetId = optionalId(input.stylePresetId, 'style_preset_id');
  const productReferenceId = optionalId(input.productReferenceId, 'product_reference_id');
  const characterId = optionalId(input.characterId, 'character_id');
  if (input.pending && !input.executionId) throw invalidPayload(['execution_id is required for a pending image']);
  const credentialed = await withCredentials(deps, input, parentImageId);
  input = { ...input, data: credentialed.data };
  const credentials = credentialed.summary;

  const name = randomUUID();
  const keysFor = (ext: string) => [tenantKey(tenantId, 'images', `${name}.${ext}`), tenantKey(tenantId, 'thumbnails', `${name}.webp`)];
  const rowOf = ([objectKey, thumbnailKey]: string[], img: ImageHeader, thumbnailSize: number | null): StoreRow => ({
    tenantId,
    sessionId,
    objectKey,
    thumbnailKey,
    img,
    thumbnailSize,
    size: input.data.length,
    input,
    referenceGroupIds,
    parentImageId,
    stylePresetId,
    productReferenceId,
    characterId,
    credentials,
  });
  if (input.pending) {
    const rendering = startThumbnail(input.data);
    const header = await readImageHeader(input.data);
    const thumbnail = renderedThumbnail(input.data, header, rendering);
    thumbnail.catch(() => {}); // awaited by storePending, unless the session is full
    return storePending(deps, rowOf(keysFor(header.ext), header, null), input.data, thumbnail);
  }

  // A listed image. The format the first bytes announce names the keys before any image work, so the cheap session
  // pre-check and the scheduling of the keys are one statement (bytes no accepted format announces: sharp's answer first).
  const announced = FORMATS[sniffFormat(input.data) ?? ''];
  let keys: string[] | undefined;
  let img: ProcessedImage;
  /** The original's write, started while libvips renders the thumbnail (under the announced format's key). */
  let originalWrite: Promise<void> | undefined;
  if (announced) {
    keys = keysFor(announced.ext);
    // The image work (libvips threads) runs while the main thread does the session check and writes the
    // original: a full session wastes one thumbnail, every other store saves those round trips of latency.
    const processing = processImage(input.data);
    processing.catch(() => {}); // awaited below, unless the session check throws first
    const count = await scheduleUnlessFull(sql, tenantId, sessionId, keys);
    if (count >= MAX_IMAGES_PER_SESSION) throw sessionFullError(sessionId, count);
    // Fresh keys (a new uuid): no stale sidecar to look for, nothing names them before the row.
    originalWrite = storage.put(keys[0], input.data, announced.mime, { fresh: true });
    originalWrite.catch(() => {}); // awaited below
    try {
      img = await processing;
    } catch (err) {
      await removeWritten(deps, keys, originalWrite);
      throw err;
    }
  } else {
    const count = await sessionImageCount(sql, tenantId, sessionId);
    if (count >= MAX_IMAGES_PER_SESSION) throw sessionFullError(sessionId, count);
    img = await processImage(input.data);
  }

  if (!keys || img.ext !== announced?.ext) {
    // sharp disagrees with the first bytes (or they announced nothing): keys under sharp's format. Keys
    // scheduled under another extension lose their file now (or the sweeper drops their entries).
    if (keys && originalWrite) await removeWritten(deps, keys, originalWrite);
    originalWrite = undefined;
    keys = keysFor(img.ext);
    await scheduleRemoval(sql, keys, OBJECT_GC_GRACE_MS);
  }
  const row = rowOf(keys, img, img.thumbnail.length);
  await writeImageFiles(storage, row, input.data, img.thumbnail, originalWrite).catch(async (err) => {
    await removeObjects(deps, [row.objectKey, row.thumbnailKey]);
    throw err;
  });
  try {
    // A listed image: the row, the session update and its ImageStored event in one transaction, once its files exist.
    const stored = await sql.begin(async (tx) => {
      const r = await insertImage(tx, 'images', row);
      if (r) await writeImageStored(tx, config.eventsPrefix, { ...r, imageId: r.id, tenantId, sessionId });
      return r;
    });
    if (!stored) throw await sessionFull(sql, tenantId, sessionId);
    return stored;
  } catch (err) {
    // The keys are still scheduled: remove the files now (or the sweeper will).
    await removeObjects(deps, keys);
    throw err;
  }
}

/**
 * A pending image: its row goes in first (one statement, no event; the session's room checked under its lock), while
 * libvips renders the thumbnail, then its two files (the original's while the rendering goes on). The row is the
 * record of its keys: a pending row that is never committed is discarded with its files (here when the rendering or
 * a write fails; with its failed or abandoned execution; or as stale), so no object_gc entry is needed and a crash at
 * any point leaves nothing behind. Nothing reads a pending row's files before its execution commits it, and the
 * execution commits only the images whose store answered, after their files.
 * The row does not wait for the image work, so it holds no thumbnail size (NULL, migration 290): the answer does,
 * and so does what this process keeps for the commit (rememberPendingImage); a commit made elsewhere reads it off the
 * thumbnail object (commitExecutionImages).
 */
async function storePending(deps: StoreImageDeps, row: StoreRow, data: Buffer, rendering: Promise<Buffer>): Promise<ImageRow> {
  // A full session drops the thumbnail rendering meanwhile.
  const stored = await insertImage(deps.sql, 'pending_images', row);
  if (!stored) throw await sessionFull(deps.sql, row.tenantId, row.sessionId);
  const originalWrite = deps.storage.put(row.objectKey, data, row.img.mimeType, { fresh: true });
  originalWrite.catch(() => {}); // awaited below, before any cleanup
  let thumbnail: Buffer;
  try {
    thumbnail = await rendering;
    await writeImageFiles(deps.storage, row, data, thumbnail, originalWrite);
  } catch (err) {
    await originalWrite.catch(() => {}); // settled before its file is removed
    await discardPendingImage(deps, row.tenantId, stored.id).catch((e) => {
      deps.logger?.warn({ err: e, imageId: stored.id }, 'could not discard a pending image whose store failed; its execution will');
    });
    throw err;
  }
  const image: ImageRow = { ...stored, thumbnailSizeBytes: thumbnail.length };
  rememberPendingImage(image); // its commit writes ImageStored and the thumbnail's size in the statement that moves it
  return image;
}

/**
 * Writes the original (unless its write is already in flight) and the thumbnail under the row's fresh keys. Both
 * settle before a failure is answered, so the caller's cleanup never runs while one is still being written.
 */
async function writeImageFiles(
  storage: ObjectStorage,
  row: StoreRow,
  data: Buffer,
  thumbnail: Buffer,
  originalWrite?: Promise<void>,
): Promise<void> {
  const settled = await Promise.allSettled([
    originalWrite ?? storage.put(row.objectKey, data, row.img.mimeType, { fresh: true }),
    storage.put(row.thumbnailKey, thumbnail, THUMBNAIL_MIME_TYPE, { fresh: true }),
  ]);
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/** The 400 of a full session, with its current count (at least the limit: the statement found no room). */
async function sessionFull(sql: Sql, tenantId: string, sessionId: string) {
  const count = await sessionImageCount(sql, tenantId, sessionId);
  return sessionFullError(sessionId, Math.max(count, MAX_IMAGES_PER_SESSION));
}

/** Removes the files of `keys` once the original's write in flight (if any) has ended, so none is left behind. */
async function removeWritten(deps: Parameters<typeof removeObjects>[0], keys: string[], inFlight?: Promise<void>): Promise<void> {
  await inFlight?.catch(() => {});
  await removeObjects(deps, keys);
}

/**
 * The cheap pre-check (a full session costs no image work) and the scheduling of the keys, in one statement:
 * the keys are scheduled only when the session has room. Answers the session's image count.
 */
async function scheduleUnlessFull(sql: Sql, tenantId: string, sessionId: string, keys: string[]): Promise<number> {
  const [r] = await sql`
    WITH s AS (SELECT image_count FROM sessions WHERE tenant_id = ${tenantId} AND session_id = ${sessionId}),
    gc AS (
      INSERT INTO object_gc (object_key, due_at)
      SELECT k, now() + ${`${OBJECT_GC_GRACE_MS} milliseconds`}::interval FROM unnest(${keys}::text[]) AS k
      WHERE COALESCE((SELECT image_count FROM s), 0) < ${MAX_IMAGES_PER_SESSION}
      ON CONFLICT (object_key) DO UPDATE SET due_at = LEAST(object_gc.due_at, excluded.due_at)
    )
    SELECT COALESCE((SELECT image_count FROM s), 0)::int AS n`;
  return Number(r.n);
}

interface StoreRow {
  tenantId: string;
  sessionId: string;
  objectKey: string;
  thumbnailKey: string;
  img: ImageHeader;
  /** null: not known yet (a pending row written while its thumbnail renders). */
  thumbnailSize: number | null;
  size: number;
  input: StoreImageInput;
  referenceGroupIds: number[] | null;
  parentImageId: number | null;
  stylePresetId: number | null;
  productReferenceId: number | null;
  characterId: number | null;
  credentials: CredentialsSummary;
}

/**
 * One statement: counts the image into its session (creating the session, taking its row lock) only while
 * the session has room, inserts the row, and claims the keys. Nothing is written when the session is full
 * (undefined). Lock order as in deleteImage: the session row first, then tenant_stats (the images insert
 * trigger runs at the end of the statement).
 */
async function insertImage(db: Sql | TransactionSql, table: 'images' | 'pending_images', x: StoreRow): Promise<ImageRow | undefined> {
  const { input, img } = x;
  const aspectRatio = input.aspectRatio ?? '';
  const modelId = input.modelId ?? '';
  const resolutionTier = (input.resolutionTier ?? '').toLowerCase();
  const jsonPlain = sessionJsonPlain({ ...x, ...img, operation: input.operation, aspectRatio, modelId, resolutionTier });
  const [r] = await db`
    WITH s AS (
      INSERT INTO sessions AS s (tenant_id, session_id, image_count, is_active) VALUES (${x.tenantId}, ${x.sessionId}, 1, true)
      ON CONFLICT (tenant_id, session_id) DO UPDATE SET image_count = s.image_count + 1,
        is_active = s.image_count + 1 < ${MAX_IMAGES_PER_SESSION}, last_activity_at = now()
        WHERE s.image_count < ${MAX_IMAGES_PER_SESSION}
      RETURNING 1
    ), ins AS (
      INSERT INTO ${db(table)} (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, thumbnail_mime_type,
        width, height, size_bytes, thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id,
        resolution_tier, parent_image_id, style_preset_id, product_reference_id, character_id, reference_group_ids,
        is_reference, execution_id, has_synthid, key_type, tokens, json_plain, credentials_state, credentials_issuer)
      SELECT ${x.tenantId}::text, ${x.sessionId}::text, ${x.objectKey}::text, ${x.thumbnailKey}::text, ${img.mimeType}::text,
        ${img.format}::text, ${THUMBNAIL_MIME_TYPE}::text, ${img.width}::int, ${img.height}::int, ${x.size}::bigint,
        ${x.thumbnailSize}::bigint, ${input.prompt ?? ''}::text, ${input.negativePrompt ?? null}::text, ${input.operation}::text,
        ${aspectRatio}::text, ${modelId}::text, ${resolutionTier}::text,
        ${x.parentImageId}::bigint, ${x.stylePresetId}::bigint, ${x.productReferenceId}::bigint, ${x.characterId}::bigint,
        ${x.referenceGroupIds === null ? null : `{${x.referenceGroupIds.join(',')}}`}::bigint[],
        ${input.isReference ?? false}::boolean, ${input.executionId || null}::text, ${input.hasSynthid ?? false}::boolean,
        ${input.keyType || 'live'}::text, ${Math.max(0, Math.trunc(input.tokens ?? 0))}::bigint, ${jsonPlain}::boolean,
        ${credentialsState(x.credentials)}::text, ${x.credentials.issuer}::text
      FROM s
      RETURNING ${db.unsafe(IMAGE_COLUMNS)}
    ), claimed AS (
      DELETE FROM object_gc WHERE object_key = ANY(${[x.objectKey, x.thumbnailKey]}::text[]) AND EXISTS (SELECT 1 FROM ins)
    )
    SELECT * FROM ins`;
  return r ? rowFromDb(r as Record<string, unknown>) : undefined;
}
