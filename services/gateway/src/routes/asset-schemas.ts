import { offsetParam } from '../validation.js';

/** Schema pieces and helpers shared by the saved-asset routes (characters, products, scenes). */

/** `:identifier` path parameter: a numeric id or a URL-encoded name. */
export const identifierParams = {
  type: 'object',
  required: ['identifier'],
  properties: { identifier: { type: 'string', description: 'numeric id or URL-encoded name' } },
};

/** A JSON schema type that also accepts null (null clears the field on update). */
export const nullable = (type: string, extra: Record<string, unknown> = {}) => ({ type: [type, 'null'], ...extra });

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Query of the searchable, sortable asset lists (characters, scenes). */
export const assetListQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 50 },
    offset: offsetParam,
    search: { type: 'string', maxLength: 200 },
    sort_by: { type: 'string', enum: ['name', 'created', 'used', 'recent'], default: 'name' },
  },
};

/** The assets service's list request for an assetListQuery. */
export function assetListRequest(query: unknown) {
  const q = query as { limit: number; offset: number; search?: string; sort_by: string };
  return { limit: q.limit, offset: q.offset, search: q.search, sortBy: q.sort_by };
}

/** `{total, limit, offset, hasMore}` of an asset list page. */
export function assetPagination(res: { total: number; limit: number; offset: number; hasMore: boolean }) {
  return { total: res.total, limit: res.limit, offset: res.offset, hasMore: res.hasMore };
}
