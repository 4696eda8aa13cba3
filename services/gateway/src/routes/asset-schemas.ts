import type { AssetListQuery, Infer } from '@imagegen/api-schemas';

/** Helpers shared by the saved-asset routes (characters, products, scenes). */

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The assets service's list request for the query of a searchable, sortable asset list (characters, scenes). */
export function assetListRequest(query: unknown) {
  const q = query as Infer<typeof AssetListQuery>;
  return { limit: q.limit, offset: q.offset, search: q.search, sortBy: q.sort_by, cursor: q.cursor };
}

/** `{total, limit, offset, hasMore, nextCursor}` of an asset list page. */
export function assetPagination(res: { total: number; limit: number; offset: number; hasMore: boolean; nextCursor?: string }) {
  return { total: res.total, limit: res.limit, offset: res.offset, hasMore: res.hasMore, nextCursor: res.nextCursor ?? null };
}
