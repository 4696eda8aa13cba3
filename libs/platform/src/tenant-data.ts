import type { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import type { Sql } from './db.js';
import { badRequest, forbidden } from './errors.js';
import type { CallContext, Handlers } from './grpc.js';

/**
 * A tenant's data in one service's schema (issue 40, item 4): the export's keyset-paged reads and the purge.
 * Each service that keeps tenant rows binds `tenantDataHandlers` beside its own gRPC service, naming the tables
 * it exports and how to remove what rows name outside the database (the library's objects).
 */

export interface ExportTable {
  name: string;
  /** Keyset columns, in the order of an index that starts with tenant_id (so a page reads one index range). */
  key: { column: string; type: string }[];
  /** Newest first, when the index is descending. */
  desc?: boolean;
  /** Columns never exported (secrets, hashes). */
  omit?: string[];
  /** Extra fields of each row: name -> SQL expression over the row alias `t` (e.g. an execution's logs). */
  extra?: Record<string, string>;
}

export interface TenantDataOptions {
  sql: Sql;
  schema: string;
  tables: ExportTable[];
  /**
   * Steps run before the generic removal, in order: each removes rows (and what they name) of one concern and
   * returns the rows removed per table and the objects removed. Each must be idempotent.
   */
  purgeFirst?: ((tenantId: string) => Promise<{ rows: Record<string, number>; objects: number }>)[];
  /** Tables removed in this order before any other table of the schema with a tenant_id column. */
  purgeOrder?: string[];
  /**
   * Tables whose rows go with their parent's (an ON DELETE CASCADE foreign key to a table a purgeFirst step empties):
   * never scanned by tenant_id afterwards, since they have no index on it (every other tenant table has one that
   * starts with tenant_id, test/e2e/tenant-data.test.ts checks it).
   */
  cascaded?: string[];
  /** Tables never purged here (the audit log; tenancy's tenants row, removed by its own last step). */
  keep?: string[];
  /** The last step (tenancy: the tenant row itself, with its TenantChanged event). */
  purgeLast?: (tenantId: string) => Promise<Record<string, number>>;
}

const PAGE_MAX = 1000;
const DELETE_BATCH = 5000;

function mayExport(ctx: CallContext, tenantId: string): void {
  const p = ctx.principal;
  if (p.adminRole === 'super_admin') return;
  if (p.tenantId && p.tenantId === tenantId && !p.adminRole) return;
  throw forbidden('Insufficient permissions');
}

function mayPurge(ctx: CallContext): void {
  if (ctx.principal.adminRole !== 'super_admin') throw forbidden('Insufficient permissions');
}

/** Every table of the schema with a tenant_id column (information_schema), so a new table is purged too. */
export async function tenantTables(sql: Sql, schema: string): Promise<string[]> {
  const rows = await sql<{ table_name: string }[]>`
    SELECT c.table_name FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema = ${schema} AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'
    ORDER BY c.table_name`;
  return rows.map((r) => r.table_name);
}

/** Removes every row of `table` of the tenant, in batches (short transactions); returns how many. */
export async function deleteTenantRows(sql: Sql, schema: string, table: string, tenantId: string): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await sql.unsafe(
      `DELETE FROM "${schema}"."${table}" WHERE ctid = ANY(ARRAY(SELECT ctid FROM "${schema}"."${table}" WHERE tenant_id = $1 LIMIT ${DELETE_BATCH}))`,
      [tenantId],
    );
    total += r.count;
    if (r.count < DELETE_BATCH) return total;
  }
}

export function tenantDataHandlers(opts: TenantDataOptions): Handlers<typeof TenantDataServiceService> {
  const { sql, schema } = opts;
  const byName = new Map(opts.tables.map((t) => [t.name, t]));
  const queries = new Map(
    opts.tables.map((t) => {
      const dir = t.desc ? 'DESC' : 'ASC';
      const cols = t.key.map((k) => `t."${k.column}"`);
      const omit = (t.omit ?? []).map((c) => `'${c}'`).join(', ');
      const extra = Object.entries(t.extra ?? {})
        .map(([name, expr]) => `'${name}', ${expr}`)
        .join(', ');
      const row = `(to_jsonb(t) - ARRAY[${omit}]::text[])${extra ? ` || jsonb_build_object(${extra})` : ''}`;
      const key = `jsonb_build_array(${cols.map((c) => `${c}::text`).join(', ')})`;
      const base = `SELECT ${row} AS row, ${key} AS k FROM "${schema}"."${t.name}" t WHERE t.tenant_id = $1`;
      const after = `(${cols.join(', ')}) ${t.desc ? '<' : '>'} (${t.key.map((k, i) => `$${i + 3}::${k.type}`).join(', ')})`;
      const order = `ORDER BY ${cols.map((c) => `${c} ${dir}`).join(', ')} LIMIT $2`;
      return [t.name, { first: `${base} ${order}`, next: `${base} AND ${after} ${order}`, keys: t.key.length }];
    }),
  );

  return {
    async listExportTables() {
      return { tables: opts.tables.map((t) => t.name) };
    },

    async exportRows(req, ctx) {
      mayExport(ctx, req.tenantId);
      const q = queries.get(req.table);
      if (!q || !byName.has(req.table)) throw badRequest('Invalid request payload', [`unknown table ${req.table}`]);
      const limit = Math.min(Math.max(req.limit || 500, 1), PAGE_MAX);
      let rows: { row: unknown; k: string[] }[];
      if (!req.after) {
        rows = (await sql.unsafe(q.first, [req.tenantId, limit])) as unknown as typeof rows;
      } else {
        let after: unknown;
        try {
          after = JSON.parse(req.after);
        } catch {
          after = undefined;
        }
        if (!Array.isArray(after) || after.length !== q.keys) throw badRequest('Invalid request payload', ['after is not a cursor']);
        rows = (await sql.unsafe(q.next, [req.tenantId, limit, ...(after as string[])])) as unknown as typeof rows;
      }
      return {
        rows: rows.map((r) => JSON.stringify(r.row)),
        nextAfter: rows.length === limit ? JSON.stringify(rows[rows.length - 1]?.k) : '',
      };
    },

    async purgeTenantData(req, ctx) {
      mayPurge(ctx);
      if (!req.tenantId) throw badRequest('Invalid request payload', ['tenant_id is required']);
      const removed: Record<string, number> = {};
      let objects = 0;
      const add = (rows: Record<string, number>) => {
        for (const [t, n] of Object.entries(rows)) removed[t] = (removed[t] ?? 0) + n;
      };
      for (const step of opts.purgeFirst ?? []) {
        const r = await step(req.tenantId);
        add(r.rows);
        objects += r.objects;
      }
      const keep = new Set([...(opts.keep ?? []), ...(opts.cascaded ?? [])]);
      const all = await tenantTables(sql, schema);
      const ordered = [
        ...(opts.purgeOrder ?? []).filter((t) => all.includes(t)),
        ...all.filter((t) => !(opts.purgeOrder ?? []).includes(t)),
      ];
      for (const table of ordered) {
        if (keep.has(table)) continue;
        add({ [table]: await deleteTenantRows(sql, schema, table, req.tenantId) });
      }
      if (opts.purgeLast) add(await opts.purgeLast(req.tenantId));
      return { rowsRemoved: removed, objectsRemoved: objects };
    },
  };
}
