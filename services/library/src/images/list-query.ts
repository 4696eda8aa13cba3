import { invalidPayload, type Sql } from '@imagegen/platform';
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
export const MODEL_IDS = [
  'provA-flash-lite-image',
  'provA-flash-image',
  'provA-pro-image',
  'provB-image-2',
  'provB-image-2.5-flare',
  'provB-image-2.5-sunburst',
];
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

function parseDate(v: unknown, name: string, errors: string[]): { at?: Date; dateOnly: boolean } {
  if (v === undefined || v === null || v === '') return { dateOnly: false };
  if (typeof v !== 'string' || !(ISO_DATE.test(v) || ISO_DATE_TIME.test(v)) || Number.isNaN(Date.parse(v))) {
    errors.push(`${name} must be an ISO 8601 date`);
    return { dateOnly: false };
  }
  return { at: new Date(ISO_DATE.test(v) ? `${v}T00:00:00.000Z` : v), dateOnly: ISO_DATE.test(v) };
}

const isBlank = (v: unknown) => v === undefined || v === null || v === '';

/**
 * Validates filters (from a query string already typed by the gateway, a search preset, or an MCP tool).
 * Returns problems as 'Invalid request payload' details; throws nothing.
 */
export function normalizeFilters(f: ImageListFilters): { filters: NormalizedFilters; errors: string[] } {
  const errors: string[] = [];
  const out: NormalizedFilters = { searchMode: 'exact', toExclusive: false, sortBy: 'newest' };
  const str = (v: unknown, name: string, max = 200): string | undefined => {
    if (isBlank(v)) return undefined;
    if (typeof v !== 'string') {
      errors.push(`${name} must be a string`);
      return undefined;
    }
    if (v.length > max) errors.push(`${name} must be at most ${max} characters`);
    return v;
  };
  const int = (v: unknown, name: string): number | undefined => {
    if (isBlank(v)) return undefined;
    const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) {
      errors.push(`${name} must be a positive integer`);
      return undefined;
    }
    return n;
  };
  const size = (v: unknown, name: string): number | undefined => {
    if (isBlank(v)) return undefined;
    const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) {
      errors.push(`${name} must be a non-negative number`);
      return undefined;
    }
    return n;
  };
  const bool = (v: unknown, name: string): boolean | undefined => {
    if (isBlank(v)) return undefined;
    if (v === true || v === 'true') return true;
    if (v === false || v === 'false') return false;
    errors.push(`${name} must be a boolean`);
    return undefined;
  };
  const oneOf = <T extends string>(v: unknown, name: string, allowed: readonly T[]): T | undefined => {
    if (isBlank(v)) return undefined;
    if (typeof v !== 'string' || !allowed.includes(v as T)) {
      errors.push(`${name} must be one of: ${allowed.join(', ')}`);
      return undefined;
    }
    return v as T;
  };

  const search = str(f.search, 'search', MAX_SEARCH_LENGTH);
  if (search !== undefined && search.trim() !== '') out.search = search.trim();
  out.searchMode = oneOf(f.searchMode, 'searchMode', SEARCH_MODES) ?? 'exact';
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
  out.aspectRatio = str(f.aspectRatio, 'aspectRatio', 20);
  out.operationType = str(f.operationType, 'operationType', 50);
  out.minSize = size(f.minSize, 'minSize');
  out.maxSize = size(f.maxSize, 'maxSize');
  if (out.minSize !== undefined && out.maxSize !== undefined && out.minSize > out.maxSize) {
    errors.push('minSize must not be greater than maxSize');
  }
  out.sessionId = str(f.sessionId, 'sessionId', 200);
  out.hasNegativePrompt = bool(f.hasNegativePrompt, 'hasNegativePrompt');
  out.modelId = oneOf(f.modelId, 'modelId', MODEL_IDS);
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
  out.stylePresetId = int(f.stylePresetId, 'stylePresetId');
  out.productReferenceId = int(f.productReferenceId, 'productReferenceId');
  out.isReference = bool(f.isReference, 'isReference');
  out.sortBy = oneOf(f.sortBy, 'sortBy', SORTS) ?? 'newest';
  return { filters: out, errors };
}

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

type Fragment = any;

function join(sql: Sql, parts: Fragment[], sep: 'AND' | 'OR'): Fragment {
  return parts.reduce((acc, p) => (sep === 'AND' ? sql`${acc} AND ${p}` : sql`${acc} OR ${p}`));
}

