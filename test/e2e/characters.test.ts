import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { createClient, internalPrincipal } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testClient } from '../support/client.js';
import type { TestStack, TestTenant } from '../support/stack.js';
import { expectCursorEqualsOffset, expectRefused, firstCursor, TIMES, tampered, withSeededTenants } from './asset-paging-support.js';
import { chars, seeder, startAssetsStack } from './products-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let seed: ReturnType<typeof seeder>;
let assets: ReturnType<typeof createClient<typeof AssetsServiceService>>;

beforeAll(async () => {
  s = await startAssetsStack();
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
  seed = seeder(s);
  assets = createClient(AssetsServiceService, () => s.stack.ctx.resolve('library'));
});
afterAll(async () => {
  seed?.close();
  assets?.close();
  await s?.stop();
});

const BASE = 'A tall knight in silver armour with a red cape';
const create = (body: Record<string, unknown>, key = t.liveKey) => s.api('/api/characters', { key, body: { base_prompt: BASE, ...body } });
const path = (identifier: string | number) => `/api/characters/${encodeURIComponent(String(identifier))}`;

describe('characters CRUD', () => {
  it('creates with reference images and reads by id and by URL-encoded name (spaces, non-ASCII)', async () => {
    const [a, b] = [await seed.image(t.tenantId), await seed.image(t.tenantId)];
    const c = await create({
      character_name: 'Captain Zoë Ærø 李',
      description: 'The hero',
      negative_prompt: 'blurry',
      system_instruction: 'Keep the face consistent.',
      preferred_aspect_ratio: '3:4',
      reference_image_ids: [a.id, b.id],
      tags: ['hero', 'knight'],
    });
    expect(c.status).toBe(200);
    const ch = c.body.data;
    expect(ch).toMatchObject({
      character_name: 'Captain Zoë Ærø 李',
      description: 'The hero',
      base_prompt: BASE,
      negative_prompt: 'blurry',
      system_instruction: 'Keep the face consistent.',
      preferred_aspect_ratio: '3:4',
      tags: ['hero', 'knight'],
      times_used: 0,
      last_used_at: null,
    });
    expect(ch.id).toEqual(expect.any(Number));
    expect(ch.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(ch.reference_images).toEqual([
      { id: a.id, url: a.fullUrl, thumbnail_url: a.thumbnailUrl },
      { id: b.id, url: b.fullUrl, thumbnail_url: b.thumbnailUrl },
    ]);

    const byId = await s.api(path(ch.id), { key: t.liveKey });
    expect(byId.status).toBe(200);
    expect(byId.body.data).toEqual(ch);
    const byName = await s.api(path('Captain Zoë Ærø 李'), { key: t.liveKey });
    expect(byName.status).toBe(200);
    expect(byName.body.data.id).toBe(ch.id);

    const slash = await create({ character_name: 'AC/DC 100% Fan?#' });
    expect(slash.status).toBe(200);
    const bySlash = await s.api(path('AC/DC 100% Fan?#'), { key: t.liveKey });
    expect(bySlash.status).toBe(200);
    expect(bySlash.body.data.id).toBe(slash.body.data.id);

    // The name works for PATCH and DELETE too.
    const patched = await s.api(path('Captain Zoë Ærø 李'), { key: t.liveKey, method: 'PATCH', body: { description: 'Still the hero' } });
    expect(patched.status).toBe(200);
    expect(patched.body.data.description).toBe('Still the hero');
    const del = await s.api(path('Captain Zoë Ærø 李'), { key: t.liveKey, method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ data: { deleted: true } });
    expect((await s.api(path(ch.id), { key: t.liveKey })).status).toBe(404);
  });

  it('PATCH changes only given fields; reference_image_ids and tags replace; null clears optional text', async () => {
    const [a, b, c] = [await seed.image(t.tenantId), await seed.image(t.tenantId), await seed.image(t.tenantId)];
    const made = await create({ character_name: 'Patch Me', description: 'd', reference_image_ids: [a.id, b.id], tags: ['x', 'y'] });
    const id = made.body.data.id;
    const r = await s.api(path(id), { key: t.liveKey, method: 'PATCH', body: { reference_image_ids: [c.id], tags: ['z'] } });
    expect(r.status).toBe(200);
    expect(r.body.data.reference_images.map((i: { id: number }) => i.id)).toEqual([c.id]);
    expect(r.body.data.tags).toEqual(['z']);
    expect(r.body.data).toMatchObject({ character_name: 'Patch Me', description: 'd', base_prompt: BASE });

    const r2 = await s.api(path(id), {
      key: t.liveKey,
      method: 'PATCH',
      body: { character_name: 'Patched', base_prompt: 'A short knight with a blue cape', description: null },
    });
    expect(r2.body.data).toMatchObject({
      character_name: 'Patched',
      base_prompt: 'A short knight with a blue cape',
      description: null,
      tags: ['z'],
    });
    const r3 = await s.api(path(id), { key: t.liveKey, method: 'PATCH', body: { reference_image_ids: [], tags: [] } });
    expect(r3.body.data).toMatchObject({ reference_images: [], tags: [] });
  });

  it('DELETE keeps generated images and their character_id', async () => {
    const made = await create({ character_name: 'Ephemeral' });
    const id = made.body.data.id;
    const generated = await seed.image(t.tenantId, { characterId: id });
    expect((await s.api(path(id), { key: t.liveKey, method: 'DELETE' })).status).toBe(200);
    const img = await seed.get(t.tenantId, generated.id);
    expect(img.image?.characterId).toBe(id);
    const again = await s.api(path(id), { key: t.liveKey, method: 'DELETE' });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ error: 'Character not found' });
  });

  it('answers 409 on duplicate names (create and rename), per tenant', async () => {
    expect((await create({ character_name: 'Twin' })).status).toBe(200);
    const dup = await create({ character_name: 'Twin' });
    expect(dup.status).toBe(409);
    expect(dup.body.error).toMatch(/^Character Twin already exists for this tenant\. \S/);
    const other1 = await create({ character_name: 'Single' });
    const rename = await s.api(path(other1.body.data.id), { key: t.liveKey, method: 'PATCH', body: { character_name: 'Twin' } });
    expect(rename.status).toBe(409);
    expect(rename.body.error).toMatch(/^Character Twin already exists for this tenant\./);
    expect((await create({ character_name: 'Twin' }, other.liveKey)).status).toBe(200);
  });
});

