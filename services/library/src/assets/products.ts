import { randomUUID } from 'node:crypto';
import type {
  CreateProductRequest,
  DeleteAssetResponse,
  GetAssetRequest,
  ListProductsRequest,
  ListProductsResponse,
  Product,
  UpdateProductRequest,
} from '@imagegen/contracts/library/v1/assets';
import {
  type AppError,
  badRequest,
  type CallContext,
  type Config,
  conflict,
  invalidPayload,
  type Logger,
  notFound,
  type ObjectStorage,
  type Sql,
  type TransactionSql,
  tenantKey,
} from '@imagegen/platform';
import { writeImageDeleted, writeImageStored } from '../images/events.js';
import {
  claimKeys,
  OBJECT_GC_GRACE_MS,
  removeDeletedObjects,
  removeObjects,
  scheduleDeletedObjects,
  scheduleRemoval,
} from '../images/object-gc.js';
import { processImage, THUMBNAIL_MIME_TYPE } from '../images/store-image.js';
import { assetListWhere, findAsset, iso, isoOrUndef, isUniqueViolation, LIMITS, num, Problems, strOrUndef, tenantOf } from './common.js';
import { fetchImage } from './fetch-image.js';
import { assetOrders, keysetPage } from './keyset.js';
import type { QuotaGuard } from './quota.js';

