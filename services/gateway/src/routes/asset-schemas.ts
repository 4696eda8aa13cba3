import { AssetListQuery, IdentifierParams, type Infer } from '@imagegen/api-schemas';
import { wireSchema } from '../validation.js';

/** Schema pieces and helpers shared by the saved-asset routes (characters, products, scenes). */

/** `:identifier` path parameter: a numeric id or a URL-encoded name. */
export const identifierParams = wireSchema(IdentifierParams);

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Query of the searchable, sortable asset lists (characters, scenes). */
export const assetListQuery = wireSchema(AssetListQuery);

/** The assets service's list request for an assetListQuery. */
export function assetListRequest(query: unknown) {
  const q = query as Infer<typeof AssetListQuery>;
  return { limit: q.limit, offset: q.offset, search: q.search, sortBy: q.sort_by, cursor: q.cursor };
}

/** `{total, limit, offset, hasMore, nextCursor}` of an asset list page. */
export function assetPagination(res: { total: number; limit: number; offset: number; hasMore: boolean; nextCursor?: string }) {
  return { total: res.total, limit: res.limit, offset: res.offset, hasMore: res.hasMore, nextCursor: res.nextCursor ?? null };
}
