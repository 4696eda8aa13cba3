import type { ImageRecord } from '@imagegen/contracts/library/v1/library';
import { isPlainKey, type ObjectStorage } from '@imagegen/platform';

/** One row of `library.images` (see migrations/001_images_sessions.sql for the column meanings). */
export interface ImageRow {
  id: number;
  tenantId: string;
  sessionId: string;
  objectKey: string;
  thumbnailKey: string;
  mimeType: string;
  format: string;
  thumbnailMimeType: string;
  width: number;
  height: number;
  sizeBytes: number;
  thumbnailSizeBytes: number;
  prompt: string;
  negativePrompt: string | null;
  operation: string;
  aspectRatio: string;
  modelId: string;
  resolutionTier: string;
  parentImageId: number | null;
  stylePresetId: number | null;
  productReferenceId: number | null;
  characterId: number | null;
  referenceGroupIds: number[] | null;
  isReference: boolean;
  executionId: string | null;
  hasSynthid: boolean;
  keyType: string;
  tokens: number;
  createdAt: Date;
  /** Content Credentials recorded at store time (migration 310): null state = no manifest. */
  credentialsState: string | null;
  credentialsIssuer: string | null;
}

/** Column list for SELECTs that feed rowFromDb (kept narrow and identical everywhere). */
export const IMAGE_COLUMNS = `id, tenant_id, session_id, object_key, thumbnail_key, mime_type, format, thumbnail_mime_type,
  width, height, size_bytes, thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id,
  resolution_tier, parent_image_id, style_preset_id, product_reference_id, character_id, reference_group_ids,
  is_reference, execution_id, has_synthid, key_type, tokens, created_at, credentials_state, credentials_issuer`;

/**
 * The select list of an image's list form (present.ts imageJson, field for field, in its order) for PostgreSQL to
 * render as JSON: URLs are `prefix` + key, publicUrl's form for plain keys (`prefix` is a placeholder, e.g. '$5').
 */
export const imageJsonSelect = (prefix: string) => `id, session_id AS "sessionId", ${prefix} || object_key AS "fullUrl",
  ${prefix} || thumbnail_key AS "thumbnailUrl", width, height, size_bytes AS "sizeBytes", prompt,
  negative_prompt AS "negativePrompt", operation, aspect_ratio AS "aspectRatio",
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt"`;

/**
 * One image's session detail form (present.ts sessionImageJson of toImageRecord: imageJson's fields, then the
 * session form's, in their order) as JSON text, for PostgreSQL to concatenate: `prefix` is the placeholder of the URL
 * prefix escaped for a JSON string (jsonStringContent). The user's text goes through to_json; keys and the
 * enumerated fields are written raw, so this is valid JSON only where sessionImageRawSafe holds (the caller checks it).
 * This form beats json_agg of a row per image (on PostgreSQL 15, row_to_json looks up each column's output function
 * for every row) only because the verdict is read from json_plain (migration 300), stored by the image's writer:
 * checked on every row, its regular expressions cost what the concatenation saves (the three forms A/B'd request by
 * request, docs/BENCHMARKS.md session 25).
 */
export const sessionImageJsonText = (prefix: string) => `'{"id":' || id || ',"sessionId":' || to_json(session_id)::text
  || ',"fullUrl":"' || ${prefix} || object_key || '","thumbnailUrl":"' || ${prefix} || thumbnail_key
  || '","width":' || width || ',"height":' || height || ',"sizeBytes":' || size_bytes || ',"prompt":' || to_json(prompt)::text
  || ',"negativePrompt":' || COALESCE(to_json(negative_prompt)::text, 'null') || ',"operation":"' || operation
  || '","aspectRatio":"' || aspect_ratio || '","createdAt":"' || to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  || '","modelId":"' || model_id || '","stylePresetId":' || COALESCE(style_preset_id::text, 'null')
  || ',"productReferenceId":' || COALESCE(product_reference_id::text, 'null')
  || ',"referenceGroupIds":' || COALESCE(array_to_json(reference_group_ids)::text, 'null')
  || ',"parent_image_id":' || COALESCE(parent_image_id::text, 'null')
  || ',"resolutionTier":' || COALESCE('"' || NULLIF(resolution_tier, '') || '"', 'null') || ',"format":"' || format
  || '","mimeType":"' || mime_type || '","isReference":' || is_reference || ',"thumbnailSizeBytes":' || thumbnail_size_bytes
  || ',"objectKey":"' || object_key || '","objectThumbnailKey":"' || thumbnail_key || '"}'`;

/** A string's content as it stands between the quotes of a JSON string. */
export const jsonStringContent = (s: string): string => JSON.stringify(s).slice(1, -1);

/** What the enumerated fields of a row may hold for sessionImageJsonText to write them raw: nothing JSON escapes. */
const RAW_FIELDS = '^[A-Za-z0-9._:/+ -]*$';
const RAW_FIELDS_RE = new RegExp(RAW_FIELDS);

/**
 * Whether sessionImageJsonText is the row's JSON: its keys are plain (so also its URLs) and its enumerated fields
 * hold nothing a JSON string must escape. A row it fails for is rendered from its record (the caller falls back).
 * The row's json_plain (migration 300) holds the verdict its writer reached (sessionJsonPlain); this check runs only
 * where it is NULL.
 */
