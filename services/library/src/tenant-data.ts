import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import { bind, type GrpcServiceBinding, type ObjectStorage, type Sql, tenantDataHandlers } from '@imagegen/platform';

const PAGE = 500;

/**
 * The library's part of a tenant's export and purge (issue 40, item 4). The purge removes each page of rows'
 * objects before the rows themselves, so a purge killed between the two leaves rows that a rerun finds again
 * (deleting a missing object is not an error), never an object no row names.
 */
export function libraryTenantData(sql: Sql, storage: ObjectStorage): GrpcServiceBinding {
  const newestFirst = [
    { column: 'created_at', type: 'timestamptz' },
    { column: 'id', type: 'bigint' },
  ];

  /** Pages `table`'s rows of the tenant: objects first, then the rows. */
  const withObjects = (table: string, keyColumns: string[]) => async (tenantId: string) => {
    let rows = 0;
    let objects = 0;
    for (;;) {
      const page = await sql.unsafe<{ id: string; keys: (string | null)[] }[]>(
        `SELECT id, ARRAY[${keyColumns.join(', ')}] AS keys FROM ${table} WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT ${PAGE}`,
        [tenantId],
      );
      if (page.length === 0) break;
      const keys = page.flatMap((r) => r.keys.filter((k): k is string => !!k));
      await storage.deleteMany(keys);
      objects += keys.length;
      const r = await sql.unsafe(`DELETE FROM ${table} WHERE tenant_id = $1 AND id = ANY($2::bigint[])`, [tenantId, page.map((p) => p.id)]);
      rows += r.count;
    }
    return { rows: { [table]: rows }, objects };
  };

  /** Objects scheduled for removal under the tenant's prefix (tenants/<id>/...): removed now. */
  const scheduled = async (tenantId: string) => {
    const lo = `tenants/${tenantId}/`;
    const hi = `tenants/${tenantId}0`; // '0' follows '/' bytewise (the range is read in the "C" collation)
    let rows = 0;
    for (;;) {
      const page = await sql<{ object_key: string }[]>`
        SELECT object_key FROM object_gc WHERE (object_key COLLATE "C") >= ${lo} AND (object_key COLLATE "C") < ${hi}
        ORDER BY object_key COLLATE "C" LIMIT ${PAGE}`;
      if (page.length === 0) break;
      const keys = page.map((p) => p.object_key);
      await storage.deleteMany(keys);
      rows += (await sql`DELETE FROM object_gc WHERE object_key = ANY(${keys})`).count;
    }
    return { rows: { object_gc: rows }, objects: rows };
  };

  return bind(
    TenantDataServiceService,
    tenantDataHandlers({
      sql,
      schema: 'library',
      tables: [
        { name: 'sessions', key: [{ column: 'session_id', type: 'text' }] },
        { name: 'images', key: newestFirst, desc: true },
        { name: 'characters', key: newestFirst, desc: true },
        { name: 'products', key: newestFirst, desc: true },
        { name: 'scenes', key: newestFirst, desc: true },
        { name: 'style_presets', key: [{ column: 'name', type: 'text' }] },
        { name: 'search_presets', key: [{ column: 'preset_name', type: 'text' }] },
      ],
      purgeFirst: [
        withObjects('images', ['object_key', 'thumbnail_key']),
        withObjects('pending_images', ['object_key', 'thumbnail_key']),
        withObjects('products', ['object_key', 'object_thumbnail_key']),
        scheduled,
      ],
      // After the images: their delete triggers update these counters.
      purgeOrder: ['sessions', 'image_day_counts', 'tenant_stats'],
    }),
  );
}
