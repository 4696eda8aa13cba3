import { invalidPayload, MODEL_IDS, PLAIN_KEY_SQL, type Sql } from '@imagegen/platform';
import { IMAGE_COLUMNS, type ImageRow, rowFromDb } from './types.js';

/**
 * The gallery query, shared by GET /api/images and search presets (assets code): filters are the
 * SPEC 4.1 list parameters and the SPEC 4.6 preset keys, plus sortBy. Every query is tenant-scoped.
 */
export interface ImageListFilters {
  search?: string;
  /** exact (default): the phrase appears in the prompt; all: every word; any: at least one word. Case-insensitive. */
  searchMode?: 'exact' | 'all' | 'any';
  /** ISO 8601 date or date-time; inclusive. */
  dateFrom?: string;
  /** ISO 8601 date (the whole day is included) or date-time (inclusive). */
  dateTo?: string;
  aspectRatio?: string;
  operationType?: string;
  minSize?: number;
  maxSize?: number;
  sessionId?: string;
  /** true: only images with a negative prompt; false: only images without one. */
  hasNegativePrompt?: boolean;
  modelId?: string;
  /** 1k, 2k, 4k (0.5k too); a comma-separated string or an array. */
  resolutionTier?: string | string[];
  stylePresetId?: number;
  productReferenceId?: number;
  /** true: reference images only; false: non-reference images only. */
  isReference?: boolean;
  sortBy?: ImageSort;
}

export type ImageSort = 'newest' | 'oldest' | 'largest' | 'smallest';

export const SEARCH_MODES = ['exact', 'all', 'any'] as const;
export const SORTS: ImageSort[] = ['newest', 'oldest', 'largest', 'smallest'];
export const RESOLUTION_TIERS = ['0.5k', '1k', '2k', '4k'];
export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
export const MAX_SEARCH_LENGTH = 200;

const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/;

/** Normalized filters with the dates resolved to instants (dateTo exclusive when it was a plain date). */
export interface NormalizedFilters {
  search?: string;
  searchMode: 'exact' | 'all' | 'any';
  from?: Date;
  to?: Date;
  toExclusive: boolean;
  aspectRatio?: string;
  operationType?: string;
  minSize?: number;
  maxSize?: number;
  sessionId?: string;
  hasNegativePrompt?: boolean;
  modelId?: string;
  resolutionTiers?: string[];
  stylePresetId?: number;
  productReferenceId?: number;
  isReference?: boolean;
  sortBy: ImageSort;
}