describe('character limits', () => {
  it('base_prompt 10-2000 with the spec text', async () => {
    expect((await create({ character_name: 'bp10', base_prompt: chars(10) })).status).toBe(200);
    expect((await create({ character_name: 'bp2000', base_prompt: chars(2000) })).status).toBe(200);
    for (const [name, bp] of [
      ['bp9', chars(9)],
      ['bp2001', chars(2001)],
      ['bpempty', ''],
    ]) {
      const r = await create({ character_name: name, base_prompt: bp });
      expect(r.status, name).toBe(400);
      expect(r.body.error).toBe('Base prompt must be between 10 and 2000 characters');
      expect(r.body.details).toBeDefined();
    }
    const made = await create({ character_name: 'bp-patch' });
    const p = await s.api(path(made.body.data.id), { key: t.liveKey, method: 'PATCH', body: { base_prompt: chars(2001) } });
    expect(p.status).toBe(400);
    expect(p.body.error).toBe('Base prompt must be between 10 and 2000 characters');
    const missing = await s.api('/api/characters', { key: t.liveKey, body: { character_name: 'no base' } });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: 'Invalid request payload', details: ['base_prompt is required'] });
  });

  it('character_name 1-100, description 500, negative_prompt and system_instruction 1000, tags 20 x 50', async () => {
    const ok = await create({
      character_name: chars(100, 'N'),
      description: chars(500),
      negative_prompt: chars(1000),
      system_instruction: chars(1000),
      tags: Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(50, 't')),
    });
    expect(ok.status).toBe(200);
    const cases: [string, Record<string, unknown>][] = [
      ['character_name', { character_name: chars(101, 'M') }],
      ['character_name', { character_name: '' }],
      ['description', { character_name: 'd501', description: chars(501) }],
      ['negative_prompt', { character_name: 'n1001', negative_prompt: chars(1001) }],
      ['system_instruction', { character_name: 's1001', system_instruction: chars(1001) }],
      ['tags', { character_name: 't21', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }],
      ['tags', { character_name: 't51', tags: [chars(51)] }],
    ];
    for (const [field, body] of cases) {
      const r = await create(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
      expect(r.body.details.join(' ')).toContain(field);
    }
  });

  it('reference_image_ids up to 10, each an image of the tenant', async () => {
    const ten = await Promise.all(Array.from({ length: 11 }, () => seed.image(t.tenantId)));
    const ok = await create({ character_name: 'ten refs', reference_image_ids: ten.slice(0, 10).map((i) => i.id) });
    expect(ok.status).toBe(200);
    expect(ok.body.data.reference_images).toHaveLength(10);
    const over = await create({ character_name: 'eleven refs', reference_image_ids: ten.map((i) => i.id) });
    expect(over.status).toBe(400);
    expect(over.body.error).toBe('Invalid request payload');
    expect(over.body.details.join(' ')).toContain('reference_image_ids');

    const foreign = await seed.image(other.tenantId);
    const bad = await create({ character_name: 'bad refs', reference_image_ids: [ten[0].id, foreign.id, 99999999] });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'One or more reference image IDs are invalid', details: { invalid_ids: [foreign.id, 99999999] } });
    const patch = await s.api(path(ok.body.data.id), { key: t.liveKey, method: 'PATCH', body: { reference_image_ids: [foreign.id] } });
    expect(patch.status).toBe(400);
    expect(patch.body).toEqual({ error: 'One or more reference image IDs are invalid', details: { invalid_ids: [foreign.id] } });
    // Ids that can never be an image are invalid reference image ids too (SPEC 7), not a generic payload error.
    const nonPositive = await create({ character_name: 'zero refs', reference_image_ids: [ten[0].id, 0, -3] });
    expect(nonPositive.status).toBe(400);
    expect(nonPositive.body).toEqual({ error: 'One or more reference image IDs are invalid', details: { invalid_ids: [0, -3] } });
  });
});

