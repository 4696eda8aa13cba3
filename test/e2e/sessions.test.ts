import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { librarySeeder } from './images-seed.js';

let s: TestStack;
let A: TestTenant;
let B: TestTenant;
let seed: ReturnType<typeof librarySeeder>;
let sql: Sql;

const LONG_ID = `s${'x'.repeat(199)}`;
const ODD_ID = 'my session/with?odd#chars';

beforeAll(async () => {
  s = await startTestStack();
  [A, B] = await Promise.all([s.createTenant({ rate_limit_per_minute: 100000 }), s.createTenant({ rate_limit_per_minute: 100000 })]);
  seed = librarySeeder(s);
  sql = createDb(s.env.DATABASE_URL as string, { schema: 'library', max: 1 });
  await seed.store(A.tenantId, { sessionId: 'alpha', prompt: 'first', width: 100, height: 100, tokens: 10 });
  await seed.store(A.tenantId, { sessionId: 'alpha', prompt: 'second', operation: 'edit', width: 50, height: 50, tokens: 5 });
  await seed.store(A.tenantId, { sessionId: 'beta', prompt: 'beta image' });
  await seed.store(A.tenantId, { sessionId: 'shared', prompt: 'A in shared' });
  await seed.store(B.tenantId, { sessionId: 'shared', prompt: 'B in shared' });
  await seed.store(B.tenantId, { sessionId: 'only-b', prompt: 'B only' });
});
afterAll(async () => {
  seed?.close();
  await sql?.end();
  await s?.stop();
});

describe('GET /api/sessions', () => {
  it('401 without a key', async () => {
    for (const path of ['/api/sessions', '/api/sessions/alpha']) {
      const r = await s.api(path);
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ error: 'Invalid or missing API key' });
    }
  });

  it('lists the tenant sessions, most recently active first, in the list form', async () => {
    const r = await s.api('/api/sessions', { key: A.liveKey });
    expect(r.status).toBe(200);
    expect(r.body.data.map((x: { sessionId: string }) => x.sessionId)).toEqual(['shared', 'beta', 'alpha']);
    expect(r.body.pagination).toEqual({ total: 3, limit: 20, offset: 0, totalIsExact: true, nextCursor: null });
    const alpha = r.body.data[2];
    expect(Object.keys(alpha).sort()).toEqual(
      [
        'sessionId',
        'isActive',
        'createdAt',
        'lastActivityAt',
        'totalImages',
        'totalEdits',
        'totalBytes',
        'totalMegabytes',
        'totalTokens',
      ].sort(),
    );
    expect(alpha).toMatchObject({ sessionId: 'alpha', isActive: true, totalImages: 2, totalEdits: 1, totalTokens: 15 });
    expect(alpha.totalBytes).toBeGreaterThan(0);
    expect(alpha.totalMegabytes).toBe(Math.round((alpha.totalBytes / 1048576) * 100) / 100);
    expect(Date.parse(alpha.lastActivityAt)).toBeGreaterThanOrEqual(Date.parse(alpha.createdAt));

    const page = await s.api('/api/sessions?limit=1&offset=1', { key: A.liveKey });
    expect(page.body.data.map((x: { sessionId: string }) => x.sessionId)).toEqual(['beta']);
    expect(page.body.pagination).toEqual({ total: 3, limit: 1, offset: 1, totalIsExact: true, nextCursor: expect.any(String) });

    const b = await s.api('/api/sessions', { key: B.liveKey });
    expect(b.body.data.map((x: { sessionId: string }) => x.sessionId)).toEqual(['only-b', 'shared']);
    expect(b.body.data[1]).toMatchObject({ totalImages: 1 });
  });

  it('400 on an invalid limit or offset', async () => {
    for (const [q, detail] of [
      ['limit=0', 'limit must be >= 1'],
      ['limit=101', 'limit must be <= 100'],
      ['offset=-1', 'offset must be >= 0'],
      ['limit=ten', 'limit must be an integer'],
    ]) {
      const r = await s.api(`/api/sessions?${q}`, { key: A.liveKey });
      expect(r.status, q).toBe(400);
      expect(r.body).toEqual({ error: 'Invalid request payload', details: [detail] });
    }
  });
});

