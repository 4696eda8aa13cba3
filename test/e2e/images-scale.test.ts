import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedImages } from '../bench/library.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 16 through the gateway: `cursor` / `pagination.nextCursor` and `totalIsExact` on GET /api/images, the
 * cursor refused with 400 when changed or another tenant's, and a client that disconnects cancels its SQL.
 */
let s: TestStack;
let A: TestTenant;
let B: TestTenant;
let db: Sql;

beforeAll(async () => {
  s = await startTestStack();
  [A, B] = await Promise.all([s.createTenant({ rate_limit_per_minute: 100000 }), s.createTenant({ rate_limit_per_minute: 100000 })]);
  await seedImages(s.env.DATABASE_URL, A.tenantId, 45);
  await seedImages(s.env.DATABASE_URL, B.tenantId, 3);
  db = createDb(s.env.DATABASE_URL, { schema: 'library', max: 2, applicationName: 'images-scale-test' });
});
afterAll(async () => {
  await db?.end();
  await s?.stop();
});

const ids = (body: { data: { id: number }[] }) => body.data.map((i) => i.id);

describe('GET /api/images cursor paging', () => {
  it('nextCursor continues where the page ended, like offset, to the last page', async () => {
    const all = await s.api('/api/images?limit=100', { key: A.liveKey });
    expect(all.body.pagination).toEqual({ total: 45, limit: 100, offset: 0, totalIsExact: true, nextCursor: null });
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await s.api(`/api/images?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key: A.liveKey });
      expect(r.status).toBe(200);
      expect(r.body.pagination).toMatchObject({ total: 45, limit: 20, offset: 0, totalIsExact: true });
      seen.push(...ids(r.body));
      cursor = r.body.pagination.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids(all.body));
    // With a filter: the cursor keeps the filter's order.
    const f = await s.api('/api/images?limit=2&search=number%201', { key: A.liveKey });
    const f2 = await s.api(`/api/images?limit=2&search=number%201&cursor=${encodeURIComponent(f.body.pagination.nextCursor)}`, {
      key: A.liveKey,
    });
    const byOffset = await s.api('/api/images?limit=2&offset=2&search=number%201', { key: A.liveKey });
    expect(ids(f2.body)).toEqual(ids(byOffset.body));
  });

  it('refuses a changed cursor, another tenant cursor and cursor with offset: 400 with details', async () => {
    const r = await s.api('/api/images?limit=5', { key: A.liveKey });
    const cursor: string = r.body.pagination.nextCursor;
    const changed = `${cursor.slice(0, 3)}${cursor[3] === 'A' ? 'B' : 'A'}${cursor.slice(4)}`;
    for (const [key, c] of [
      [A.liveKey, changed],
      [B.liveKey, cursor],
      [A.liveKey, 'not-a-cursor'],
    ]) {
      const bad = await s.api(`/api/images?cursor=${encodeURIComponent(c)}`, { key });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ error: 'Invalid request payload', details: ['cursor is invalid'] });
    }
    const both = await s.api(`/api/images?offset=5&cursor=${encodeURIComponent(cursor)}`, { key: A.liveKey });
    expect(both.status).toBe(400);
    expect(both.body).toEqual({ error: 'Invalid request payload', details: ['cursor and offset cannot be combined'] });
  });
});

describe('abandoned requests', () => {
  /** The library's list statements running now. */
  const running = () =>
    db`SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'active' AND (query LIKE 'WITH tot AS%' OR query LIKE 'SELECT total, walked%') AND pid <> pg_backend_pid()`;

  it("a client that disconnects cancels its request's SQL", async () => {
    // The table is held, so the list statement waits until something cancels it (or the lock goes).
    const blocker = await db.reserve();
    try {
      await blocker`BEGIN`;
      await blocker`LOCK TABLE images IN ACCESS EXCLUSIVE MODE`;
      const client = new AbortController();
      const req = fetch(`${s.baseUrl}/api/images?search=lighthouse`, { headers: { 'x-api-key': A.liveKey }, signal: client.signal }).catch(
        (e) => e,
      );
      await waitFor(async () => (await running()).length === 1, { timeout: 5000, message: 'the list statement running' });
      client.abort();
      expect(await req).toBeInstanceOf(Error);
      // Gone while the lock is still held: cancelled, not finished.
      await waitFor(async () => (await running()).length === 0, { timeout: 3000, message: 'the list statement gone' });
    } finally {
      await blocker`ROLLBACK`;
      blocker.release();
    }
    // The service keeps serving.
    expect((await s.api('/api/images?limit=1', { key: A.liveKey })).status).toBe(200);
  });
});