describe('character list', () => {
  it('lists with search, sort_by name/created/used/recent, pagination and hasMore (list form)', async () => {
    const tenant = await s.createTenant();
    const img = await seed.image(tenant.tenantId);
    const names = ['Bravo', 'alpha', 'Charlie', 'Delta'];
    const ids: Record<string, number> = {};
    for (const name of names) {
      const r = await create(
        { character_name: name, reference_image_ids: name === 'Bravo' ? [img.id] : [], tags: [`tag-${name}`] },
        tenant.liveKey,
      );
      expect(r.status).toBe(200);
      ids[name] = r.body.data.id;
    }
    const principal = internalPrincipal(tenant.tenantId);
    await assets.markAssetsUsed({ characterIds: [ids.Charlie], productIds: [], sceneIds: [] }, principal);
    await assets.markAssetsUsed({ characterIds: [ids.Charlie], productIds: [], sceneIds: [] }, principal);
    await assets.markAssetsUsed({ characterIds: [ids.Delta], productIds: [], sceneIds: [] }, principal);

    const list = async (q: string) => (await s.api(`/api/characters${q}`, { key: tenant.liveKey })).body;
    const byName = await list('');
    expect(byName.data.map((c: { character_name: string }) => c.character_name)).toEqual(['alpha', 'Bravo', 'Charlie', 'Delta']);
    expect(byName.pagination).toEqual({ total: 4, limit: 50, offset: 0, hasMore: false, nextCursor: null });
    const bravo = byName.data[1];
    expect(bravo).toMatchObject({ reference_image_count: 1, thumbnail_url: img.thumbnailUrl, tags: ['tag-Bravo'], times_used: 0 });
    expect(bravo.reference_images).toBeUndefined();
    expect(byName.data[0]).toMatchObject({ reference_image_count: 0, thumbnail_url: null });

    expect((await list('?sort_by=created')).data.map((c: { id: number }) => c.id)).toEqual([ids.Delta, ids.Charlie, ids.alpha, ids.Bravo]);
    const used = (await list('?sort_by=used')).data;
    expect(used.slice(0, 2).map((c: { id: number }) => c.id)).toEqual([ids.Charlie, ids.Delta]);
    expect(used[0]).toMatchObject({ times_used: 2, last_used_at: expect.any(String) });
    expect((await list('?sort_by=recent')).data.slice(0, 2).map((c: { id: number }) => c.id)).toEqual([ids.Delta, ids.Charlie]);

    const page = await list('?limit=2&offset=1');
    expect(page.pagination).toEqual({ total: 4, limit: 2, offset: 1, hasMore: true, nextCursor: expect.any(String) });
    expect(page.data.map((c: { character_name: string }) => c.character_name)).toEqual(['Bravo', 'Charlie']);
    expect((await list('?limit=2&offset=2')).pagination.hasMore).toBe(false);

    const search = await list('?search=char');
    expect(search.data.map((c: { character_name: string }) => c.character_name)).toEqual(['Charlie']);
    expect((await list('?search=tag-Delta')).data.map((c: { id: number }) => c.id)).toEqual([ids.Delta]);

    for (const q of ['?limit=101', '?limit=0', '?sort_by=popular', '?offset=-1']) {
      const r = await s.api(`/api/characters${q}`, { key: tenant.liveKey });
      expect(r.status, q).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
    }
    expect((await list('?limit=100')).pagination.limit).toBe(100);
  });
});

