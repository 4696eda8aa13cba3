import {
  ASPECT_RATIO_FILTER_MAX,
  IMAGE_SORTS,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  MODEL_IDS,
  OPERATION_TYPE_FILTER_MAX,
  RESOLUTION_TIERS,
  SEARCH_MODES,
  SEARCH_QUERY_MAX,
  SESSION_ID_MAX,
} from '@imagegen/api-schemas/vocab';
import { AppError, invalidPayload, PLAIN_KEY_SQL, type Sql } from '@imagegen/platform';
import { hasSearchKeys, likePattern } from '../assets/common.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { allKeysPlain, IMAGE_COLUMNS, type ImageRow, imageJsonSelect, rowFromDb } from './types.js';

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

export type ImageSort = (typeof IMAGE_SORTS)[number];

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
function str(errors: string[], v: unknown, name: string, max: number): string | undefined {
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
  const search = str(errors, f.search, 'search', SEARCH_QUERY_MAX);
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
  out.aspectRatio = str(errors, f.aspectRatio, 'aspectRatio', ASPECT_RATIO_FILTER_MAX);
  out.operationType = str(errors, f.operationType, 'operationType', OPERATION_TYPE_FILTER_MAX);
  out.minSize = size(errors, f.minSize, 'minSize');
  out.maxSize = size(errors, f.maxSize, 'maxSize');
  if (out.minSize !== undefined && out.maxSize !== undefined && out.minSize > out.maxSize) {
    errors.push('minSize must not be greater than maxSize');
  }
  out.sessionId = str(errors, f.sessionId, 'sessionId', SESSION_ID_MAX);
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
      const bad = tiers.filter((t) => !(RESOLUTION_TIERS as readonly string[]).includes(t));
      if (bad.length > 0 || tiers.length === 0) {
        errors.push(`resolutionTier must be a comma-separated list of: ${RESOLUTION_TIERS.join(', ')}`);
      } else out.resolutionTiers = [...new Set(tiers)];
    }
  }
  out.stylePresetId = int(errors, f.stylePresetId, 'stylePresetId');
  out.productReferenceId = int(errors, f.productReferenceId, 'productReferenceId');
  out.isReference = bool(errors, f.isReference, 'isReference');
  out.sortBy = oneOf(errors, f.sortBy, 'sortBy', IMAGE_SORTS) ?? 'newest';
  return { filters: out, errors };
}

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

/**
 * A filter whose own index holds few rows (a session, a preset, a product, reference images): a search is then
 * evaluated on those rows only.
 */
const narrowed = (f: NormalizedFilters) =>
  f.sessionId !== undefined || f.stylePresetId !== undefined || f.productReferenceId !== undefined || f.isReference === true;

/**
 * How the prompt search is written, which decides how the planner may answer it:
 * - `trigram`: the candidates' trigram keys (`prompt_trgm_keys(tenant_id, prompt) @> search_trgm_keys(...)`, the
 *   index of migration 190), then the match (`lower(prompt) LIKE ...`, ILIKE's own meaning) on them;
 * - `narrow`: the match alone, which no index answers (the trigram keys index, whose cost the planner underestimates
 *   for frequent words, 57 ms for a 10% word, stays out): a narrow filter's index serves;
 * - `walk`: the search as one CASE expression, which the planner neither indexes nor estimates (it takes it as
 *   matching half the rows), so it walks a list-order index and stops after the page: with the ILIKE estimate
 *   (0.5% a word) it chose a parallel scan of the whole table for a two-word `all` search (1.2 s).
 */
type SearchForm = 'trigram' | 'narrow' | 'walk';

/** The words of an all/any search (at most 20, each once). */
const searchWords = (search: string) => [...new Set(search.split(/\s+/).filter(Boolean))].slice(0, 20);

/**
 * Whether the trigram index can narrow a search (search_trgm_keys, migration 190): each alternative (the phrase,
 * or every word of an `any` search) must hold three letters or digits in a row; else it would read every key.
 */
export function trigramUsable(f: Pick<NormalizedFilters, 'search' | 'searchMode'>): boolean {
  if (!f.search) return false;
  return f.searchMode === 'any' ? searchWords(f.search).every(hasSearchKeys) : hasSearchKeys(f.search);
}

