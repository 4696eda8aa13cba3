import { ASPECT_RATIO_FILTER_MAX, IMAGE_SORTS, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, SEARCH_MODES } from '@imagegen/api-schemas/vocab';
import type {
  CreateSearchPresetRequest,
  DeleteAssetResponse,
  GetAssetRequest,
  ListSearchPresetsRequest,
  ListSearchPresetsResponse,
  RunSearchPresetRequest,
  RunSearchPresetResponse,
  SearchPreset,
} from '@imagegen/contracts/library/v1/assets';
import { type AppError, badRequest, type CallContext, invalidPayload, notFound, type ObjectStorage, type Sql } from '@imagegen/platform';
import { type ImageListFilters, listImages } from '../images/list-query.js';
import { toImageRecord } from '../images/types.js';
import { iso, isUniqueViolation, LIMITS, num, tenantOf } from './common.js';

/** The filter keys of SPEC 4.6 (the GET /api/images query names) and what each accepts (searchMode and sortBy: the vocabulary's). */
export const OPERATION_TYPES = ['generate', 'edit'];

export interface SearchFilters {
  search?: string | null;
  searchMode?: string | null;
  dateFrom?: string | null;
  dateTo?: string | null;
  aspectRatio?: string | null;
  operationType?: string | null;
  minSize?: number | null;
  maxSize?: number | null;
  sessionId?: string | null;
  hasNegativePrompt?: boolean | null;
  sortBy?: string | null;
}

const isIsoDate = (s: string): boolean =>
  /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(s) && !Number.isNaN(Date.parse(s));

/** Validates a filters object against SPEC 4.6; null values mean "not set". Returns problems ('filters.x ...'). */
export function filterProblems(filters: Record<string, unknown>): string[] {
  const out: string[] = [];
  const str = (k: string, v: unknown, max?: number) => {
    if (typeof v !== 'string') return out.push(`filters.${k} must be a string`);
    if (max !== undefined && v.length > max) out.push(`filters.${k} must be at most ${max} characters`);
  };
  const oneOf = (k: string, v: unknown, allowed: readonly string[]) => {
    if (typeof v !== 'string' || !allowed.includes(v)) out.push(`filters.${k} must be one of: ${allowed.join(', ')}`);
  };
  for (const [k, v] of Object.entries(filters)) {
    if (v === null || v === undefined) continue;
    switch (k) {
      case 'search':
        str(k, v, LIMITS.searchQuery);
        break;
      case 'searchMode':
        oneOf(k, v, SEARCH_MODES);
        break;
      case 'dateFrom':
      case 'dateTo':
        if (typeof v !== 'string' || !isIsoDate(v)) out.push(`filters.${k} must be an ISO 8601 date string`);
        break;
      case 'aspectRatio':
        str(k, v, ASPECT_RATIO_FILTER_MAX);
        break;
      case 'operationType':
        oneOf(k, v, OPERATION_TYPES);
        break;
      case 'minSize':
      case 'maxSize':
        // Bytes: a whole number (the column is bigint; a fraction cannot be compared with it).
        if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) out.push(`filters.${k} must be an integer >= 0`);
        break;
      case 'sessionId':
        str(k, v, LIMITS.sessionId);
        break;
      case 'hasNegativePrompt':
        if (typeof v !== 'boolean') out.push(`filters.${k} must be a boolean`);
        break;
      case 'sortBy':
        oneOf(k, v, IMAGE_SORTS);
        break;
      default:
        out.push(`filters.${k} is not allowed`);
    }
  }
  if (typeof filters.minSize === 'number' && typeof filters.maxSize === 'number' && filters.minSize > filters.maxSize) {
    out.push('filters.minSize must be <= filters.maxSize');
  }
  return out;
}

