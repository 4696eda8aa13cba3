import { randomUUID } from 'node:crypto';
import {
  badRequest,
  type Config,
  invalidPayload,
  type Logger,
  type ObjectStorage,
  type Sql,
  tenantKey,
  withSpanInTrace,
} from '@imagegen/platform';
import sharp, { type Metadata } from 'sharp';
import {
  adjustSessionCount,
  lockSession,
  MAX_IMAGES_PER_SESSION,
  newSessionId,
  sessionFullError,
  sessionImageCount,
  validateSessionId,
} from '../sessions/store.js';
import { writeImageStored } from './events.js';
import { claimKeys, OBJECT_GC_GRACE_MS, removeObjects, scheduleRemoval } from './object-gc.js';
import { IMAGE_COLUMNS, type ImageRow, rowFromDb } from './types.js';

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
}

export interface ProcessedImage {
  format: string;
  mimeType: string;
  ext: string;
  width: number;
  height: number;
  thumbnail: Buffer;
}

/** Reads the image header and renders the 200x200 thumbnail (EXIF-rotated, fit inside, never enlarged). */
export function processImage(data: Buffer): Promise<ProcessedImage> {
  return withSpanInTrace('image thumbnail', { attributes: { 'imagegen.image.bytes': data.length } }, async (span) => {
    const p = await decodeAndThumbnail(data);
    span?.setAttributes({ 'imagegen.image.format': p.format, 'imagegen.image.width': p.width, 'imagegen.image.height': p.height });
    return p;
  });
}

async function decodeAndThumbnail(data: Buffer): Promise<ProcessedImage> {
  let meta: Metadata;
  try {
    meta = await sharp(data).metadata();
  } catch {
    throw badRequest('Invalid image data', ['the data is not a decodable image']);
  }
  const fmt = FORMATS[meta.format ?? ''];
  if (!fmt) throw badRequest('Invalid image data', [`unsupported image format: ${meta.format ?? 'unknown'}`]);
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  if (!width || !height) throw badRequest('Invalid image data', ['the image has no dimensions']);
  let thumbnail: Buffer;
  try {
    thumbnail = await sharp(data)
      .rotate()
      .resize(THUMBNAIL_SIZE, THUMBNAIL_SIZE, { fit: 'inside', withoutEnlargement: true })
      .webp({ quality: 80, effort: 2 })
      .toBuffer();
  } catch {
    throw badRequest('Invalid image data', ['the image could not be decoded']);
  }
  return { format: meta.format as string, mimeType: fmt.mime, ext: fmt.ext, width, height, thumbnail };
}

function optionalId(v: number | null | undefined, field: string): number | null {
  if (v === null || v === undefined) return null;
  if (!Number.isSafeInteger(v) || v < 1) throw invalidPayload([`${field} must be a positive integer`]);
  return v;
}

/**
 * Stores an image: original + thumbnail in object storage under the tenant's prefix, then the row, the
 * session update and the ImageStored outbox event in one transaction. When the transaction fails the files
 * are removed again; when the process dies before it commits, the object sweeper removes them (the keys are
 * scheduled in object_gc before the files are written and claimed by the row's transaction).
 * With `pending`, the row goes to pending_images and no event is written: CommitExecutionImages (or the
 * execution's ExecutionFinished event) lists and bills it later, a failed execution discards it.
 * Throws 400 'Session image limit reached' when the session already holds 1,000 images.
 */
export async function storeImage(deps: StoreImageDeps, input: StoreImageInput): Promise<ImageRow> {
  const { sql, storage, config } = deps;
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
  const table = input.pending ? 'pending_images' : 'images';

  // Cheap pre-check so a full session costs no image work; the authoritative check is under the row lock.
  const count = await sessionImageCount(sql, tenantId, sessionId);
  if (count >= MAX_IMAGES_PER_SESSION) throw sessionFullError(sessionId, count);

  const img = await processImage(input.data);
  const name = randomUUID();
  const objectKey = tenantKey(tenantId, 'images', `${name}.${img.ext}`);
  const thumbnailKey = tenantKey(tenantId, 'thumbnails', `${name}.webp`);
  const keys = [objectKey, thumbnailKey];
  await scheduleRemoval(sql, keys, OBJECT_GC_GRACE_MS);
  await Promise.all([
    storage.put(objectKey, input.data, img.mimeType),
    storage.put(thumbnailKey, img.thumbnail, THUMBNAIL_MIME_TYPE),
  ]).catch(async (err) => {
    await removeObjects({ sql, storage, logger: deps.logger }, keys);
    throw err;
  });

  try {
    return await sql.begin(async (tx) => {
      const session = await lockSession(tx, tenantId, sessionId);
      if (session.imageCount >= MAX_IMAGES_PER_SESSION) throw sessionFullError(sessionId, session.imageCount);
      const negative = input.negativePrompt == null ? null : input.negativePrompt;
      // The row and the session count do not depend on each other: both go out in one write (pipelined
      // on the transaction's connection), executed in this order, so the lock order stays session row,
      // then tenant_stats (taken by the insert trigger) as in deleteImage.
      const [[r]] = await Promise.all([
        tx`
        INSERT INTO ${tx(table)} (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, thumbnail_mime_type,
          width, height, size_bytes, thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id,
          resolution_tier, parent_image_id, style_preset_id, product_reference_id, character_id, reference_group_ids,
          is_reference, execution_id, has_synthid, key_type, tokens)
        VALUES (${tenantId}, ${sessionId}, ${objectKey}, ${thumbnailKey}, ${img.mimeType}, ${img.format}, ${THUMBNAIL_MIME_TYPE},
          ${img.width}, ${img.height}, ${input.data.length}, ${img.thumbnail.length}, ${input.prompt ?? ''}, ${negative},
          ${input.operation}, ${input.aspectRatio ?? ''}, ${input.modelId ?? ''}, ${(input.resolutionTier ?? '').toLowerCase()},
          ${parentImageId}, ${stylePresetId}, ${productReferenceId}, ${characterId},
          ${referenceGroupIds === null ? null : `{${referenceGroupIds.join(',')}}`}::bigint[],
          ${input.isReference ?? false}, ${input.executionId || null}, ${input.hasSynthid ?? false},
          ${input.keyType || 'live'}, ${Math.max(0, Math.trunc(input.tokens ?? 0))})
        RETURNING ${tx.unsafe(IMAGE_COLUMNS)}`,
        adjustSessionCount(tx, tenantId, sessionId, 1),
        claimKeys(tx, keys),
      ]);
      const row = rowFromDb(r as Record<string, unknown>);
      if (!input.pending) await writeImageStored(tx, config.eventsPrefix, { ...row, imageId: row.id, tenantId, sessionId });
      return row;
    });
  } catch (err) {
    // The keys are still scheduled: remove the files now (or the sweeper will).
    await removeObjects({ sql, storage, logger: deps.logger }, keys);
    throw err;
  }
}
