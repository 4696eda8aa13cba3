import { invalidPayload, type Sql } from '@imagegen/platform';
import { decodeKeysetCursor, encodeKeysetCursor } from '../images/cursor.js';

type Fragment = ReturnType<Sql['unsafe']>;
type Row = Record<string, unknown>;

/**
 * Keyset paging of the asset lists (issue 16): `cursor` continues after the last row of the previous page with one
 * row comparison on the sort key (ties broken by id), one range scan of an index (migrations 100 and 210) however
 * deep the page. Every order runs in one direction (all ASC or all DESC) so a single row comparison follows it;
 * last_used_at is ordered as coalesce(last_used_at, '-infinity') (the same order as DESC NULLS LAST).
 */
interface KeyOrder {
  /** ORDER BY list. */
  order: string;
  /** The sort key columns, in order (id excluded). */
  columns: string[];
  /** SQL type of each key value, for the cursor's text. */
  types: string[];
  /** The row comparison after the cursor: '>' for ascending orders, '<' for descending. */
  op: '>' | '<';
}

// Timestamps travel as text with microseconds (a JS Date would drop them).
// to_char gives NULL for -infinity (a never-used asset's last_used_at key): written out as '-infinity'.
const TS = (expr: string) => `coalesce(to_char(${expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '-infinity')`;
const LAST_USED = `coalesce(last_used_at, '-infinity'::timestamptz)`;

/** The orders of a named-asset list (SPEC 4.2/4.4 sort_by): name, created, used, recent. */
export function assetOrders(nameColumn: string): Record<string, KeyOrder> {
  return {
    name: {
      order: `lower(${nameColumn}) ASC, ${nameColumn} ASC, id ASC`,
      columns: [`lower(${nameColumn})`, nameColumn],
      types: ['text', 'text'],
      op: '>',
    },
    created: { order: 'created_at DESC, id DESC', columns: ['created_at'], types: ['timestamptz'], op: '<' },
    used: {
      order: `times_used DESC, ${LAST_USED} DESC, id DESC`,
      columns: ['times_used', LAST_USED],
      types: ['integer', 'timestamptz'],
      op: '<',
    },
    recent: {
      order: `${LAST_USED} DESC, created_at DESC, id DESC`,
      columns: [LAST_USED, 'created_at'],
      types: ['timestamptz', 'timestamptz'],
      op: '<',
    },
  };
}

export interface KeysetPageRequest {
  sql: Sql;
  tenantId: string;
  cursorKey: Buffer;
  table: string;
  /** The filter (tenant and search), without the position. */
  where: Fragment;
  order: KeyOrder;
  /** Bound into the cursor: the list and its order ('characters:name'). */
  sort: string;
  limit: number;
  offset: number;
  cursor?: string;
  /** The request field that cannot go with a cursor ('offset'; 'page' for products). */
  offsetField: string;
}

/** One page of rows (`limit` of them, after `offset` or after `cursor`), whether more follow, and the next cursor. */
export async function keysetPage(r: KeysetPageRequest): Promise<{ rows: Row[]; hasMore: boolean; nextCursor?: string }> {
  const { sql, order } = r;
  const cursor = r.cursor ? r.cursor : undefined;
  if (cursor !== undefined && r.offset) throw invalidPayload([`cursor and ${r.offsetField} cannot be combined`]);
  const at = cursor !== undefined ? decodeKeysetCursor(r.cursorKey, r.tenantId, r.sort, order.columns.length, cursor) : undefined;
  // Key expressions are this module's constants; values are parameters (`::text` first keeps microseconds).
  const keys = order.columns.map((c, i) => `${order.types[i] === 'timestamptz' ? TS(c) : `(${c})::text`} AS _k${i}`).join(', ');
  let after = sql``;
  if (at) {
    const values = at.values.map((v, i) => sql`${v}::text::${sql.unsafe(order.types[i])}`);
    const right = values.reduce((acc, v) => sql`${acc}${v}, `, sql``);
    after = sql`AND (${sql.unsafe(order.columns.join(', '))}, id) ${sql.unsafe(order.op)} (${right}${at.id}::bigint)`;
  }
  const offset = at ? 0 : r.offset;
  // A deep offset skips its rows by id alone (an index-only scan of the order's index when the list is unfiltered),
  // and only the page's rows are read whole with their keys. The page at a deep offset read every skipped row whole
  // before (docs/BENCHMARKS.md).
  const rows =
    offset > 0
      ? await sql`
        SELECT *, ${sql.unsafe(keys)} FROM ${sql(r.table)} WHERE id IN (
          SELECT id FROM ${sql(r.table)} WHERE ${r.where} ORDER BY ${sql.unsafe(order.order)} LIMIT ${r.limit + 1} OFFSET ${offset}
        ) ORDER BY ${sql.unsafe(order.order)}`
      : await sql`
        SELECT *, ${sql.unsafe(keys)} FROM ${sql(r.table)} WHERE ${r.where} ${after}
        ORDER BY ${sql.unsafe(order.order)} LIMIT ${r.limit + 1}`;
  const hasMore = rows.length > r.limit;
  const page = rows.slice(0, r.limit);
  const last = page.at(-1);
  const nextCursor =
    hasMore && last
      ? encodeKeysetCursor(
          r.cursorKey,
          r.tenantId,
          r.sort,
          order.columns.map((_, i) => String(last[`_k${i}`])),
          Number(last.id),
        )
      : undefined;
  return { rows: page as Row[], hasMore, nextCursor };
}