export function toSearchPreset(r: Record<string, unknown>): SearchPreset {
  return {
    id: num(r.id),
    tenantId: r.tenant_id as string,
    presetName: r.preset_name as string,
    filtersJson: JSON.stringify(r.filters ?? {}),
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}

export const presetNotFound = (): AppError => notFound('Preset not found');
export const invalidPresetId = (): AppError => badRequest('Invalid preset ID');

export function parsePresetId(identifier: string): number {
  const s = String(identifier ?? '').trim();
  if (!/^\d{1,15}$/.test(s) || Number(s) < 1) throw invalidPresetId();
  return Number(s);
}

export async function findSearchPreset(sql: Sql, tenantId: string, identifier: string): Promise<SearchPreset & { filters: SearchFilters }> {
  const id = parsePresetId(identifier);
  const [r] = await sql`SELECT * FROM search_presets WHERE tenant_id = ${tenantId} AND id = ${id}`;
  if (!r) throw presetNotFound();
  return { ...toSearchPreset(r), filters: (r.filters ?? {}) as SearchFilters };
}

export function searchPresetHandlers(deps: { sql: Sql }) {
  const { sql } = deps;
  return {
    async listSearchPresets(_req: ListSearchPresetsRequest, call: CallContext): Promise<ListSearchPresetsResponse> {
      const tenantId = tenantOf(call);
      const rows = await sql`SELECT * FROM search_presets WHERE tenant_id = ${tenantId} ORDER BY created_at DESC, id DESC`;
      return { presets: rows.map(toSearchPreset) };
    },

    async createSearchPreset(req: CreateSearchPresetRequest, call: CallContext): Promise<SearchPreset> {
      const tenantId = tenantOf(call);
      if (typeof req.presetName !== 'string') throw badRequest('presetName is required and must be a string');
      const name = req.presetName.trim();
      if (name.length === 0) throw badRequest('presetName cannot be empty');
      if (name.length > LIMITS.searchPresetName) throw badRequest(`presetName cannot exceed ${LIMITS.searchPresetName} characters`);
      let filters: unknown;
      try {
        filters = req.filtersJson === undefined ? undefined : JSON.parse(req.filtersJson);
      } catch {
        filters = undefined;
      }
      if (filters === null || typeof filters !== 'object' || Array.isArray(filters)) {
        throw badRequest('filters is required and must be an object');
      }
      const problems = filterProblems(filters as Record<string, unknown>);
      if (problems.length) throw invalidPayload(problems);
      try {
        const [r] = await sql`
          INSERT INTO search_presets (tenant_id, preset_name, filters)
          VALUES (${tenantId}, ${name}, ${sql.json(filters as Record<string, never>)})
          RETURNING *`;
        return toSearchPreset(r);
      } catch (err) {
        if (isUniqueViolation(err)) throw badRequest(`Preset with name ${name} already exists`);
        throw err;
      }
    },

    async deleteSearchPreset(req: GetAssetRequest, call: CallContext): Promise<DeleteAssetResponse> {
      const tenantId = tenantOf(call);
      const id = parsePresetId(req.identifier);
      const rows = await sql`DELETE FROM search_presets WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING id`;
      if (rows.length === 0) throw presetNotFound();
      return { deleted: true };
    },
  };
}

/** Runs a saved preset's filters (including sortBy) against the tenant's images with the gallery query. */
export function runSearchPresetHandler(deps: { sql: Sql; storage: ObjectStorage; cursorKey: Buffer }) {
  const { sql, storage, cursorKey } = deps;
  return async (req: RunSearchPresetRequest, call: CallContext): Promise<RunSearchPresetResponse> => {
    const tenantId = tenantOf(call);
    const problems: string[] = [];
    if (req.limit < 0 || req.limit > LIST_LIMIT_MAX) problems.push(`limit must be between 1 and ${LIST_LIMIT_MAX}`);
    if (req.offset < 0) problems.push('offset must be >= 0');
    if (problems.length) throw invalidPayload(problems);
    const preset = await findSearchPreset(sql, tenantId, req.identifier);
    const f = preset.filters;
    const filters: ImageListFilters = {
      search: f.search ?? undefined,
      searchMode: (f.searchMode ?? undefined) as ImageListFilters['searchMode'],
      dateFrom: f.dateFrom ?? undefined,
      dateTo: f.dateTo ?? undefined,
      aspectRatio: f.aspectRatio ?? undefined,
      operationType: f.operationType ?? undefined,
      minSize: f.minSize ?? undefined,
      maxSize: f.maxSize ?? undefined,
      sessionId: f.sessionId ?? undefined,
      hasNegativePrompt: f.hasNegativePrompt ?? undefined,
      sortBy: (f.sortBy ?? undefined) as ImageListFilters['sortBy'],
    };
    // The gallery query (indexes, bounded totals); its SQL stops when the caller goes away or the deadline passes.
    const page = await listImages(
      sql,
      tenantId,
      filters,
      { limit: req.limit || LIST_LIMIT_DEFAULT, offset: req.offset, cursor: req.cursor },
      { cursorKey, signal: call.signal, deadline: call.deadline },
    );
    const { filters: _f, ...presetMsg } = preset;
    return {
      preset: presetMsg,
      images: page.rows.map((r) => toImageRecord(r, storage)),
      total: page.total,
      limit: page.limit,
      offset: page.offset,
      totalIsExact: page.totalIsExact,
      nextCursor: page.nextCursor,
    };
  };
}