export interface ProductRow {
  id: number;
  productName: string;
  productDescription: string | null;
  productUrl: string;
  tags: string;
  objectKey: string;
  objectThumbnailKey: string;
  width: number;
  height: number;
  sizeBytes: number;
  thumbnailSizeBytes: number;
  format: string;
  mimeType: string;
  timesUsed: number;
  lastUsedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export function productFromDb(r: Record<string, unknown>): ProductRow {
  return {
    id: num(r.id),
    productName: r.product_name as string,
    productDescription: (r.product_description as string | null) ?? null,
    productUrl: r.product_url as string,
    tags: (r.tags as string) ?? '',
    objectKey: r.object_key as string,
    objectThumbnailKey: r.object_thumbnail_key as string,
    width: num(r.width),
    height: num(r.height),
    sizeBytes: num(r.size_bytes),
    thumbnailSizeBytes: num(r.thumbnail_size_bytes),
    format: r.format as string,
    mimeType: r.mime_type as string,
    timesUsed: num(r.times_used),
    lastUsedAt: (r.last_used_at as Date | null) ?? null,
    createdAt: r.created_at as Date,
    updatedAt: r.updated_at as Date,
  };
}

export function toProduct(row: ProductRow, storage: ObjectStorage): Product {
  return {
    id: row.id,
    productName: row.productName,
    productDescription: strOrUndef(row.productDescription),
    productUrl: row.productUrl,
    tags: row.tags,
    timesUsed: row.timesUsed,
    lastUsedAt: isoOrUndef(row.lastUsedAt),
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
    fullUrl: storage.publicUrl(row.objectKey),
    thumbnailUrl: storage.publicUrl(row.objectThumbnailKey),
    width: row.width,
    height: row.height,
    sizeBytes: row.sizeBytes,
    thumbnailSizeBytes: row.thumbnailSizeBytes,
    format: row.format,
    mimeType: row.mimeType,
    objectKey: row.objectKey,
    objectThumbnailKey: row.objectThumbnailKey,
  };
}

export const productNotFound = (): AppError => notFound('Product not found');
const duplicateName = (name: string): AppError =>
  conflict(`Product with name ${name} already exists. Use a different name or update the existing product.`);
const invalidUrl = (): AppError => badRequest('Product URL must be a valid HTTP or HTTPS URL');

const PRODUCTS = {
  table: 'products',
  nameColumn: 'product_name',
  fromDb: productFromDb,
  notFound: productNotFound,
};

export async function findProduct(sql: Sql | TransactionSql, tenantId: string, identifier: string, forUpdate = false): Promise<ProductRow> {
  return findAsset(sql, PRODUCTS, tenantId, identifier, { forUpdate });
}

/** Tags are one comma-separated string; every tag is at most 50 characters. */
function validateTags(p: Problems, tags: string | null | undefined): void {
  if (typeof tags !== 'string') return;
  tags.split(',').forEach((t, i) => {
    if (t.trim().length > LIMITS.tagLength) p.add(`tags[${i}] must be at most ${LIMITS.tagLength} characters`);
  });
}

function validateName(p: Problems, name: string | null | undefined): void {
  const n = (name ?? '').trim();
  if (n.length === 0) p.add('product_name cannot be empty');
  p.maxLength('product_name', n, LIMITS.productName);
}

/**
 * A product's image is stored bytes like any library image: ImageStored (operation 'product') in the
 * transaction that inserts the row, ImageDeleted in the one that deletes it, so usage metering bills it
 * and platform storage totals drop again when it goes. The event's image_id is the product id.
 */
async function productStored(tx: TransactionSql, config: Config, tenantId: string, row: ProductRow, call: CallContext): Promise<void> {
  await writeImageStored(tx, config.eventsPrefix, {
    tenantId,
    imageId: row.id,
    sizeBytes: row.sizeBytes,
    thumbnailSizeBytes: row.thumbnailSizeBytes,
    createdAt: row.createdAt,
    modelId: '',
    operation: 'product',
    sessionId: call.principal.sessionId ?? '',
    keyType: call.principal.keyType || 'live',
  });
}

async function productDeleted(tx: TransactionSql, config: Config, tenantId: string, row: ProductRow): Promise<void> {
  await writeImageDeleted(tx, config.eventsPrefix, { ...row, tenantId, imageId: row.id });
}

const CREATED_ORDER = assetOrders('product_name').created;

export function productHandlers(deps: {
  sql: Sql;
  storage: ObjectStorage;
  config: Config;
  quota: QuotaGuard;
  logger: Logger;
  cursorKey: Buffer;
}) {
  const { sql, storage, quota, config } = deps;
  return {
    async listProducts(req: ListProductsRequest, call: CallContext): Promise<ListProductsResponse> {
      const tenantId = tenantOf(call);
      const page = req.page || 1;
      const pageSize = req.pageSize || LIMITS.productPageSizeDefault;
      const p = new Problems();
      if (page < 1) p.add('page must be >= 1');
      if (pageSize < 1 || pageSize > LIMITS.listMax) p.add(`page_size must be between 1 and ${LIMITS.listMax}`);
      p.maxLength('search', req.search, LIMITS.searchQuery);
      p.throwIf(invalidPayload);
      const where = assetListWhere(sql, 'products', tenantId, req.search);
      const [{ total }] = await sql`SELECT count(*)::int AS total FROM products WHERE ${where}`;
      const offset = (page - 1) * pageSize;
      // A cursor continues from the previous page whatever its number: only page 1 (or none) goes with one.
      const rows = await keysetPage({
        sql,
        tenantId,
        cursorKey: deps.cursorKey,
        table: 'products',
        where,
        order: CREATED_ORDER,
        sort: 'products:created',
        limit: pageSize,
        offset,
        cursor: req.cursor,
        offsetField: 'page',
      });
      return {
        products: rows.rows.map((r) => toProduct(productFromDb(r), storage)),
        page,
        pageSize,
        total: num(total),
        hasMore: rows.hasMore,
        nextCursor: rows.nextCursor,
      };
    },

    async getProduct(req: GetAssetRequest, call: CallContext): Promise<Product> {
      return toProduct(await findProduct(sql, tenantOf(call), req.identifier), storage);
    },

    async createProduct(req: CreateProductRequest, call: CallContext): Promise<Product> {
      const tenantId = tenantOf(call);
      const p = new Problems();
      validateName(p, req.productName);
      p.maxLength('product_description', req.productDescription, LIMITS.productDescription);
      validateTags(p, req.tags);
      p.throwIf(invalidPayload);
      const name = req.productName.trim();
      const url = (req.productUrl ?? '').trim();
      let parsed: URL | undefined;
      try {
        parsed = new URL(url);
      } catch {}
      if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) throw invalidUrl();
      // Cheap duplicate check before fetching anything; the unique constraint is the authority.
      const [dup] = await sql`SELECT 1 FROM products WHERE tenant_id = ${tenantId} AND product_name = ${name}`;
      if (dup) throw duplicateName(name);

      const fetched = await fetchImage(url, { invalidUrl, logger: call.logger, allowLoopback: config.allowLoopbackFetch });
      const img = await processImage(fetched.data);
      await quota.check(tenantId, fetched.data.length + img.thumbnail.length, call);

      const base = randomUUID();
      const objectKey = tenantKey(tenantId, 'products', `${base}.${img.ext}`);
      const thumbKey = tenantKey(tenantId, 'products', 'thumbnails', `${base}.webp`);
      // Keys scheduled for removal before the files exist, claimed by the row's transaction (object-gc.ts):
      // a crash in between leaves nothing behind for longer than the grace period.
      const keys = [objectKey, thumbKey];
      await scheduleRemoval(sql, keys, OBJECT_GC_GRACE_MS);
      await Promise.all([
        storage.put(objectKey, fetched.data, img.mimeType),
        storage.put(thumbKey, img.thumbnail, THUMBNAIL_MIME_TYPE),
      ]).catch(async (err) => {
        await removeObjects({ sql, storage, logger: call.logger }, keys);
        throw err;
      });
      try {
        const row = await sql.begin(async (tx) => {
          await claimKeys(tx, keys);
          const [r] = await tx`
            INSERT INTO products (tenant_id, product_name, product_description, product_url, tags, object_key, object_thumbnail_key,
              width, height, size_bytes, thumbnail_size_bytes, format, mime_type)
            VALUES (${tenantId}, ${name}, ${req.productDescription ?? null}, ${url}, ${(req.tags ?? '').trim()}, ${objectKey}, ${thumbKey},
              ${img.width}, ${img.height}, ${fetched.data.length}, ${img.thumbnail.length}, ${img.format}, ${img.mimeType})
            RETURNING *`;
          const created = productFromDb(r);
          await productStored(tx, config, tenantId, created, call);
          return created;
        });
        return toProduct(row, storage);
      } catch (err) {
        await removeObjects({ sql, storage, logger: call.logger }, keys);
        if (isUniqueViolation(err)) throw duplicateName(name);
        throw err;
      }
    },

    async updateProduct(req: UpdateProductRequest, call: CallContext): Promise<Product> {
      const tenantId = tenantOf(call);
      const present = new Set(req.presentFields);
      const has = (f: string) => present.has(f);
      const p = new Problems();
      if (has('product_name')) validateName(p, req.productName);
      p.maxLength('product_description', req.productDescription, LIMITS.productDescription);
      validateTags(p, req.tags);
      p.throwIf(invalidPayload);
      const name = has('product_name') ? (req.productName ?? '').trim() : undefined;
      try {
        const row = await sql.begin(async (tx) => {
          const cur = await findProduct(tx, tenantId, req.identifier, true);
          const [r] = await tx`
            UPDATE products SET
              product_name = ${name ?? cur.productName},
              product_description = ${has('product_description') ? (req.productDescription ?? null) : cur.productDescription},
              tags = ${has('tags') ? (req.tags ?? '').trim() : cur.tags},
              updated_at = now()
            WHERE tenant_id = ${tenantId} AND id = ${cur.id}
            RETURNING *`;
          return productFromDb(r);
        });
        return toProduct(row, storage);
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(name ?? '');
        throw err;
      }
    },

    async deleteProduct(req: GetAssetRequest, call: CallContext): Promise<DeleteAssetResponse> {
      const tenantId = tenantOf(call);
      const row = await sql.begin(async (tx) => {
        const found = await findProduct(tx, tenantId, req.identifier, true);
        await tx`DELETE FROM products WHERE tenant_id = ${tenantId} AND id = ${found.id}`;
        await productDeleted(tx, config, tenantId, found);
        await scheduleDeletedObjects(tx, [found.objectKey, found.objectThumbnailKey], config.objectDeleteGraceMs);
        return found;
      });
      // The product's own image goes; generated images (library rows with product_reference_id) stay.
      await removeDeletedObjects(
        { sql, storage, logger: call.logger },
        [row.objectKey, row.objectThumbnailKey],
        config.objectDeleteGraceMs,
      );
      return { deleted: true };
    },
  };
}
