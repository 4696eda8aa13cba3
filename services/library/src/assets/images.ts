import type { AssetReferenceImage } from '@imagegen/contracts/library/v1/assets';
import type { ObjectStorage, Sql, TransactionSql } from '@imagegen/platform';
import { idArray, num } from './common.js';

/** A library image as a saved asset references it. */
export interface RefImage {
  id: number;
  objectKey: string;
  thumbnailKey: string;
}

/**
 * The tenant's library images among `ids` (table `images` of the library schema), keyed by id.
 * Ids of other tenants and unknown ids are simply absent.
 */
export async function findImages(sql: Sql | TransactionSql, tenantId: string, ids: number[]): Promise<Map<number, RefImage>> {
  const out = new Map<number, RefImage>();
  const unique = [...new Set(ids)].filter((i) => Number.isSafeInteger(i) && i > 0);
  if (unique.length === 0) return out;
  const rows = await sql`
    SELECT id, object_key, thumbnail_key FROM images
    WHERE tenant_id = ${tenantId} AND id = ANY(${idArray(unique)}::bigint[])`;
  for (const r of rows) out.set(num(r.id), { id: num(r.id), objectKey: r.object_key as string, thumbnailKey: r.thumbnail_key as string });
  return out;
}

/** Ids of `ids` that are not images of the tenant, in request order, without duplicates. */
export async function invalidImageIds(sql: Sql | TransactionSql, tenantId: string, ids: number[]): Promise<number[]> {
  const found = await findImages(sql, tenantId, ids);
  const bad: number[] = [];
  for (const id of ids) if (!found.has(id) && !bad.includes(id)) bad.push(id);
  return bad;
}

/** The still-existing images of an asset in its stored order (deleted images are skipped). */
export function orderedRefs(ids: number[], found: Map<number, RefImage>): RefImage[] {
  const out: RefImage[] = [];
  for (const id of ids) {
    const img = found.get(id);
    if (img && !out.includes(img)) out.push(img);
  }
  return out;
}

export function toReferenceImage(img: RefImage, storage: ObjectStorage): AssetReferenceImage {
  return {
    id: img.id,
    objectKey: img.objectKey,
    url: storage.publicUrl(img.objectKey),
    thumbnailUrl: storage.publicUrl(img.thumbnailKey),
    thumbnailKey: img.thumbnailKey,
  };
}

/** Loads the referenced images of many assets at once (list pages). */
export async function imagesForAssets(sql: Sql | TransactionSql, tenantId: string, idLists: number[][]): Promise<Map<number, RefImage>> {
  return findImages(sql, tenantId, idLists.flat());
}
