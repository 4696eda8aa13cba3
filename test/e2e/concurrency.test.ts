/**
 * Requests racing each other through the whole stack (gateway -> services -> PostgreSQL): the session limit
 * at its edge, deletes of one image, bulk delete against single delete, tenant_stats under concurrent stores
 * and deletes, and concurrent creates and PATCHes of saved assets.
 */
import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { librarySeeder } from './images-seed.js';

let s: TestStack;
let t: TestTenant;
let seed: ReturnType<typeof librarySeeder>;
let sql: Sql;

beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  t = await s.createTenant();
  seed = librarySeeder(s);
  sql = createDb(s.env.DATABASE_URL as string, { schema: 'library', max: 2 });
});
afterAll(async () => {
  seed?.close();
  await sql?.end();
  await s?.stop();
});

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** tenant_stats (kept by triggers) against the real count of the tenant's images. */
async function statsMatch(tenantId: string) {
  const [{ n }] = await sql`SELECT count(*)::int AS n FROM images WHERE tenant_id = ${tenantId}`;
  const [st] = await sql`SELECT image_count FROM tenant_stats WHERE tenant_id = ${tenantId}`;
  expect(Number(st?.image_count ?? 0)).toBe(n);
  return n as number;
}

describe('session limit under concurrency', () => {
  it('two generations into a session at 999 images: exactly one is stored, the session ends at 1,000', async () => {
    const sid = 'edge-999';
    // 999 rows written directly (as a bulk seed does); the session row carries their count.
    await sql`INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height,
        size_bytes, thumbnail_size_bytes, operation)
      SELECT ${t.tenantId}, ${sid}, 'tenants/x/images/seed-' || g || '.png', 'tenants/x/thumbnails/seed-' || g || '.webp',
        'image/png', 'png', 1, 1, 1, 1, 'generate'
      FROM generate_series(1, 999) g`;
    await sql`INSERT INTO sessions (tenant_id, session_id, image_count) VALUES (${t.tenantId}, ${sid}, 999)`;
    const results = await Promise.all(
      [1, 2, 3].map((i) => s.api('/api/images', { key: t.liveKey, body: { prompt: `racing ${i}`, session_id: sid } })),
    );
    expect(sorted(results.map((r) => r.status))).toEqual([200, 400, 400]);
    const [sess] = await sql`SELECT image_count, is_active FROM sessions WHERE tenant_id = ${t.tenantId} AND session_id = ${sid}`;
    expect(sess).toMatchObject({ image_count: 1000, is_active: false });
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM images WHERE tenant_id = ${t.tenantId} AND session_id = ${sid}`;
    expect(n).toBe(1000);
    await statsMatch(t.tenantId);
  });
});

describe('deletes racing each other', () => {
  it('the same image deleted three times at once: one 204, two 404; files gone; counters exact', async () => {
    const img = await seed.store(t.tenantId, { sessionId: 'dels' });
    const rs = await Promise.all([1, 2, 3].map(() => s.api(`/api/images/${img.id}`, { method: 'DELETE', key: t.liveKey })));
    expect(sorted(rs.map((r) => r.status))).toEqual([204, 404, 404]);
    expect((await fetch(img.fullUrl)).status).toBe(404);
    expect((await fetch(img.thumbnailUrl)).status).toBe(404);
    const [sess] = await sql`SELECT image_count FROM sessions WHERE tenant_id = ${t.tenantId} AND session_id = 'dels'`;
    expect(sess.image_count).toBe(0);
    await statsMatch(t.tenantId);
  });

  it('bulk delete racing a single delete: each image is deleted exactly once', async () => {
    const [a, b] = await Promise.all([seed.store(t.tenantId, { sessionId: 'bulk' }), seed.store(t.tenantId, { sessionId: 'bulk' })]);
    const [bulk, single] = await Promise.all([
      s.api('/api/images/delete-bulk', { key: t.liveKey, body: { ids: [a.id, b.id] } }),
      s.api(`/api/images/${a.id}`, { method: 'DELETE', key: t.liveKey }),
    ]);
    expect(bulk.status).toBe(200);
    const bulkGotA = bulk.body.data.deleted.includes(a.id);
    expect(bulkGotA).toBe(single.status === 404);
    expect(single.status).toBe(bulkGotA ? 404 : 204);
    expect(bulk.body.data.deleted).toContain(b.id);
    const [sess] = await sql`SELECT image_count FROM sessions WHERE tenant_id = ${t.tenantId} AND session_id = 'bulk'`;
    expect(sess.image_count).toBe(0);
    await statsMatch(t.tenantId);
  });

  it('tenant_stats stays exact under concurrent stores and deletes', async () => {
    const other = await s.createTenant();
    const first = await Promise.all(Array.from({ length: 10 }, (_, i) => seed.store(other.tenantId, { sessionId: `mix${i % 2}` })));
    await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => seed.store(other.tenantId, { sessionId: `mix${i % 2}` })),
      ...first.map((img) => s.api(`/api/images/${img.id}`, { method: 'DELETE', key: other.liveKey })),
    ]);
    expect(await statsMatch(other.tenantId)).toBe(10);
    const list = await s.api('/api/images?limit=1', { key: other.liveKey });
    expect(list.body.pagination?.total ?? list.body.total).toBe(10);
  });
});

describe('saved assets under concurrency', () => {
  it('concurrent creates of one character name: one 200, the others 409 (no 500)', async () => {
    const rs = await Promise.all(
      Array.from({ length: 5 }, () =>
        s.api('/api/characters', { key: t.liveKey, body: { character_name: 'Twin', base_prompt: 'a person in a yellow raincoat' } }),
      ),
    );
    expect(sorted(rs.map((r) => r.status))).toEqual([200, 409, 409, 409, 409]);
  });

  it('concurrent PATCHes of one scene setting different fields: every change is kept', async () => {
    const c = await s.api('/api/scenes', { key: t.liveKey, body: { scene_name: 'harbour', scene_prompt: 'a harbour at night' } });
    expect(c.status, JSON.stringify(c.body)).toBeLessThan(300);
    const id = c.body.data?.id ?? c.body.id;
    const rs = await Promise.all([
      s.api(`/api/scenes/${id}`, { method: 'PATCH', key: t.liveKey, body: { description: 'foggy' } }),
      s.api(`/api/scenes/${id}`, { method: 'PATCH', key: t.liveKey, body: { tags: ['boats'] } }),
      s.api(`/api/scenes/${id}`, { method: 'PATCH', key: t.liveKey, body: { preferred_aspect_ratio: '16:9' } }),
    ]);
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200]);
    const [row] = await sql`SELECT description, tags, preferred_aspect_ratio FROM scenes WHERE id = ${id}`;
    expect(row).toEqual({ description: 'foggy', tags: ['boats'], preferred_aspect_ratio: '16:9' });
  });
});