/** `WHERE ...` fragment: the tenant plus every given filter. */
export function imageWhere(sql: Sql, tenantId: string, f: NormalizedFilters) {
  const c: Fragment[] = [sql`tenant_id = ${tenantId}`];
  if (f.search) {
    if (f.searchMode === 'exact') c.push(sql`prompt ILIKE ${likePattern(f.search)}`);
    else {
      const words = [...new Set(f.search.split(/\s+/).filter(Boolean))].slice(0, 20);
      if (words.length > 0) {
        const w = words.map((word) => sql`prompt ILIKE ${likePattern(word)}`);
        c.push(sql`(${join(sql, w, f.searchMode === 'all' ? 'AND' : 'OR')})`);
      }
    }
  }
  if (f.from) c.push(sql`created_at >= ${f.from}`);
  if (f.to) c.push(f.toExclusive ? sql`created_at < ${f.to}` : sql`created_at <= ${f.to}`);
  if (f.aspectRatio) c.push(sql`aspect_ratio = ${f.aspectRatio}`);
  if (f.operationType) c.push(sql`operation = ${f.operationType}`);
  if (f.minSize !== undefined) c.push(sql`size_bytes >= ${f.minSize}`);
  if (f.maxSize !== undefined) c.push(sql`size_bytes <= ${f.maxSize}`);
  if (f.sessionId) c.push(sql`session_id = ${f.sessionId}`);
  if (f.hasNegativePrompt === true) c.push(sql`negative_prompt IS NOT NULL AND negative_prompt <> ''`);
  if (f.hasNegativePrompt === false) c.push(sql`(negative_prompt IS NULL OR negative_prompt = '')`);
  if (f.modelId) c.push(sql`model_id = ${f.modelId}`);
  if (f.resolutionTiers?.length) c.push(sql`resolution_tier = ANY(${f.resolutionTiers}::text[])`);
  if (f.stylePresetId !== undefined) c.push(sql`style_preset_id = ${f.stylePresetId}`);
  if (f.productReferenceId !== undefined) c.push(sql`product_reference_id = ${f.productReferenceId}`);
  if (f.isReference !== undefined) c.push(sql`is_reference = ${f.isReference}`);
  return sql`WHERE ${join(sql, c, 'AND')}`;
}

export function imageOrderBy(sql: Sql, sortBy: ImageSort) {
  switch (sortBy) {
    case 'oldest':
      return sql`ORDER BY created_at ASC, id ASC`;
    case 'largest':
      return sql`ORDER BY size_bytes DESC, id DESC`;
    case 'smallest':
      return sql`ORDER BY size_bytes ASC, id ASC`;
    default:
      return sql`ORDER BY created_at DESC, id DESC`;
  }
}

/** True when no filter narrows the tenant's images (sorting does not count). */
export function isUnfiltered(f: NormalizedFilters): boolean {
  return Object.entries(f).every(([k, v]) => k === 'searchMode' || k === 'sortBy' || k === 'toExclusive' || v === undefined);
}

export function clampPage(limit?: number, offset?: number): { limit: number; offset: number } {
  const l = !limit || limit < 1 ? DEFAULT_LIMIT : Math.min(Math.trunc(limit), MAX_LIMIT);
  const o = !offset || offset < 0 ? 0 : Math.trunc(offset);
  return { limit: l, offset: o };
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
  const { filters: f, errors } = normalizeFilters(filters);
  if (errors.length > 0) throw invalidPayload(errors);
  const { limit, offset } = clampPage(page.limit, page.offset);
  const where = imageWhere(sql, tenantId, f);
  // Unfiltered (the common gallery view): the total is the tenant's counter row, not a count.
  const total = isUnfiltered(f)
    ? sql`COALESCE((SELECT image_count FROM tenant_stats WHERE tenant_id = ${tenantId}), 0)::int`
    : sql`(SELECT count(*)::int FROM images ${where})`;
  const [r] = await sql`
    WITH page AS (
      SELECT ${sql.unsafe(IMAGE_COLUMNS)} FROM images ${where} ${imageOrderBy(sql, f.sortBy)} LIMIT ${limit} OFFSET ${offset}
    )
    SELECT ${total} AS total, (SELECT json_agg(page ${imageOrderBy(sql, f.sortBy)})::text FROM page) AS page`;
  const list: Record<string, unknown>[] = r?.page ? JSON.parse(r.page as string) : [];
  const images = list.map((row) => {
    row.created_at = new Date(row.created_at as string);
    return rowFromDb(row);
  });
  return { rows: images, total: Number(r?.total ?? 0), limit, offset };
}