/** The YYYY-MM-DD part names a day of the calendar (Date would roll 2025-02-30 over to March 2). */
const realDay = (day: string) => {
  const d = new Date(`${day}T00:00:00.000Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === day;
};

function parseDate(v: unknown, name: string, errors: string[]): { at?: Date; dateOnly: boolean } {
  if (v === undefined || v === null || v === '') return { dateOnly: false };
  if (typeof v !== 'string' || !(ISO_DATE.test(v) || ISO_DATE_TIME.test(v)) || Number.isNaN(Date.parse(v)) || !realDay(v.slice(0, 10))) {
    errors.push(`${name} must be an ISO 8601 date`);
    return { dateOnly: false };
  }
  return { at: new Date(ISO_DATE.test(v) ? `${v}T00:00:00.000Z` : v), dateOnly: ISO_DATE.test(v) };
}

const isBlank = (v: unknown) => v === undefined || v === null || v === '';

// Field checks of normalizeFilters; each records its problem in `errors`.
function str(errors: string[], v: unknown, name: string, max = 200): string | undefined {
  if (isBlank(v)) return undefined;
  if (typeof v !== 'string') {
    errors.push(`${name} must be a string`);
    return undefined;
  }
  if (v.length > max) errors.push(`${name} must be at most ${max} characters`);
  return v;
}
function int(errors: string[], v: unknown, name: string): number | undefined {
  if (isBlank(v)) return undefined;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) {
    errors.push(`${name} must be a positive integer`);
    return undefined;
  }
  return n;
}
function size(errors: string[], v: unknown, name: string): number | undefined {
  if (isBlank(v)) return undefined;
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) {
    errors.push(`${name} must be a non-negative number`);
    return undefined;
  }
  return n;
}
function bool(errors: string[], v: unknown, name: string): boolean | undefined {
  if (isBlank(v)) return undefined;
  if (v === true || v === 'true') return true;
  if (v === false || v === 'false') return false;
  errors.push(`${name} must be a boolean`);
  return undefined;
}
function oneOf<T extends string>(errors: string[], v: unknown, name: string, allowed: readonly T[]): T | undefined {
  if (isBlank(v)) return undefined;
  if (typeof v !== 'string' || !allowed.includes(v as T)) {
    errors.push(`${name} must be one of: ${allowed.join(', ')}`);
    return undefined;
  }
  return v as T;
}

/**
 * Validates filters (from a query string already typed by the gateway, a search preset, or an MCP tool).
 * Returns problems as 'Invalid request payload' details; throws nothing.
 */
export function normalizeFilters(f: ImageListFilters): { filters: NormalizedFilters; errors: string[] } {
  const errors: string[] = [];
  const out: NormalizedFilters = { searchMode: 'exact', toExclusive: false, sortBy: 'newest' };
  const search = str(errors, f.search, 'search', MAX_SEARCH_LENGTH);
  if (search !== undefined && search.trim() !== '') out.search = search.trim();
  out.searchMode = oneOf(errors, f.searchMode, 'searchMode', SEARCH_MODES) ?? 'exact';
  const from = parseDate(f.dateFrom, 'dateFrom', errors);
  const to = parseDate(f.dateTo, 'dateTo', errors);
  out.from = from.at;
  if (to.at) {
    // Timestamps travel with millisecond precision while the column has microseconds: a date-time bound
    // covers its whole millisecond, a plain date its whole day.
    out.to = new Date(to.at.getTime() + (to.dateOnly ? 86_400_000 : 1));
    out.toExclusive = true;
  }
  if (out.from && to.at && out.from.getTime() > to.at.getTime()) errors.push('dateFrom must not be after dateTo');
  out.aspectRatio = str(errors, f.aspectRatio, 'aspectRatio', 20);
  out.operationType = str(errors, f.operationType, 'operationType', 50);
  out.minSize = size(errors, f.minSize, 'minSize');
  out.maxSize = size(errors, f.maxSize, 'maxSize');
  if (out.minSize !== undefined && out.maxSize !== undefined && out.minSize > out.maxSize) {
    errors.push('minSize must not be greater than maxSize');
  }
  out.sessionId = str(errors, f.sessionId, 'sessionId', 200);
  out.hasNegativePrompt = bool(errors, f.hasNegativePrompt, 'hasNegativePrompt');
  out.modelId = oneOf(errors, f.modelId, 'modelId', MODEL_IDS);
  if (!isBlank(f.resolutionTier)) {
    const raw = Array.isArray(f.resolutionTier) ? f.resolutionTier.join(',') : f.resolutionTier;
    if (typeof raw !== 'string') errors.push('resolutionTier must be a string');
    else {
      const tiers = raw
        .split(',')
        .map((t) => t.trim().toLowerCase())
        .filter(Boolean);
      const bad = tiers.filter((t) => !RESOLUTION_TIERS.includes(t));
      if (bad.length > 0 || tiers.length === 0) {
        errors.push(`resolutionTier must be a comma-separated list of: ${RESOLUTION_TIERS.join(', ')}`);
      } else out.resolutionTiers = [...new Set(tiers)];
    }
  }
  out.stylePresetId = int(errors, f.stylePresetId, 'stylePresetId');
  out.productReferenceId = int(errors, f.productReferenceId, 'productReferenceId');
  out.isReference = bool(errors, f.isReference, 'isReference');
  out.sortBy = oneOf(errors, f.sortBy, 'sortBy', SORTS) ?? 'newest';
  return { filters: out, errors };
}

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * Query text with `$n` placeholders and its values. The gallery queries are built as text and run with
 * `sql.unsafe(text, values, { prepare: true })`: composing them from postgres.js fragments cost ~15% of the
 * CPU of a whole GET /api/images request (issue 4 benchmark). Only constant SQL is concatenated; every value
 * is a parameter.
 */
class QueryParams {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** `WHERE ...`: the tenant (always $1) plus every given filter. */
function imageWhere(p: QueryParams, tenantId: string, f: NormalizedFilters): string {
  const c: string[] = [`tenant_id = ${p.add(tenantId)}`];
  if (f.search) {
    if (f.searchMode === 'exact') c.push(`prompt ILIKE ${p.add(likePattern(f.search))}`);
    else {
      const words = [...new Set(f.search.split(/\s+/).filter(Boolean))].slice(0, 20);
      if (words.length > 0) {
        const w = words.map((word) => `prompt ILIKE ${p.add(likePattern(word))}`);
        c.push(`(${w.join(f.searchMode === 'all' ? ' AND ' : ' OR ')})`);
      }
    }
  }
  if (f.from) c.push(`created_at >= ${p.add(f.from)}`);
  if (f.to) c.push(f.toExclusive ? `created_at < ${p.add(f.to)}` : `created_at <= ${p.add(f.to)}`);
  if (f.aspectRatio) c.push(`aspect_ratio = ${p.add(f.aspectRatio)}`);
  if (f.operationType) c.push(`operation = ${p.add(f.operationType)}`);
  if (f.minSize !== undefined) c.push(`size_bytes >= ${p.add(f.minSize)}`);
  if (f.maxSize !== undefined) c.push(`size_bytes <= ${p.add(f.maxSize)}`);
  if (f.sessionId) c.push(`session_id = ${p.add(f.sessionId)}`);
  if (f.hasNegativePrompt === true) c.push(`negative_prompt IS NOT NULL AND negative_prompt <> ''`);
  if (f.hasNegativePrompt === false) c.push(`(negative_prompt IS NULL OR negative_prompt = '')`);
  if (f.modelId) c.push(`model_id = ${p.add(f.modelId)}`);
  if (f.resolutionTiers?.length) c.push(`resolution_tier = ANY(${p.add(f.resolutionTiers)}::text[])`);
  if (f.stylePresetId !== undefined) c.push(`style_preset_id = ${p.add(f.stylePresetId)}`);
  if (f.productReferenceId !== undefined) c.push(`product_reference_id = ${p.add(f.productReferenceId)}`);
  if (f.isReference !== undefined) c.push(`is_reference = ${p.add(f.isReference)}`);
  return `WHERE ${c.join(' AND ')}`;
}

const ORDER_BY: Record<ImageSort, string> = {
  newest: 'ORDER BY created_at DESC, id DESC',
  oldest: 'ORDER BY created_at ASC, id ASC',
  largest: 'ORDER BY size_bytes DESC, id DESC',
  smallest: 'ORDER BY size_bytes ASC, id ASC',
};

/** True when no filter narrows the tenant's images (sorting does not count). */
export function isUnfiltered(f: NormalizedFilters): boolean {
  for (const k in f) {
    if (k !== 'searchMode' && k !== 'sortBy' && k !== 'toExclusive' && f[k as keyof NormalizedFilters] !== undefined) return false;
  }
  return true;
}

export function clampPage(limit?: number, offset?: number): { limit: number; offset: number } {
  const l = !limit || limit < 1 ? DEFAULT_LIMIT : Math.min(Math.trunc(limit), MAX_LIMIT);
  const o = !offset || offset < 0 ? 0 : Math.trunc(offset);
  return { limit: l, offset: o };
}

interface PageQuery {
  filters: NormalizedFilters;
  params: QueryParams;
  /** `FROM images WHERE ... ORDER BY ... LIMIT ... OFFSET ...` */
  from: string;
  order: string;
  /** The total matching count as a scalar subquery. */
  total: string;
  limit: number;
  offset: number;
}

/** Validated filters and paging as SQL text; throws 400 'Invalid request payload' with details. */
function pageQuery(tenantId: string, filters: ImageListFilters, page: { limit?: number; offset?: number }): PageQuery {
  const { filters: f, errors } = normalizeFilters(filters);
  if (errors.length > 0) throw invalidPayload(errors);
  const { limit, offset } = clampPage(page.limit, page.offset);
  const params = new QueryParams();
  const where = imageWhere(params, tenantId, f);
  const order = ORDER_BY[f.sortBy];
  // Unfiltered (the common gallery view): the total is the tenant's counter row ($1 is the tenant), not a count.
  const total = isUnfiltered(f)
    ? 'COALESCE((SELECT image_count FROM tenant_stats WHERE tenant_id = $1), 0)::int'
    : `(SELECT count(*)::int FROM images ${where})`;
  const from = `FROM images ${where} ${order} LIMIT ${params.add(limit)} OFFSET ${params.add(offset)}`;
  return { filters: f, params, from, order, total, limit, offset };
}

/**
 * One page of a tenant's images plus the total matching count, in one round trip.
 * Throws 400 'Invalid request payload' with details when a filter is invalid.
 *
 * The page travels as one json_agg value (one JSON.parse) rather than ~30 columns x `limit` rows
 * parsed one by one by the driver: the gallery's hot path (issue 4 benchmark) spends most of its
 * library time there. JSON keeps every value exact (bigints stay below 2^53; created_at is an ISO
 * timestamp with its offset, parsed to the same Date as the driver's parser would).
 */
export async function listImages(
  sql: Sql,
  tenantId: string,
  filters: ImageListFilters,
  page: { limit?: number; offset?: number } = {},
): Promise<{ rows: ImageRow[]; total: number; limit: number; offset: number }> {
  const q = pageQuery(tenantId, filters, page);
  const [r] = await sql.unsafe(
    `WITH page AS (SELECT ${IMAGE_COLUMNS} ${q.from})
    SELECT ${q.total} AS total, json_agg(page ${q.order})::text AS page FROM page`,
    q.params.values as never[],
    { prepare: true },
  );
  const list: Record<string, unknown>[] = r?.page ? JSON.parse(r.page as string) : [];
  const images = list.map((row) => {
    row.created_at = new Date(row.created_at as string);
    return rowFromDb(row);
  });
  return { rows: images, total: Number(r?.total ?? 0), limit: q.limit, offset: q.offset };
}

/**
 * The same page already in its public JSON form (SPEC 2 image list item: present.ts imageJson), built by
 * PostgreSQL as one text value that is passed on without being parsed: the gallery's hot path. URLs are
 * `urlPrefix` + key (ObjectStorage.plainKeyUrlPrefix), valid for plain keys (isPlainKey); `json` is
 * undefined when a key on the page is not plain (the caller renders that page from rows instead), which
 * no key the services make is. createdAt has millisecond precision in UTC, like Date.toISOString.
 * One aggregate over the page (not a subquery per column), and each item a row with aliased columns rather
 * than json_build_object: each cut PostgreSQL's time per call by about a quarter.
 */
export async function listImagesJson(
  sql: Sql,
  tenantId: string,
  filters: ImageListFilters,
  page: { limit?: number; offset?: number },
  urlPrefix: string,
): Promise<{ json?: string; total: number; limit: number; offset: number }> {
  const q = pageQuery(tenantId, filters, page);
  const prefix = q.params.add(urlPrefix);
  const plainKey = q.params.add(PLAIN_KEY_SQL);
  const [r] = await sql.unsafe(
    `WITH page AS (
      SELECT id, session_id, object_key, thumbnail_key, width, height, size_bytes, prompt, negative_prompt, operation,
        aspect_ratio, created_at
      ${q.from}
    )
    SELECT ${q.total} AS total,
      bool_and(object_key ~ ${plainKey} AND thumbnail_key ~ ${plainKey}
        AND strpos(object_key, '..') = 0 AND strpos(thumbnail_key, '..') = 0) AS plain,
      COALESCE(json_agg((
        SELECT r FROM (SELECT id, session_id AS "sessionId", ${prefix} || object_key AS "fullUrl",
          ${prefix} || thumbnail_key AS "thumbnailUrl", width, height, size_bytes AS "sizeBytes", prompt,
          negative_prompt AS "negativePrompt", operation, aspect_ratio AS "aspectRatio",
          to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt") r
      ) ${q.order}), '[]')::text AS page
    FROM page`,
    q.params.values as never[],
    { prepare: true },
  );
  const plain = r?.plain !== false;
  return { json: plain ? (r?.page as string) : undefined, total: Number(r?.total ?? 0), limit: q.limit, offset: q.offset };
}
