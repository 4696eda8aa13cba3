/**
 * Cursor paging checks of the asset lists (issue 16: characters, scenes, style presets, products): rows seeded
 * straight into the library schema with ties on every sort key, then the list walked by offset (or page) and by
 * `cursor`, which must list the same rows in the same order.
 */
import { createDb, type Sql } from '@imagegen/platform';
import { expect } from 'vitest';
import type { TestStack, TestTenant } from '../support/stack.js';

/**
 * Runs `fn` with two fresh tenants (A pages, B owns the foreign cursors' rows) and a connection to the library
 * schema, where the rows are seeded straight; the connection is closed after.
 */
export async function withSeededTenants(s: TestStack, fn: (sql: Sql, a: TestTenant, b: TestTenant) => Promise<void>): Promise<void> {
  const sql = createDb(s.env.DATABASE_URL as string, { schema: 'library', max: 1 });
  try {
    const [a, b] = await Promise.all([
      s.createTenant({ rate_limit_per_minute: 100000 }),
      s.createTenant({ rate_limit_per_minute: 100000 }),
    ]);
    await fn(sql, a, b);
  } finally {
    await sql.end();
  }
}

/**
 * Timestamps with microseconds (a cursor must keep them): groups of 4 rows share created_at, 3 in 4 rows are used
 * (groups of 5 share last_used_at) and times_used takes 3 values, so every sort order has ties down to the id.
 */
export const TIMES = (sql: Sql) => ({
  created: sql`timestamptz '2026-01-01 00:00:00.123456+00' - (g / 4) * interval '1 microsecond'`,
  lastUsed: sql`CASE WHEN g % 4 = 0 THEN NULL ELSE timestamptz '2026-02-01 00:00:00.654321+00' - (g % 5) * interval '7 microseconds' END`,
  timesUsed: sql`g % 3`,
  /** knight0, Knight0, KNIGHT0, knight1, ...: names tied by lower(). */
  name: sql`(ARRAY['knight', 'Knight', 'KNIGHT'])[g % 3 + 1] || (g / 3)::text`,
});

export interface PagedList {
  /** e.g. '/api/characters?sort_by=used' */
  url: string;
  size: number;
  /** offset paging (limit/offset) or page paging (page_size/page, products). */
  style: 'offset' | 'page';
}

const ids = (body: { data: { id: number }[] }) => body.data.map((x) => x.id);
const join = (url: string, q: string) => `${url}${url.includes('?') ? '&' : '?'}${q}`;

/** The ids of a list walked by offset (or page), and walked by cursor, with the number of cursor pages. */
export async function walkBoth(s: TestStack, key: string, list: PagedList) {
  const sized = join(list.url, `${list.style === 'page' ? 'page_size' : 'limit'}=${list.size}`);
  const byOffset: number[] = [];
  for (let i = 0; ; i++) {
    const r = await s.api(join(sized, list.style === 'page' ? `page=${i + 1}` : `offset=${i * list.size}`), { key });
    expect(r.status).toBe(200);
    if (r.body.data.length === 0) break;
    byOffset.push(...ids(r.body));
  }
  const byCursor: number[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r = await s.api(cursor ? join(sized, `cursor=${encodeURIComponent(cursor)}`) : sized, { key });
    expect(r.status).toBe(200);
    byCursor.push(...ids(r.body));
    cursor = r.body.pagination.nextCursor;
    if ('hasMore' in r.body.pagination) expect(r.body.pagination.hasMore).toBe(cursor !== null);
    pages++;
  } while (cursor && pages < 100);
  return { byOffset, byCursor, pages };
}

/** Walks `list` both ways: the same `count` distinct rows in the same order, in ceil(count / size) cursor pages. */
export async function expectCursorEqualsOffset(s: TestStack, key: string, list: PagedList, count: number) {
  const { byOffset, byCursor, pages } = await walkBoth(s, key, list);
  expect(new Set(byOffset).size).toBe(count);
  expect(byCursor).toEqual(byOffset);
  expect(pages).toBe(Math.ceil(count / list.size));
}

/** The first page's nextCursor of `url` (which must have a second page). */
export async function firstCursor(s: TestStack, key: string, url: string): Promise<string> {
  const r = await s.api(url, { key });
  expect(r.status).toBe(200);
  expect(typeof r.body.pagination.nextCursor).toBe('string');
  return r.body.pagination.nextCursor;
}

/** 400 'Invalid request payload' with `details` for `url` + `cursor`. */
export async function expectRefused(s: TestStack, key: string, url: string, cursor: string, details = ['cursor is invalid']) {
  const r = await s.api(join(url, `cursor=${encodeURIComponent(cursor)}`), { key });
  expect(r.status).toBe(400);
  expect(r.body).toEqual({ error: 'Invalid request payload', details });
}

/** The cursor with one character of its signed body changed. */
export const tampered = (cursor: string) => `${cursor.slice(0, 5)}${cursor[5] === 'A' ? 'B' : 'A'}${cursor.slice(6)}`;