/** `WHERE ...`: the tenant (always $1) plus every given filter. */
function imageWhere(p: QueryParams, tenantId: string, f: NormalizedFilters, form: SearchForm, tenantParam?: string): string {
  const c: string[] = [`tenant_id = ${tenantParam ?? p.add(tenantId)}`];
  if (f.search) {
    // The trigram form narrows the candidates by their (tenant, trigram) keys (migration 190; $1 is the tenant).
    const keys = (text: string) => `prompt_trgm_keys(tenant_id, prompt) @> search_trgm_keys($1, ${p.add(text)})`;
    const trigram = form === 'trigram';
    // `lower(prompt) LIKE lower(pattern)` is what ILIKE does in a multibyte database (PostgreSQL lowers both sides,
    // then matches), written so that a row's prompt is lowered once for all the words: ILIKE lowered it (and the
    // pattern) once per word. A two-word search over the 2,000-row window: 4.3 -> 2.4 ms. No index is on lower(prompt).
    const lowered = (pattern: string) => `lower(${p.add(pattern)})`;
    let cond: string | undefined;
    if (f.searchMode === 'exact') {
      if (trigram) c.push(keys(f.search));
      cond = `lower(prompt) LIKE ${lowered(likePattern(f.search))}`;
    } else {
      const words = searchWords(f.search);
      if (words.length > 0) {
        if (trigram) c.push(f.searchMode === 'all' ? keys(words.join(' ')) : `(${words.map(keys).join(' OR ')})`);
        const patterns = words.map((word) => lowered(likePattern(word)));
        cond = `lower(prompt) LIKE ${f.searchMode === 'all' ? 'ALL' : 'ANY'} (ARRAY[${patterns.join(', ')}])`;
      }
    }
    if (cond) c.push(form === 'walk' ? `CASE WHEN ${cond} THEN true ELSE false END` : cond);
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
  const l = !limit || limit < 1 ? LIST_LIMIT_DEFAULT : Math.min(Math.trunc(limit), LIST_LIMIT_MAX);
  const o = !offset || offset < 0 ? 0 : Math.trunc(offset);
  return { limit: l, offset: o };
}

/**
 * Totals that do not scan the world (issue 16; an exact count of a frequent filter or search over a million
 * images was ~99% of the request's time):
 * - no filter: exact, the tenant's counter row;
 * - no search and at most one filter besides the date range (each such filter has an index in list order):
 *   counted up to TOTAL_CAP + 1 rows, exact up to TOTAL_CAP;
 * - a search, or two or more filters (a conjunction no single index answers): the matches among the first
 *   TOTAL_WINDOW images of the tenant in list order (within the date range when one is given), exact when the
 *   window held them all.
 * An inexact answer says `totalIsExact: false` and `total` is a lower bound: the larger of what was counted
 * (at least TOTAL_CAP when the cap was reached) and offset + rows on the page (+ 1 when more follow).
 */
export const TOTAL_CAP = 1000;
export const TOTAL_WINDOW = 2000;

/**
 * A search (without a narrow filter) is answered one of two ways, chosen per call:
 * - walk the list-order index, test each row, stop after the page: cost ~ rows walked = needed / match rate;
 * - read the trigram index (every match of the tenant), then sort them: cost ~ the number of matches.
 * The match rate is measured first the way the window total counts (matches among the first TOTAL_WINDOW rows of
 * the list, ~2 ms): the walk is taken when it is expected to read at most SEARCH_WALK_ROWS rows (or the window
 * held the whole list). The planner alone could not tell: 'copper lantern' (1% of rows, each word 10%) read
 * 20,000 rows through the trigram bitmap (1.2 s) where the walk reads ~2,100; a 0.1% phrase walked ~21,000 rows
 * (300 ms p99) where the trigram index has ~1,000. (One statement holding both ways, gated by the measure, ran
 * only one of them but was costed as both: past jit_above_cost, JIT compilation added ~45 ms to every search.)
 */
export const SEARCH_WALK_ROWS = 10_000;

export type SearchPlan = 'walk' | 'trigram';

/** Paging of a list call: offset (SPEC 4.1) or a cursor from a previous answer's nextCursor (not both). */
export interface ListPageRequest {
  limit?: number;
  offset?: number;
  cursor?: string;
}

/** What a list call needs beyond filters and paging. */
export interface ListOptions {
  /** HMAC key of cursors (cursor.ts cursorKey); without one no nextCursor is made and `cursor` is refused. */
  cursorKey?: Buffer;
  /** Aborted when the caller is gone: the running SQL is cancelled (pg_cancel_backend via postgres.js). */
  signal?: AbortSignal;
  /** The call's deadline: the SQL is cancelled when it passes. */
  deadline?: Date;
  /**
   * How a search finds its rows (see SEARCH_WALK_ROWS): decided per call when not given; `walk` and `trigram`
   * force one way (tests compare them; both return the same rows).
   */
  searchPlan?: SearchPlan;
}

export interface ListPageInfo {
  total: number;
  totalIsExact: boolean;
  limit: number;
  offset: number;
  /** Continues after the last row of this page; undefined on the last page (or without a cursor key). */
  nextCursor?: string;
}

/** The sort key column of each order and its text form in cursors. */
const SORT_KEY: Record<ImageSort, { col: string; text: string; cast: string; desc: boolean }> = {
  newest: { col: 'created_at', text: `to_char(k AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, cast: 'timestamptz', desc: true },
  oldest: { col: 'created_at', text: `to_char(k AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`, cast: 'timestamptz', desc: false },
  largest: { col: 'size_bytes', text: 'k::text', cast: 'bigint', desc: true },
  smallest: { col: 'size_bytes', text: 'k::text', cast: 'bigint', desc: false },
};

interface PageQuery {
  tenantId: string;
  filters: NormalizedFilters;
  params: QueryParams;
  /**
   * CTEs `ids` (the page's ids and sort keys, limit + 1 rows to tell whether more follow: only the index is
   * read for the rows an offset skips when no filter needs the table) and `page` (the page's rows, joined
   * by id). Select from `page`.
   */
  ctes: (columns: string) => string;
  /** ORDER BY of the page (on columns of `page`). */
  order: string;
  /** How the total is counted (see TOTAL_CAP); the CTE `tot` holds it (total, walked). */
  totalKind: 'stats' | 'capped' | 'window';
  /**
   * The statement's cost is bounded by the page, whatever the tenant's size: no filter (the total is the counter
   * row) and at most BOUNDED_OFFSET + limit + 1 index entries walked (the first pages and every cursor page of the
   * gallery). See cancellable: such a statement is not worth a reserved connection.
   */
  bounded: boolean;
  /** `last`: the sort key and id of the page's last row as 'text id' (for nextCursor). */
  last: string;
  limit: number;
  offset: number;
}

/** Filters besides the date range and the search (which always counts in a window). */
function filterCount(f: NormalizedFilters): number {
  let n = 0;
  for (const k of [
    'aspectRatio',
    'operationType',
    'minSize',
    'maxSize',
    'sessionId',
    'hasNegativePrompt',
    'modelId',
    'resolutionTiers',
    'stylePresetId',
    'productReferenceId',
    'isReference',
  ] as const) {
    if (f[k] !== undefined) n++;
  }
  return n;
}

/** ` AND created_at ...` of the date range (new parameters). */
function dateRange(p: QueryParams, f: NormalizedFilters): string {
  let s = '';
  if (f.from) s += ` AND created_at >= ${p.add(f.from)}`;
  if (f.to) s += f.toExclusive ? ` AND created_at < ${p.add(f.to)}` : ` AND created_at <= ${p.add(f.to)}`;
  return s;
}

/**
 * A deep offset of the unfiltered list by date (newest, oldest) skips whole days by their counts (image_day_counts,
 * migration 160) and walks the index within one day only; a shallower one just walks. CTE `skip`: the day that
 * holds the row at `offset` and the number of the list's rows before that day (none when the list is empty).
 */
export const DAY_SKIP_MIN_OFFSET = 2000;

function daySkip(desc: boolean, offsetParam: string): string {
  const dir = desc ? 'DESC' : 'ASC';
  return `SELECT day, before FROM (
      SELECT day, sum(image_count) OVER (ORDER BY day ${dir}) - image_count AS before FROM image_day_counts WHERE tenant_id = $1
    ) d WHERE before <= ${offsetParam} ORDER BY day ${desc ? 'ASC' : 'DESC'} LIMIT 1`;
}

function daySkipIds(desc: boolean, fetchParam: string, offsetParam: string): string {
  const bound = desc
    ? `created_at < COALESCE((SELECT (day + 1)::timestamp AT TIME ZONE 'UTC' FROM skip), 'infinity')`
    : `created_at >= COALESCE((SELECT day::timestamp AT TIME ZONE 'UTC' FROM skip), '-infinity')`;
  return `SELECT id, created_at AS k FROM images WHERE tenant_id = $1 AND ${bound} ${ORDER_BY[desc ? 'newest' : 'oldest']}
    LIMIT ${fetchParam} OFFSET ${offsetParam} - COALESCE((SELECT before FROM skip), 0)`;
}

/**
 * The window total (see TOTAL_CAP): at most TOTAL_WINDOW rows walked in date order (the list's own when it is sorted
 * by date, else newest first) within the date range, the filters (`where`, tenant $1) evaluated on those rows only.
 * Columns total, walked. A list sorted by size counts among its newest images too: rows lie in the table in the
 * order they were stored, so the newest 2,000 are ~100 table pages where the largest 2,000 are ~2,000 (the window
 * of a 0.1% search at 1M images: 6.75 -> 5.54 ms, medians of 10 rounds in turn), and a date range narrows the walk
 * whatever the sort. Either way the count is a lower bound unless the window held every image in range (walked <
 * TOTAL_WINDOW: exact).
 */
function windowTotal(p: QueryParams, f: NormalizedFilters, where: string): string {
  const order = SORT_KEY[f.sortBy].col === 'created_at' ? ORDER_BY[f.sortBy] : ORDER_BY.newest;
  const matched = where.slice('WHERE tenant_id = $1 AND '.length);
  return `SELECT count(*) FILTER (WHERE ${matched})::int AS total, count(*)::int AS walked
      FROM (SELECT * FROM images WHERE tenant_id = $1${dateRange(p, f)} ${order} LIMIT ${TOTAL_WINDOW}) images`;
}

/**
 * The statement that chooses a search's plan (SEARCH_WALK_ROWS): `walk`, and the window's total and walked. None
 * when there is no choice (no search, a narrow filter, a forced plan) or the filters are invalid (the page query
 * reports them).
 */
function searchPlanQuery(tenantId: string, filters: ImageListFilters, page: ListPageRequest, opts: ListOptions) {
  const { filters: f, errors } = normalizeFilters(filters);
  if (errors.length > 0 || !f.search || narrowed(f) || opts.searchPlan) return undefined;
  const { limit, offset } = clampPage(page.limit, page.offset);
  const p = new QueryParams();
  const where = imageWhere(p, tenantId, f, 'walk');
  const need = p.add(offset + limit + 1);
  return {
    text: `SELECT total, walked, ${!trigramUsable(f)} OR walked < ${TOTAL_WINDOW} OR total::bigint * ${SEARCH_WALK_ROWS} >= ${need}::bigint * walked AS walk
      FROM (${windowTotal(p, f, where)}) w`,
    values: p.values,
  };
}

/** The window total's counts, measured by the statement that chose the search plan. */
interface Measured {
  total: number;
  walked: number;
}

/**
 * The list options with the search plan chosen (one short statement first when there is a choice), and the window
 * counts it measured: the page query reuses them as its total instead of walking the window again (~3 ms).
 */
async function withSearchPlan(
  sql: Sql,
  tenantId: string,
  filters: ImageListFilters,
  page: ListPageRequest,
  opts: ListOptions,
): Promise<{ opts: ListOptions; measured?: Measured }> {
  const q = searchPlanQuery(tenantId, filters, page, opts);
  if (!q) return { opts };
  const [r] = await cancellable(sql, (db) => db.unsafe(q.text, q.values as never[]), opts);
  return {
    opts: { ...opts, searchPlan: r?.walk === false ? 'trigram' : 'walk' },
    measured: { total: Number(r?.total ?? 0), walked: Number(r?.walked ?? 0) },
  };
}

/** The plan a search would take (tests). */
export async function chooseSearchPlan(
  sql: Sql,
  tenantId: string,
  filters: ImageListFilters,
  page: ListPageRequest = {},
): Promise<SearchPlan | undefined> {
  return (await withSearchPlan(sql, tenantId, filters, page, {})).opts.searchPlan;
}

/** Validated filters and paging as SQL text; throws 400 'Invalid request payload' with details. */
function pageQuery(tenantId: string, filters: ImageListFilters, page: ListPageRequest, opts: ListOptions, measured?: Measured): PageQuery {
  const { filters: f, errors } = normalizeFilters(filters);
  const cursor = isBlank(page.cursor) ? undefined : page.cursor;
  if (cursor !== undefined && typeof cursor !== 'string') errors.push('cursor must be a string');
  if (cursor !== undefined && page.offset) errors.push('cursor and offset cannot be combined');
  if (cursor !== undefined && !opts.cursorKey) errors.push('cursor is invalid');
  if (errors.length > 0) throw invalidPayload(errors);
  const { limit, offset } = clampPage(page.limit, page.offset);
  const position = cursor !== undefined ? decodeCursor(opts.cursorKey as Buffer, tenantId, f.sortBy, cursor) : undefined;
  const params = new QueryParams();
  // Searches without a narrow filter walk or read the trigram index (SEARCH_WALK_ROWS; withSearchPlan chose).
  const plan = !f.search || narrowed(f) ? 'walk' : (opts.searchPlan ?? 'walk');
  const where = imageWhere(params, tenantId, f, narrowed(f) ? 'narrow' : plan === 'trigram' ? 'trigram' : 'walk');
  const key = SORT_KEY[f.sortBy];
  const order = ORDER_BY[f.sortBy];
  // The position goes in as text (::text::): a timestamptz parameter is serialized by postgres.js through a JS Date,
  // which drops its microseconds, so rows apart by less than a millisecond were skipped or repeated.
  const keyset = position
    ? ` AND (${key.col}, id) ${key.desc ? '<' : '>'} (${params.add(position.value)}::text::${key.cast}, ${params.add(position.id)}::bigint)`
    : '';
  const fetchParam = params.add(limit + 1);
  const offsetParam = params.add(offset);
  const totalKind = isUnfiltered(f) ? 'stats' : f.search || filterCount(f) > 1 ? 'window' : 'capped';
  let total: string;
  if (totalKind === 'stats') {
    // The common gallery view: the tenant's counter row ($1 is the tenant), not a count.
    total = 'SELECT COALESCE((SELECT image_count FROM tenant_stats WHERE tenant_id = $1), 0)::int AS total, 0 AS walked';
  } else if (totalKind === 'capped') {
    total = `SELECT count(*)::int AS total, 0 AS walked FROM (SELECT 1 FROM images ${where} LIMIT ${TOTAL_CAP + 1}) capped`;
  } else {
    // Counted already (withSearchPlan), an instant earlier: else the window is walked here.
    total = measured
      ? `SELECT ${params.add(measured.total)}::int AS total, ${params.add(measured.walked)}::int AS walked`
      : // The window tests its 2,000 rows with the match alone (not their trigram keys, a function call per row).
        windowTotal(params, f, plan === 'trigram' ? imageWhere(params, tenantId, f, 'walk', '$1') : where);
  }
  const dir = key.desc ? 'DESC' : 'ASC';
  const pageRows = `LIMIT ${fetchParam} OFFSET ${offsetParam}`;
  // Walk: the list-order index, stopping after the page.
  const walkIds = `SELECT id, ${key.col} AS k FROM images ${where}${keyset} ${order} ${pageRows}`;
  // Trigram: every match (OFFSET 0 keeps the planner from walking a list-order index for the ORDER BY), then sorted.
  const trigramIds = () =>
    `SELECT id, k FROM (SELECT id, ${key.col} AS k FROM images ${where}${keyset} OFFSET 0) m ORDER BY k ${dir}, id ${dir} ${pageRows}`;
  const skipDays = totalKind === 'stats' && offset > DAY_SKIP_MIN_OFFSET && key.col === 'created_at' && !position;
  const ids = skipDays ? daySkipIds(key.desc, fetchParam, offsetParam) : plan === 'trigram' ? trigramIds() : walkIds;
  const limitParam = params.add(limit);
  const ctes = (columns: string) =>
    `WITH tot AS MATERIALIZED (${total}),${
      skipDays
        ? `
    skip AS MATERIALIZED (${daySkip(key.desc, offsetParam)}),`
        : ''
    }
    ids AS MATERIALIZED (${ids}),
    page AS (SELECT ${columns}, ids.k FROM ids JOIN images USING (id) ORDER BY ids.k ${dir}, id ${dir} LIMIT ${limitParam})`;
  const rev = key.desc ? 'ASC' : 'DESC';
  const last = `(SELECT ${key.text} || ' ' || id FROM page ORDER BY k ${rev}, id ${rev} LIMIT 1)`;
  const bounded = totalKind === 'stats' && offset <= BOUNDED_OFFSET;
  return { tenantId, filters: f, params, ctes, order, totalKind, bounded, last, limit, offset };
}

/** The deepest offset of a bounded page query (PageQuery.bounded): its walk stays within ~2,100 index entries. */
const BOUNDED_OFFSET = DAY_SKIP_MIN_OFFSET;

/**
 * Only the unfiltered query is a named prepared statement (planned once per connection: the gallery's hot
 * path). A filtered one is planned with its values each time: a generic plan cannot tell a rare search word
 * or value from a frequent one (`lower(prompt) LIKE lower($2)`), and at 1M images picked the trigram bitmap for a word in
 * 10% of the rows (1.4 s) where walking the newest-first index stops after the page (0.3 ms).
 */
const preparable = (q: PageQuery) => q.totalKind === 'stats';

/** total/totalIsExact/nextCursor of a page from what the query returned. */
function pageInfo(q: PageQuery, opts: ListOptions, r: Record<string, unknown> | undefined, rows: number): ListPageInfo {
  const counted = Number(r?.total ?? 0);
  const more = Number(r?.fetched ?? 0) > q.limit;
  const exact =
    q.totalKind === 'stats' ||
    (q.totalKind === 'capped' && counted <= TOTAL_CAP) ||
    (q.totalKind === 'window' && Number(r?.walked ?? 0) < TOTAL_WINDOW);
  const total = exact
    ? counted
    : Math.max(Math.min(counted, q.totalKind === 'capped' ? TOTAL_CAP : counted), q.offset + rows + (more ? 1 : 0));
  let nextCursor: string | undefined;
  if (more && opts.cursorKey && typeof r?.last === 'string') {
    const sep = r.last.lastIndexOf(' ');
    nextCursor = encodeCursor(opts.cursorKey, q.tenantId, {
      sort: q.filters.sortBy,
      value: r.last.slice(0, sep),
      id: Number(r.last.slice(sep + 1)),
    });
  }
  return { total, totalIsExact: exact, limit: q.limit, offset: q.offset, nextCursor };
}

/**
 * Runs a list query so that it stops when nobody waits for it any more (issue 16): when `signal` aborts (the
 * client went away, the gRPC call was cancelled) or `deadline` passes, postgres.js cancels the statement on
 * the server (a CancelRequest, as pg_cancel_backend). No extra round trip on the way.
 * The query runs on a reserved connection that goes back to the pool only once the server has taken the
 * cancel request: a cancel that arrives after the statement ended then finds the backend idle (PostgreSQL drops
 * it) instead of cancelling whatever statement the pool would have run next on that connection.
 * A `bounded` statement (PageQuery.bounded: the gallery's first pages and cursor pages, a few milliseconds whatever the
 * tenant's size) is not worth that: it runs on the pool as any statement, pipelined behind those already sent on its
 * connection, and is never cancelled; its caller stops waiting for it (the gRPC deadline, a cancelled call) but it
 * runs to its end. The reserved connection is held for the whole round trip, event loop turn included, so the pool
 * (DB_POOL_MAX, 2 in the stack) ran at most one statement per connection: at 20 concurrent gallery requests every
 * statement waited for one of two connections to come back, and every stall of the event loop (a scavenge, a
 * descheduled thread) stalled both (issue 36 item 7, docs/BENCHMARKS.md: 1.5-2x the list's throughput, half its
 * p50). Nor is a bounded statement taken back while it waits for a connection: postgres.js's cancel of a query that
 * is the first of a connection still connecting leaves that connection out of the pool for good.
 */
async function cancellable<T>(
  sql: Sql,
  run: (conn: Sql) => { cancel(): unknown } & PromiseLike<T>,
  opts: ListOptions,
  bounded = false,
): Promise<T> {
  const { signal, deadline } = opts;
  if (!signal && !deadline) return run(sql);
  if (signal?.aborted) throw queryCancelled();
  if (bounded) return run(sql);
  const conn = await sql.reserve();
  if (signal?.aborted) {
    conn.release();
    throw queryCancelled();
  }
  let cancelling: Promise<unknown> | undefined;
  const query = run(conn as unknown as Sql) as ReturnType<typeof run> & { canceller?: ((q: unknown) => Promise<unknown>) | null };
  const cancel = () => {
    // postgres.js' query.cancel() drops the promise of its cancel request; its canceller returns it (settled once
    // the server has taken the request and closed that connection), which the release below waits for.
    if (cancelling) return;
    const canceller = query.canceller;
    query.canceller = null;
    cancelling = (typeof canceller === 'function' ? canceller(query) : Promise.resolve(query.cancel())).catch(() => {});
  };
  signal?.addEventListener('abort', cancel, { once: true });
  const timer = deadline ? setTimeout(cancel, Math.max(0, deadline.getTime() - Date.now())) : undefined;
  try {
    return await query;
  } catch (err) {
    if ((err as { code?: string }).code === '57014') throw queryCancelled();
    throw err;
  } finally {
    signal?.removeEventListener('abort', cancel);
    if (timer) clearTimeout(timer);
    if (cancelling) await cancelling;
    conn.release();
  }
}

/** A statement cancelled because its caller left or its deadline passed: 504 (the caller no longer waits). */
const queryCancelled = () => new AppError(504, { error: 'Request cancelled or timed out' });

/**
 * One page of a tenant's images plus the total matching count, in one round trip.
 * Throws 400 'Invalid request payload' with details when a filter, the paging or the cursor is invalid.
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
  page: ListPageRequest = {},
  opts: ListOptions = {},
): Promise<{ rows: ImageRow[] } & ListPageInfo> {
  const chosen = await withSearchPlan(sql, tenantId, filters, page, opts);
  opts = chosen.opts;
  const q = pageQuery(tenantId, filters, page, opts, chosen.measured);
  const [r] = await cancellable(
    sql,
    (db) =>
      db.unsafe(
        `${q.ctes(IMAGE_COLUMNS)}
      SELECT (SELECT total FROM tot) AS total, (SELECT walked FROM tot) AS walked, (SELECT count(*) FROM ids) AS fetched, ${q.last} AS last,
        json_agg(page ${q.order})::text AS page FROM page`,
        q.params.values as never[],
        { prepare: preparable(q) },
      ),
    opts,
    q.bounded,
  );
  const list: Record<string, unknown>[] = r?.page ? JSON.parse(r.page as string) : [];
  const images = list.map((row) => {
    row.created_at = new Date(row.created_at as string);
    return rowFromDb(row);
  });
  return { rows: images, ...pageInfo(q, opts, r, images.length) };
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
  page: ListPageRequest,
  urlPrefix: string,
  opts: ListOptions = {},
): Promise<{ json?: string } & ListPageInfo> {
  const chosen = await withSearchPlan(sql, tenantId, filters, page, opts);
  opts = chosen.opts;
  const q = pageQuery(tenantId, filters, page, opts, chosen.measured);
  const prefix = q.params.add(urlPrefix);
  const plainKey = q.params.add(PLAIN_KEY_SQL);
  const [r] = await cancellable(
    sql,
    (db) =>
      db.unsafe(
        `${q.ctes(`id, session_id, object_key, thumbnail_key, width, height, size_bytes, prompt, negative_prompt, operation,
        aspect_ratio, created_at`)}
      SELECT (SELECT total FROM tot) AS total, (SELECT walked FROM tot) AS walked, (SELECT count(*) FROM ids) AS fetched, ${q.last} AS last, count(*) AS n,
        ${allKeysPlain(plainKey)} AS plain,
        COALESCE(json_agg((SELECT r FROM (SELECT ${imageJsonSelect(prefix)}) r) ${q.order}), '[]')::text AS page
      FROM page`,
        q.params.values as never[],
        { prepare: preparable(q) },
      ),
    opts,
    q.bounded,
  );
  const plain = r?.plain !== false;
  return { json: plain ? (r?.page as string) : undefined, ...pageInfo(q, opts, r, Number(r?.n ?? 0)) };
}

/** The SQL text and values of a page query (EXPLAIN in tests); a search walks unless opts.searchPlan says otherwise. */
export function listImagesSql(tenantId: string, filters: ImageListFilters, page: ListPageRequest = {}, opts: ListOptions = {}) {
  const q = pageQuery(tenantId, filters, page, opts);
  return {
    text: `${q.ctes(IMAGE_COLUMNS)} SELECT (SELECT total FROM tot) AS total, (SELECT walked FROM tot) AS walked, (SELECT count(*) FROM ids) AS fetched, ${q.last} AS last,
      json_agg(page ${q.order})::text AS page FROM page`,
    values: q.params.values,
  };
}