describe('character isolation and auth', () => {
  it("another tenant's characters are 404 and never listed", async () => {
    const mine = await create({ character_name: 'Hidden One' });
    const id = mine.body.data.id;
    for (const ident of [String(id), 'Hidden One']) {
      for (const method of ['GET', 'DELETE', 'PATCH'] as const) {
        const r = await s.api(path(ident), { key: other.liveKey, method, body: method === 'PATCH' ? { description: 'x' } : undefined });
        expect(r.status, `${method} ${ident}`).toBe(404);
        expect(r.body).toEqual({ error: 'Character not found' });
      }
    }
    const list = await s.api('/api/characters?limit=100', { key: other.liveKey });
    expect(list.body.data.map((c: { id: number }) => c.id)).not.toContain(id);
    expect((await s.api(path(id), { key: t.liveKey })).status).toBe(200);
  });

  it('needs an API key', async () => {
    for (const [p, method] of [
      ['/api/characters', 'GET'],
      ['/api/characters', 'POST'],
      ['/api/characters/1', 'GET'],
      ['/api/characters/1', 'PATCH'],
      ['/api/characters/1', 'DELETE'],
      ['/api/characters/1/generate', 'POST'],
      ['/api/characters/generate-multi', 'POST'],
    ] as const) {
      const r = await s.api(p, { method, body: method === 'POST' || method === 'PATCH' ? {} : undefined });
      expect(r.status, `${method} ${p}`).toBe(401);
      expect(r.body.error).toBe('Invalid or missing API key');
    }
  });
});

describe('the typed client (libs/client)', () => {
  it('creates, reads by name, lists and updates a character with typed calls', async () => {
    const api = testClient(s.baseUrl, t.liveKey);
    const created = await api.POST('/api/characters', {
      body: { character_name: 'Typed Tilda', base_prompt: 'a cheerful botanist with a green coat', tags: ['typed'] },
    });
    expect(created.response.status).toBe(200);
    expect(created.data?.data).toMatchObject({ character_name: 'Typed Tilda', times_used: 0, last_used_at: null });

    const byName = await api.GET('/api/characters/{identifier}', { params: { path: { identifier: 'Typed Tilda' } } });
    expect(byName.data?.data.id).toBe(created.data?.data.id);

    const list = await api.GET('/api/characters', { params: { query: { search: 'Typed', sort_by: 'created' } } });
    expect(list.data?.data.map((c) => c.character_name)).toContain('Typed Tilda');
    expect(list.data?.pagination.hasMore).toBe(false);

    const updated = await api.PATCH('/api/characters/{identifier}', {
      params: { path: { identifier: String(created.data?.data.id) } },
      body: { description: 'now typed' },
    });
    expect(updated.data?.data.description).toBe('now typed');

    const dup = await api.POST('/api/characters', { body: { character_name: 'Typed Tilda', base_prompt: 'another botanist entirely' } });
    expect(dup.response.status).toBe(409);
    expect(dup.error?.error).toMatch(/already exists/);
  });
});

describe('GET /api/characters cursor paging (issue 16)', () => {
  it('cursor paging lists what offset paging lists, on every sort with ties; foreign or changed cursors are 400', async () => {
    await withSeededTenants(s, async (sql, A, B) => {
      const T = TIMES(sql);
      for (const tenant of [A.tenantId, B.tenantId]) {
        await sql`INSERT INTO characters (tenant_id, character_name, base_prompt, times_used, last_used_at, created_at)
          SELECT ${tenant}, ${T.name}, ${BASE}, ${T.timesUsed}, ${T.lastUsed}, ${T.created} FROM generate_series(1, 23) g`;
        await sql`INSERT INTO scenes (tenant_id, scene_name) SELECT ${tenant}, 'scene ' || g FROM generate_series(1, 3) g`;
      }
      for (const sort of ['name', 'created', 'used', 'recent']) {
        await expectCursorEqualsOffset(s, A.liveKey, { url: `/api/characters?sort_by=${sort}`, size: 4, style: 'offset' }, 23);
      }
      // A search filters the keyset pages too.
      await expectCursorEqualsOffset(s, A.liveKey, { url: '/api/characters?sort_by=used&search=KNIGHT', size: 2, style: 'offset' }, 23);
      const url = '/api/characters?sort_by=used&limit=2';
      const cursor = await firstCursor(s, A.liveKey, url);
      await expectRefused(s, A.liveKey, url, tampered(cursor));
      await expectRefused(s, B.liveKey, url, cursor);
      await expectRefused(s, A.liveKey, '/api/characters?sort_by=recent', cursor);
      await expectRefused(s, A.liveKey, '/api/characters', 'not-a-cursor');
      await expectRefused(s, A.liveKey, '/api/scenes?sort_by=used', cursor);
      await expectRefused(s, A.liveKey, '/api/characters?sort_by=name', await firstCursor(s, A.liveKey, '/api/scenes?limit=1'));
      await expectRefused(s, A.liveKey, `${url}&offset=2`, cursor, ['cursor and offset cannot be combined']);
      // The last page has no cursor.
      const last = await s.api('/api/characters?limit=100', { key: A.liveKey });
      expect(last.body.pagination).toEqual({ total: 23, limit: 100, offset: 0, hasMore: false, nextCursor: null });
    });
  });
});