export const sessionImageRawSafe = (plain: string) => `COALESCE(json_plain, ${sessionImageRawSafeCheck(plain)})`;

/** The check itself, over the row's columns (what json_plain holds once decided). */
export const sessionImageRawSafeCheck = (plain: string) =>
  `(${keysPlain(plain)} AND (operation || aspect_ratio || model_id || resolution_tier || format || mime_type) ~ '${RAW_FIELDS}')`;

/**
 * sessionImageRawSafe of a row about to be written, by the same patterns (isPlainKey is PLAIN_KEY_SQL's test, with
 * the key length on top: a stricter verdict only sends a session to the records' rendering).
 */
export function sessionJsonPlain(r: {
  objectKey: string;
  thumbnailKey: string;
  operation: string;
  aspectRatio: string;
  modelId: string;
  resolutionTier: string;
  format: string;
  mimeType: string;
}): boolean {
  return (
    isPlainKey(r.objectKey) &&
    isPlainKey(r.thumbnailKey) &&
    RAW_FIELDS_RE.test(r.operation + r.aspectRatio + r.modelId + r.resolutionTier + r.format + r.mimeType)
  );
}

/**
 * Whether a row's keys are plain, so that imageJsonSelect's URLs are the storage's (`plain` is the placeholder of
 * PLAIN_KEY_SQL; '..' is tested apart, as isPlainKey does).
 */
export const keysPlain = (plain: string) => `(object_key ~ ${plain} AND thumbnail_key ~ ${plain}
  AND strpos(object_key, '..') = 0 AND strpos(thumbnail_key, '..') = 0)`;

/** Aggregate of keysPlain over the rows: NULL over no rows. */
export const allKeysPlain = (plain: string) => `bool_and${keysPlain(plain)}`;

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export function rowFromDb(r: Record<string, unknown>): ImageRow {
  return {
    id: num(r.id),
    tenantId: r.tenant_id as string,
    sessionId: r.session_id as string,
    objectKey: r.object_key as string,
    thumbnailKey: r.thumbnail_key as string,
    mimeType: r.mime_type as string,
    format: r.format as string,
    thumbnailMimeType: r.thumbnail_mime_type as string,
    width: num(r.width),
    height: num(r.height),
    sizeBytes: num(r.size_bytes),
    thumbnailSizeBytes: num(r.thumbnail_size_bytes),
    prompt: r.prompt as string,
    negativePrompt: (r.negative_prompt as string | null) ?? null,
    operation: r.operation as string,
    aspectRatio: r.aspect_ratio as string,
    modelId: r.model_id as string,
    resolutionTier: r.resolution_tier as string,
    parentImageId: numOrNull(r.parent_image_id),
    stylePresetId: numOrNull(r.style_preset_id),
    productReferenceId: numOrNull(r.product_reference_id),
    characterId: numOrNull(r.character_id),
    referenceGroupIds: Array.isArray(r.reference_group_ids) ? (r.reference_group_ids as unknown[]).map(num) : null,
    isReference: Boolean(r.is_reference),
    executionId: (r.execution_id as string | null) ?? null,
    hasSynthid: Boolean(r.has_synthid),
    keyType: r.key_type as string,
    tokens: num(r.tokens ?? 0),
    createdAt: r.created_at as Date,
    credentialsState: (r.credentials_state as string | null) ?? null,
    credentialsIssuer: (r.credentials_issuer as string | null) ?? null,
  };
}

/** The wire form of a row; URLs come from the storage's public base. */
export function toImageRecord(row: ImageRow, storage: ObjectStorage): ImageRecord {
  return {
    id: row.id,
    tenantId: row.tenantId,
    sessionId: row.sessionId,
    objectKey: row.objectKey,
    thumbnailKey: row.thumbnailKey,
    fullUrl: storage.publicUrl(row.objectKey),
    thumbnailUrl: storage.publicUrl(row.thumbnailKey),
    width: row.width,
    height: row.height,
    sizeBytes: row.sizeBytes,
    thumbnailSizeBytes: row.thumbnailSizeBytes,
    format: row.format,
    mimeType: row.mimeType,
    prompt: row.prompt,
    negativePrompt: row.negativePrompt ?? undefined,
    operation: row.operation,
    aspectRatio: row.aspectRatio,
    modelId: row.modelId,
    resolutionTier: row.resolutionTier,
    parentImageId: row.parentImageId ?? undefined,
    stylePresetId: row.stylePresetId ?? undefined,
    productReferenceId: row.productReferenceId ?? undefined,
    characterId: row.characterId ?? undefined,
    referenceGroupIds: row.referenceGroupIds ?? [],
    hasReferenceGroupIds: row.referenceGroupIds !== null,
    isReference: row.isReference,
    executionId: row.executionId ?? '',
    hasSynthid: row.hasSynthid,
    keyType: row.keyType,
    createdAt: row.createdAt.toISOString(),
    thumbnailMimeType: row.thumbnailMimeType,
    credentialsState: row.credentialsState ?? undefined,
    credentialsIssuer: row.credentialsIssuer ?? undefined,
  };
}