describe('GET /api/sessions cursor paging (issue 16)', () => {
  const ids = (r: { body: { data: { sessionId: string }[] } }) => r.body.data.map((x) => x.sessionId);

  it('pages through all sessions as offset paging does; a session created meanwhile neither repeats nor skips older ones', async () => {
    const C = await s.createTenant({ rate_limit_per_minute: 100000 });
    // 25 sessions an hour ago, groups of 3 sharing a last_activity_at, and two 200-character ids among the ties.
    await sql`INSERT INTO sessions (tenant_id, session_id, last_activity_at)
      SELECT ${C.tenantId}, 'c' || lpad(g::text, 2, '0'), now() - interval '1 hour' - (g / 3) * interval '1 second'
      FROM generate_series(1, 25) g`;
    for (const id of ['é'.repeat(200), '"?&'.repeat(66)]) {
      await sql`INSERT INTO sessions (tenant_id, session_id, last_activity_at)
        SELECT ${C.tenantId}, ${id}, last_activity_at FROM sessions WHERE tenant_id = ${C.tenantId} AND session_id = 'c06'`;
    }
    const byOffset: string[] = [];
    for (let offset = 0; ; offset += 4) {
      const r = await s.api(`/api/sessions?limit=4&offset=${offset}`, { key: C.liveKey });
      if (r.body.data.length === 0) break;
      byOffset.push(...ids(r));
    }
    expect(byOffset).toHaveLength(27);

    const byCursor: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await s.api(`/api/sessions?limit=4${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key: C.liveKey });
      expect(r.status).toBe(200);
      expect(r.body.pagination).toMatchObject({ limit: 4, offset: 0, totalIsExact: true });
      byCursor.push(...ids(r));
      cursor = r.body.pagination.nextCursor;
      // A new session (most recently active) after the first page: offset paging would now repeat a row.
      if (++pages === 1) await sql`INSERT INTO sessions (tenant_id, session_id) VALUES (${C.tenantId}, 'c-new')`;
    } while (cursor);
    expect(byCursor).toEqual(byOffset);
    expect(pages).toBe(7);
    const fresh = await s.api('/api/sessions?limit=1', { key: C.liveKey });
    expect(ids(fresh)).toEqual(['c-new']);
    expect(fresh.body.pagination.total).toBe(28);
  });

  it('refuses a changed cursor, another tenant cursor, an image list cursor and cursor with offset: 400 with details', async () => {
    const r = await s.api('/api/sessions?limit=1', { key: A.liveKey });
    const cursor: string = r.body.pagination.nextCursor;
    expect(typeof cursor).toBe('string');
    const imageCursor: string = (await s.api('/api/images?limit=1', { key: A.liveKey })).body.pagination.nextCursor;
    expect(typeof imageCursor).toBe('string');
    const changed = `${cursor.slice(0, 3)}${cursor[3] === 'A' ? 'B' : 'A'}${cursor.slice(4)}`;
    for (const [key, c] of [
      [A.liveKey, changed],
      [B.liveKey, cursor],
      [A.liveKey, imageCursor],
      [A.liveKey, 'not-a-cursor'],
    ]) {
      const bad = await s.api(`/api/sessions?cursor=${encodeURIComponent(c)}`, { key });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ error: 'Invalid request payload', details: ['cursor is invalid'] });
    }
    // And a sessions cursor is no image list cursor.
    const asImage = await s.api(`/api/images?cursor=${encodeURIComponent(cursor)}`, { key: A.liveKey });
    expect(asImage.body).toEqual({ error: 'Invalid request payload', details: ['cursor is invalid'] });
    const both = await s.api(`/api/sessions?offset=1&cursor=${encodeURIComponent(cursor)}`, { key: A.liveKey });
    expect(both.status).toBe(400);
    expect(both.body).toEqual({ error: 'Invalid request payload', details: ['cursor and offset cannot be combined'] });
  });
});

describe('GET /api/sessions/:sessionId', () => {
  it('returns the raw record (snake_case, is_active 0/1) and the images oldest first', async () => {
    const r = await s.api('/api/sessions/alpha', { key: A.liveKey });
    expect(r.status).toBe(200);
    const { session, images } = r.body.data;
    expect(session).toEqual({
      session_id: 'alpha',
      tenant_id: A.tenantId,
      is_active: 1,
      created_at: expect.any(String),
      last_activity_at: expect.any(String),
    });
    expect(images.map((i: { prompt: string }) => i.prompt)).toEqual(['first', 'second']);
    expect(images[0]).toMatchObject({
      sessionId: 'alpha',
      width: 100,
      height: 100,
      operation: 'generate',
      objectKey: expect.stringMatching(new RegExp(`^tenants/${A.tenantId}/images/.+\\.png$`)),
      objectThumbnailKey: expect.stringMatching(new RegExp(`^tenants/${A.tenantId}/thumbnails/.+\\.webp$`)),
      thumbnailSizeBytes: expect.any(Number),
      negativePrompt: null,
      modelId: 'provA-flash-lite-image',
    });
    expect(images[0].fullUrl).toBe(`${s.baseUrl}/files/${images[0].objectKey}`);
  });

  it('is tenant-scoped: a same-named session shows only own images, a foreign one is 404', async () => {
    const shared = await s.api('/api/sessions/shared', { key: A.liveKey });
    expect(shared.body.data.images.map((i: { prompt: string }) => i.prompt)).toEqual(['A in shared']);
    for (const id of ['only-b', 'nope']) {
      const r = await s.api(`/api/sessions/${id}`, { key: A.liveKey });
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ error: 'Session not found' });
    }
  });

  it('answers an ETag, and 304 without a body to If-None-Match while neither the session nor its images changed', async () => {
    await seed.store(A.tenantId, { sessionId: 'etag', prompt: 'one' });
    const path = '/api/sessions/etag';
    const first = await s.api(path, { key: A.liveKey });
    const etag = first.headers.get('etag') as string;
    expect(etag).toMatch(/^"\d+-[\w-]{22}"$/);
    expect(first.headers.get('cache-control')).toBe('private, no-cache');
    const same = await s.api(path, { key: A.liveKey, headers: { 'if-none-match': etag } });
    expect(same.status).toBe(304);
    expect(same.body).toBeUndefined();
    expect(same.headers.get('etag')).toBe(etag);
    expect((await s.api(path, { key: A.liveKey, headers: { 'if-none-match': `"other", W/${etag}` } })).status).toBe(304);
    expect((await s.api(path, { key: A.liveKey, headers: { 'if-none-match': '*' } })).status).toBe(304);
    expect((await s.api(path, { key: A.liveKey, headers: { 'if-none-match': '"other"' } })).status).toBe(200);
    // Another tenant holding the tag: its own answer (404: no such session), never a 304.
    const foreign = await s.api(path, { key: B.liveKey, headers: { 'if-none-match': etag } });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'Session not found' });

    // One more image: 200 with the new image and a new tag.
    await seed.store(A.tenantId, { sessionId: 'etag', prompt: 'two' });
    const changed = await s.api(path, { key: A.liveKey, headers: { 'if-none-match': etag } });
    expect(changed.status).toBe(200);
    expect(changed.body.data.images.map((i: { prompt: string }) => i.prompt)).toEqual(['one', 'two']);
    const etag2 = changed.headers.get('etag') as string;
    expect(etag2).not.toBe(etag);
    // The session record alone changing (its activity, its state): a new tag as well.
    await sql`UPDATE sessions SET last_activity_at = last_activity_at - interval '1 second'
      WHERE tenant_id = ${A.tenantId} AND session_id = 'etag'`;
    const touched = await s.api(path, { key: A.liveKey, headers: { 'if-none-match': etag2 } });
    expect(touched.status).toBe(200);
    expect(touched.headers.get('etag')).not.toBe(etag2);
  });

  it('accepts URL-encoded characters in session ids', async () => {
    await seed.store(A.tenantId, { sessionId: ODD_ID });
    const odd = await s.api(`/api/sessions/${encodeURIComponent(ODD_ID)}`, { key: A.liveKey });
    expect(odd.status).toBe(200);
    expect(odd.body.data.session.session_id).toBe(ODD_ID);
  });

  // Needs the gateway's router maxParamLength raised above fastify's default of 100 (services/gateway/src/app.ts).
  it('accepts 200-character session ids and refuses longer ones with 400', async () => {
    await seed.store(A.tenantId, { sessionId: LONG_ID });
    const long = await s.api(`/api/sessions/${LONG_ID}`, { key: A.liveKey });
    expect(long.status).toBe(200);
    expect(long.body.data.session.session_id).toBe(LONG_ID);
    const tooLong = await s.api(`/api/sessions/${LONG_ID}y`, { key: A.liveKey });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toEqual({ error: 'Invalid request payload', details: ['sessionId must be at most 200 characters'] });
  });

  it('a full session (1,000 images) is inactive and refuses more images until one is deleted', async () => {
    await seed.store(A.tenantId, { sessionId: 'full' });
    await sql`UPDATE sessions SET image_count = 999 WHERE tenant_id = ${A.tenantId} AND session_id = 'full'`;
    const last = await seed.store(A.tenantId, { sessionId: 'full' });
    const d = await s.api('/api/sessions/full', { key: A.liveKey });
    expect(d.body.data.session.is_active).toBe(0);
    const l = await s.api('/api/sessions?limit=1', { key: A.liveKey });
    expect(l.body.data[0]).toMatchObject({ sessionId: 'full', isActive: false });
    await expect(seed.store(A.tenantId, { sessionId: 'full' })).rejects.toMatchObject({
      status: 400,
      body: { error: 'Session image limit reached' },
    });
    expect((await s.api(`/api/images/${last.id}`, { method: 'DELETE', key: A.liveKey })).status).toBe(204);
    const again = await s.api('/api/sessions/full', { key: A.liveKey });
    expect(again.body.data.session.is_active).toBe(1);
    await seed.store(A.tenantId, { sessionId: 'full' });
  });
});
