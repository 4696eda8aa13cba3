import type { Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import {
  chooseSearchPlan,
  DAY_SKIP_MIN_OFFSET,
  listImages,
  listImagesSql,
  type SearchPlan,
  TOTAL_WINDOW,
} from '../src/images/list-query.js';
import { type LibraryHarness, startLibrary } from './support.js';

/**
 * Issue 16: how list queries find their rows at scale. A search chooses per call between walking the list-order
 * index and the trigram index (list-query.ts SEARCH_WALK_ROWS); a deep unfiltered offset skips whole days by
 * their counts (image_day_counts, migration 160). Each must return exactly the rows of the plain query.
 */
let h: LibraryHarness;

beforeAll(async () => {
  h = await startLibrary();
});
afterAll(async () => {
  await h?.stop();
});

/** `n` rows `minutes` apart back from `start`, prompt 'p<i> owl' for every fourth row, else 'p<i> cat'. */
async function bulk(sql: Sql, tenant: string, n: number, minutes: number, start = '2025-06-01T00:00:00Z'): Promise<void> {
  await sql`
    INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
      thumbnail_size_bytes, prompt, operation, created_at)
    SELECT ${tenant}, 's1', 'tenants/' || ${tenant} || '/images/' || i || '.png', 'tenants/' || ${tenant} || '/thumbnails/' || i || '.webp',
      'image/png', 'png', 1, 1, 1000 + i, 1, 'p' || i || CASE WHEN i % 4 = 0 THEN ' owl' ELSE ' cat' END, 'generate',
      ${start}::timestamptz - make_interval(mins => i * ${minutes})
    FROM generate_series(1, ${n}) i`;
}

/**
 * VACUUM (ANALYZE) of images, again until every page is all-visible. One VACUUM may leave pages unmarked while
 * another connection's snapshot is older than their rows (this database's autovacuum ANALYZE after the bulk insert,
 * the library's own background statements), and an index-only scan then reads the heap.
 */
const vacuumUntilAllVisible = (sql: Sql) =>
  waitFor(async () => {
    await sql`VACUUM (ANALYZE) images`;
    const [r] = await sql`SELECT relpages, relallvisible FROM pg_class WHERE oid = 'images'::regclass`;
    return Number(r.relallvisible) >= Number(r.relpages);
  });

/** Ids of the plain query (no day skip): the whole list in order. */
async function plainIds(tenant: string, order: 'DESC' | 'ASC'): Promise<number[]> {
  const rows = await h.sql.unsafe(`SELECT id FROM images WHERE tenant_id = $1 ORDER BY created_at ${order}, id ${order}`, [tenant]);
  return rows.map((r) => Number(r.id));
}

interface PlanNode {
  'Node Type'?: string;
  'Index Name'?: string;
  'Heap Fetches'?: number;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  Filter?: string;
  'Recheck Cond'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** Every node of the EXPLAIN (ANALYZE, FORMAT JSON) plan of a list query, the root first. */
async function planNodes(q: { text: string; values: unknown[] }): Promise<PlanNode[]> {
  const [r] = await h.sql.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`, q.values as never[]);
  const [root] = (r?.['QUERY PLAN'] ?? []) as { Plan: PlanNode }[];
  if (!root) throw new Error('no plan');
  const out: PlanNode[] = [];
  const visit = (n: PlanNode) => {
    out.push(n);
    for (const c of n.Plans ?? []) visit(c);
  };
  visit(root.Plan);
  return out;
}

/** Which way the search ran: the conditions of the EXPLAIN ANALYZE nodes that executed. */
async function executed(tenant: string, search: string, searchPlan: SearchPlan): Promise<{ walk: boolean; trigram: boolean }> {
  const out = { walk: false, trigram: false };
  for (const n of await planNodes(listImagesSql(tenant, { search }, {}, { searchPlan }))) {
    if ((n['Actual Loops'] ?? 0) === 0) continue;
    for (const cond of [n.Filter, n['Recheck Cond'], n['Index Cond']]) {
      // The walk tests rows with the CASE form; the trigram way with the plain match (lower(prompt) LIKE).
      if (cond?.includes('CASE WHEN')) out.walk = true;
      else if (cond?.includes('lower(prompt) ~~')) out.trigram = true;
    }
  }
  return out;
}

describe('search plan (walk or trigram index)', () => {
  it('walks for a frequent word and reads the trigram index for a rare one, in a tenant past the window', async () => {
    const T = 'tPlans';
    await bulk(h.sql, T, TOTAL_WINDOW * 2, 1);
    await h.sql`ANALYZE images`;
    // 'owl': every fourth row, the page is found after ~84 rows.
    expect(await chooseSearchPlan(h.sql, T, { search: 'owl' })).toBe('walk');
    // ... but not 3,000 matches deep: that walk would read ~12,000 rows (2,000 deep: ~8,000, still a walk).
    expect(await chooseSearchPlan(h.sql, T, { search: 'owl' }, { offset: 2000 })).toBe('walk');
    expect(await chooseSearchPlan(h.sql, T, { search: 'owl' }, { offset: 3000 })).toBe('trigram');
    // 'p3999 ': one row, past the window: walking would read 4,000 rows for it.
    expect(await chooseSearchPlan(h.sql, T, { search: 'p3999 ' })).toBe('trigram');
    // No choice with a narrow filter (its index serves) or without a search.
    expect(await chooseSearchPlan(h.sql, T, { search: 'p3999 ', sessionId: 's1' })).toBeUndefined();
    expect(await chooseSearchPlan(h.sql, T, { aspectRatio: '1:1' })).toBeUndefined();
    // Each plan runs the way it says.
    expect(await executed(T, 'owl', 'walk')).toEqual({ walk: true, trigram: false });
    expect(await executed(T, 'p3999 ', 'trigram')).toEqual({ walk: false, trigram: true });
    // The trigram way reads the (tenant, trigram) key index (migration 190).
    const q = listImagesSql(T, { search: 'p3999 ' }, {}, { searchPlan: 'trigram' });
    const [plan] = await h.sql.unsafe(`EXPLAIN (FORMAT JSON) ${q.text}`, q.values as never[]);
    expect(JSON.stringify(plan)).toContain('"Index Name":"images_prompt_trgm_keys"');
    // Without three letters or digits in a row there are no keys to read: a rare search walks.
    expect(await chooseSearchPlan(h.sql, T, { search: 'zz' })).toBe('walk');
    expect(await chooseSearchPlan(h.sql, T, { search: 'p3999 zz', searchMode: 'any' })).toBe('walk');
    expect(await chooseSearchPlan(h.sql, T, { search: 'p3999 zz', searchMode: 'all' })).toBe('trigram');
    const rare = await listImages(h.sql, T, { search: 'p3999 ' });
    expect(rare.rows.map((r) => r.prompt)).toEqual(['p3999 cat']);
    // A small list (inside the window) always walks.
    await bulk(h.sql, 'tPlansSmall', 100, 1);
    expect(await chooseSearchPlan(h.sql, 'tPlansSmall', { search: 'p99 ' })).toBe('walk');
  });
});

describe('a search with a rare filter', () => {
  it("reads the filter's partial index alone (the prompt is in it) and stops after the page", async () => {
    const T = 'tNarrowCover';
    await bulk(h.sql, T, 3000, 1);
    // Every tenth image a reference, of style preset 5 and of product 9; every fourth prompt says 'owl'.
    await h.sql`UPDATE images SET is_reference = true, style_preset_id = 5, product_reference_id = 9
      WHERE tenant_id = ${T} AND split_part(prompt, ' ', 1) ~ '0$'`;
    await vacuumUntilAllVisible(h.sql); // a table in steady state: its pages all-visible
    for (const [filters, index] of [
      [{ isReference: true }, 'images_tenant_reference_prompt'],
      [{ stylePresetId: 5 }, 'images_tenant_style_prompt'],
      [{ productReferenceId: 9 }, 'images_tenant_product_prompt'],
    ] as const) {
      const scans = (await planNodes(listImagesSql(T, { search: 'owl', ...filters }, { limit: 20 }))).filter((n) =>
        n['Node Type']?.includes('Scan'),
      );
      const narrow = scans.find((n) => n['Index Name'] === index);
      expect(narrow, JSON.stringify(scans.map(({ Plans: _, ...n }) => n))).toMatchObject({
        'Node Type': 'Index Only Scan',
        'Heap Fetches': 0,
      });
      // In page order, stopping after the page (21 of the 150 matching rows among 300 filtered ones), not all 300 read first.
      expect(narrow?.['Actual Rows']).toBe(21);
      expect((await listImages(h.sql, T, { search: 'owl', ...filters }, { limit: 20 })).rows).toHaveLength(20);
    }
  });
});

describe('statistics', () => {
  it('ANALYZE samples the default 30,000 rows of images: no column keeps a raised target (migration 250)', async () => {
    // Every ANALYZE samples 300 x the largest target, and computes each sampled row's trigram keys: the prompt's
    // target of 1000 (migration 150, read by no query since) made it 300,000 rows, 14.3 s at 2M images.
    const raised = await h.sql`
      SELECT attname, attstattarget FROM pg_attribute
      WHERE attrelid = 'images'::regclass AND attnum > 0 AND NOT attisdropped AND attstattarget > 0`;
    expect(raised.map((r) => r.attname)).toEqual([]);
  });
});

describe('deep offsets skip whole days (image_day_counts)', () => {
  const T = 'tDays';
  const check = async () => {
    for (const [sortBy, order] of [
      ['newest', 'DESC'],
      ['oldest', 'ASC'],
    ] as const) {
      const all = await plainIds(T, order);
      for (const offset of [DAY_SKIP_MIN_OFFSET + 1, 2500, 3333, all.length - 3, all.length - 1, all.length, all.length + 50]) {
        const page = await listImages(h.sql, T, { sortBy }, { limit: 7, offset });
        expect(
          page.rows.map((r) => r.id),
          `${sortBy} offset ${offset}`,
        ).toEqual(all.slice(offset, offset + 7));
        expect(page.total).toBe(all.length);
      }
    }
  };

  it('the same page as walking the offset, after inserts, deletes and moves', async () => {
    // 5,000 rows 37 minutes apart (about 128 days), rows exactly at midnight UTC and ties in created_at included.
    await bulk(h.sql, T, 5000, 37);
    await bulk(h.sql, T, 30, 1440, '2025-05-20T00:00:00Z');
    await bulk(h.sql, T, 20, 0, '2025-04-01T00:00:00Z');
    await check();
    await h.sql`DELETE FROM images WHERE tenant_id = ${T} AND id % 7 = 0`;
    await check();
    await h.sql`UPDATE images SET created_at = created_at - interval '3 days' WHERE tenant_id = ${T} AND id % 11 = 0`;
    await check();
    const [c] = await h.sql`SELECT sum(image_count)::int AS n FROM image_day_counts WHERE tenant_id = ${T}`;
    const [n] = await h.sql`SELECT count(*)::int AS n FROM images WHERE tenant_id = ${T}`;
    expect(c?.n).toBe(n?.n);
  });
});
