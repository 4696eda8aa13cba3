import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestStack, TestTenant } from '../support/stack.js';
import { expectCursorEqualsOffset, expectRefused, firstCursor, TIMES, tampered, withSeededTenants } from './asset-paging-support.js';
import { chars, type ImageServer, noisePng, seeder, startAssetsStack, startImageServer } from './products-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let img: ImageServer;
let seed: ReturnType<typeof seeder>;

beforeAll(async () => {
  [s, img] = await Promise.all([startAssetsStack(), startImageServer()]);
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
  seed = seeder(s);
});
afterAll(async () => {
  seed?.close();
  await img?.close();
  await s?.stop();
});

const create = (body: Record<string, unknown>, key = t.liveKey) => s.api('/api/scenes', { key, body });
const path = (identifier: string | number) => `/api/scenes/${encodeURIComponent(String(identifier))}`;
const patch = (identifier: string | number, body: unknown, key = t.liveKey) => s.api(path(identifier), { key, method: 'PATCH', body });
/** Reference images (scene imports) of a tenant in the library, through GET /api/images. */
const referenceImages = async (key: string) =>
  (await s.api('/api/images?operationType=scene-reference&limit=100', { key })).body as {
    data: { id: number }[];
    pagination: { total: number };
  };

describe('scenes CRUD', () => {
  it('creates with a prompt, existing ids and imported URLs; reads by id and URL-encoded name', async () => {
    const existing = await seed.image(t.tenantId);
    const c = await create({
      scene_name: 'Café Night Ñ 夜',
      description: 'A cosy café',
      scene_prompt: 'A warm café at night, neon lights,',
      reference_image_ids: [existing.id],
      reference_image_urls: [`${img.url}/red.png`, `${img.url}/blue.jpg`],
      default_reference_mode: 'style',
      preferred_aspect_ratio: '16:9',
      tags: ['night', 'city'],
    });
    expect(c.status).toBe(200);
    const sc = c.body.data;
    expect(sc).toMatchObject({
      sceneName: 'Café Night Ñ 夜',
      description: 'A cosy café',
      scenePrompt: 'A warm café at night, neon lights,',
      defaultReferenceMode: 'style',
      preferredAspectRatio: '16:9',
      tags: ['night', 'city'],
      timesUsed: 0,
      lastUsedAt: null,
    });
    expect(sc.createdAt).toMatch(/Z$/);
    expect(sc.updatedAt).toMatch(/Z$/);
    expect(sc.referenceImages).toHaveLength(3);
    expect(sc.referenceImages[0]).toEqual({
      id: existing.id,
      objectKey: existing.objectKey,
      url: existing.fullUrl,
      thumbnailUrl: existing.thumbnailUrl,
    });
    for (const r of sc.referenceImages) {
      expect(r).toEqual({
        id: expect.any(Number),
        objectKey: expect.stringMatching(new RegExp(`^tenants/${t.tenantId}/`)),
        url: expect.any(String),
        thumbnailUrl: expect.any(String),
      });
    }
    // The URLs were imported as library images.
    const imported = sc.referenceImages.slice(1).map((r: { id: number }) => r.id);
    const refs = await referenceImages(t.liveKey);
    expect(refs.data.map((i) => i.id)).toEqual(expect.arrayContaining(imported));

    expect((await s.api(path(sc.id), { key: t.liveKey })).body.data).toEqual(sc);
    const byName = await s.api(path('Café Night Ñ 夜'), { key: t.liveKey });
    expect(byName.status).toBe(200);
    expect(byName.body.data.id).toBe(sc.id);

    const del = await s.api(path('Café Night Ñ 夜'), { key: t.liveKey, method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ data: { deleted: true, sceneId: sc.id, sceneName: 'Café Night Ñ 夜', imageCount: 3 } });
    // Reference images stay in the library.
    for (const id of [existing.id, ...imported]) expect((await s.api(`/api/images/${id}`, { key: t.liveKey })).status).toBe(200);
    const gone = await s.api(path(sc.id), { key: t.liveKey });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ error: `Scene preset with ID ${sc.id} not found for this tenant` });
  });

  it('creates with only a prompt, only ids or only URLs; refuses none of them', async () => {
    expect((await create({ scene_name: 'prompt only', scene_prompt: 'A beach' })).status).toBe(200);
    const i = await seed.image(t.tenantId);
    expect((await create({ scene_name: 'ids only', reference_image_ids: [i.id] })).status).toBe(200);
    const u = await create({ scene_name: 'urls only', reference_image_urls: [`${img.url}/green.webp`] });
    expect(u.status).toBe(200);
    expect(u.body.data.scenePrompt).toBeNull();
    for (const body of [
      { scene_name: 'nothing' },
      { scene_name: 'empty', scene_prompt: '', reference_image_ids: [], reference_image_urls: [] },
    ]) {
      const r = await create(body);
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('Invalid scene preset payload');
      expect(Array.isArray(r.body.details)).toBe(true);
    }
  });

  it('PATCH: rename, nullable fields, ids replace, URLs add, tags replace; cannot clear both prompt and references', async () => {
    const [a, b] = [await seed.image(t.tenantId), await seed.image(t.tenantId)];
    const made = await create({
      scene_name: 'Forest',
      scene_prompt: 'A misty forest',
      reference_image_ids: [a.id],
      tags: ['green'],
      description: 'd',
    });
    const id = made.body.data.id;
    const r1 = await patch(id, { reference_image_ids: [b.id], reference_image_urls: [`${img.url}/red.png`], tags: ['dark', 'wet'] });
    expect(r1.status).toBe(200);
    expect(r1.body.data.referenceImages.map((r: { id: number }) => r.id)[0]).toBe(b.id);
    expect(r1.body.data.referenceImages).toHaveLength(2);
    expect(r1.body.data).toMatchObject({ sceneName: 'Forest', scenePrompt: 'A misty forest', tags: ['dark', 'wet'], description: 'd' });

    const r2 = await patch(id, {
      new_scene_name: 'Dark Forest',
      description: null,
      preferred_aspect_ratio: '9:16',
      default_reference_mode: 'add',
      tags: null,
    });
    expect(r2.body.data).toMatchObject({
      sceneName: 'Dark Forest',
      description: null,
      preferredAspectRatio: '9:16',
      defaultReferenceMode: 'add',
      tags: [],
    });
    const r3 = await patch('Dark Forest', { preferred_aspect_ratio: null, default_reference_mode: null });
    expect(r3.body.data).toMatchObject({ preferredAspectRatio: null, defaultReferenceMode: null });

    // Clearing the prompt keeps the scene valid while it has references; clearing both is refused.
    const r4 = await patch(id, { scene_prompt: null });
    expect(r4.status).toBe(200);
    expect(r4.body.data.scenePrompt).toBeNull();
    const r5 = await patch(id, { reference_image_ids: [] });
    expect(r5.status).toBe(400);
    expect(r5.body).toEqual({ error: 'Scene preset must include at least a prompt or reference images' });
    const r6 = await patch(id, { reference_image_ids: [], scene_prompt: 'Back to a prompt' });
    expect(r6.status).toBe(200);
    expect(r6.body.data).toMatchObject({ scenePrompt: 'Back to a prompt', referenceImages: [] });
    const r7 = await patch(id, { scene_prompt: null });
    expect(r7.status).toBe(400);
    expect(r7.body).toEqual({ error: 'Scene preset must include at least a prompt or reference images' });
  });

  it('PATCH: a reference image deleted from the library no longer keeps the scene valid nor counts toward 20', async () => {
    const gone = await seed.image(t.tenantId);
    const made = await create({ scene_name: 'Fading', scene_prompt: 'A fading memory', reference_image_ids: [gone.id] });
    expect(made.status).toBe(200);
    const del = await s.api(`/api/images/${gone.id}`, { key: t.liveKey, method: 'DELETE' });
    expect(del.status).toBe(204);
    // The scene shows no images now, so clearing its prompt would leave neither a prompt nor references.
    const cleared = await patch(made.body.data.id, { scene_prompt: null });
    expect(cleared.status).toBe(400);
    expect(cleared.body).toEqual({ error: 'Scene preset must include at least a prompt or reference images' });
    const still = await s.api(path(made.body.data.id), { key: t.liveKey });
    expect(still.body.data).toMatchObject({ scenePrompt: 'A fading memory', referenceImages: [] });

    // 20 stored ids of which one was deleted leave room for one URL import.
    const imgs = await Promise.all(Array.from({ length: 20 }, () => seed.image(t.tenantId)));
    const full = await create({ scene_name: 'Full house', reference_image_ids: imgs.map((i) => i.id) });
    expect(full.status).toBe(200);
    expect((await s.api(`/api/images/${imgs[0].id}`, { key: t.liveKey, method: 'DELETE' })).status).toBe(204);
    const added = await patch(full.body.data.id, { reference_image_urls: [`${img.url}/red.png`] });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    expect(added.body.data.referenceImages).toHaveLength(20);
  });

  it('duplicate names answer 400 with the spec text (create and rename)', async () => {
    expect((await create({ scene_name: 'Harbor', scene_prompt: 'boats' })).status).toBe(200);
    const hits = img.hits['/red.png'] ?? 0;
    const dup = await create({ scene_name: 'Harbor', scene_prompt: 'ships', reference_image_urls: [`${img.url}/red.png`] });
    expect(dup.status).toBe(400);
    expect(dup.body.error).toMatch(/^Scene preset Harbor already exists\. \S/);
    expect(img.hits['/red.png'] ?? 0).toBe(hits); // refused before fetching
    const second = await create({ scene_name: 'Port', scene_prompt: 'cranes' });
    const rename = await patch(second.body.data.id, { new_scene_name: 'Harbor' });
    expect(rename.status).toBe(400);
    expect(rename.body.error).toMatch(/^Scene preset Harbor already exists\./);
    expect((await create({ scene_name: 'Harbor', scene_prompt: 'boats' }, other.liveKey)).status).toBe(200);
  });
});

describe('scene references', () => {
  it("refuses another tenant's or a missing reference image with the spec text", async () => {
    const foreign = await seed.image(other.tenantId);
    const r = await create({ scene_name: 'foreign', reference_image_ids: [foreign.id] });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: `Reference image ${foreign.id} not found or does not belong to this tenant` });
    const m = await create({ scene_name: 'missing', scene_prompt: 'x', reference_image_ids: [987654321] });
    expect(m.body).toEqual({ error: 'Reference image 987654321 not found or does not belong to this tenant' });
    const ok = await create({ scene_name: 'mine', scene_prompt: 'x' });
    const p = await patch(ok.body.data.id, { reference_image_ids: [foreign.id] });
    expect(p.status).toBe(400);
    expect(p.body).toEqual({ error: `Reference image ${foreign.id} not found or does not belong to this tenant` });
  });

  it('allows 20 combined references and refuses 21 (ids + URLs)', async () => {
    const tenant = await s.createTenant();
    const images = await Promise.all(Array.from({ length: 20 }, () => seed.image(tenant.tenantId)));
    const ids = images.map((i) => i.id);
    const twenty = await create(
      { scene_name: 'twenty', reference_image_ids: ids.slice(0, 18), reference_image_urls: [`${img.url}/red.png`, `${img.url}/blue.jpg`] },
      tenant.liveKey,
    );
    expect(twenty.status).toBe(200);
    expect(twenty.body.data.referenceImages).toHaveLength(20);
    expect((await create({ scene_name: 'twenty ids', reference_image_ids: ids }, tenant.liveKey)).status).toBe(200);

    const before = (await referenceImages(tenant.liveKey)).pagination.total;
    const over = await create(
      {
        scene_name: 'twenty-one',
        reference_image_ids: ids.slice(0, 19),
        reference_image_urls: [`${img.url}/red.png`, `${img.url}/blue.jpg`],
      },
      tenant.liveKey,
    );
    expect(over.status).toBe(400);
    expect(over.body.error).toBe('Invalid scene preset payload');
    const urls21 = await create(
      { scene_name: 'urls21', reference_image_urls: Array.from({ length: 21 }, (_, i) => `${img.url}/red.png?${i}`) },
      tenant.liveKey,
    );
    expect(urls21.status).toBe(400);
    expect(urls21.body.error).toBe('Invalid scene preset payload');
    // On update: the kept references plus the new URLs count together.
    const upd = await patch(twenty.body.data.id, { reference_image_urls: [`${img.url}/red.png`] }, tenant.liveKey);
    expect(upd.status).toBe(400);
    expect(upd.body.error).toBe('Invalid scene preset payload');
    expect((await referenceImages(tenant.liveKey)).pagination.total).toBe(before);
  });

  it('fetches and validates every URL before saving anything', async () => {
    const tenant = await s.createTenant();
    const html = await create(
      { scene_name: 'half bad', reference_image_urls: [`${img.url}/red.png`, `${img.url}/page.html`] },
      tenant.liveKey,
    );
    expect(html.status).toBe(400);
    expect(html.body).toEqual({ error: 'URL does not point to an image. Content-Type: text/html; charset=utf-8' });
    const missing = await create(
      { scene_name: 'half missing', reference_image_urls: [`${img.url}/blue.jpg`, `${img.url}/missing`] },
      tenant.liveKey,
    );
    expect(missing.body).toEqual({ error: 'Failed to fetch image from URL: 404' });
    const notUrl = await create({ scene_name: 'not url', reference_image_urls: ['ftp://example.com/x.png'] }, tenant.liveKey);
    expect(notUrl.status).toBe(400);
    expect(notUrl.body.error).toBe('Invalid scene preset payload');
    expect((await referenceImages(tenant.liveKey)).pagination.total).toBe(0);
    expect((await s.api('/api/scenes', { key: tenant.liveKey })).body.pagination.total).toBe(0);
  });

  it('refuses more than 20 MiB of URL imports in one request, saving nothing', async () => {
    const tenant = await s.createTenant();
    img.set('/big1.png', await noisePng(11 * 1024 * 1024), 'image/png');
    img.set('/big2.png', await noisePng(11 * 1024 * 1024), 'image/png');
    const r = await create({ scene_name: 'too big', reference_image_urls: [`${img.url}/big1.png`, `${img.url}/big2.png`] }, tenant.liveKey);
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('Invalid scene preset payload');
    expect((await referenceImages(tenant.liveKey)).pagination.total).toBe(0);
  });
});

describe('scene limits and list', () => {
  it('scene_name 1-100, description 500, scene_prompt 4000, tags 20 x 50, reference mode', async () => {
    const ok = await create({
      scene_name: chars(100, 'S'),
      description: chars(500),
      scene_prompt: chars(4000),
      tags: Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(50, 'x')),
    });
    expect(ok.status).toBe(200);
    const cases: [string, Record<string, unknown>][] = [
      ['scene_name', { scene_name: chars(101, 'T'), scene_prompt: 'x' }],
      ['scene_name', { scene_name: '', scene_prompt: 'x' }],
      ['scene_name', { scene_prompt: 'x' }],
      ['description', { scene_name: 'd501', scene_prompt: 'x', description: chars(501) }],
      ['scene_prompt', { scene_name: 'p4001', scene_prompt: chars(4001) }],
      ['tags', { scene_name: 't21', scene_prompt: 'x', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }],
      ['tags', { scene_name: 't51', scene_prompt: 'x', tags: [chars(51)] }],
      ['default_reference_mode', { scene_name: 'mode', scene_prompt: 'x', default_reference_mode: 'replace' }],
      ['reference_image_ids', { scene_name: 'ids type', scene_prompt: 'x', reference_image_ids: ['a'] }],
    ];
    for (const [field, body] of cases) {
      const r = await create(body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(r.body.error).toBe('Invalid scene preset payload');
      expect(r.body.details.join(' ')).toContain(field);
    }
    const rename = await patch(ok.body.data.id, { new_scene_name: chars(101) });
    expect(rename.status).toBe(400);
    expect(rename.body.error).toBe('Invalid scene preset payload');
  });

  it('lists with search, sort_by, pagination and hasMore (list form)', async () => {
    const tenant = await s.createTenant();
    const i = await seed.image(tenant.tenantId);
    const ids: Record<string, number> = {};
    for (const [name, prompt] of [
      ['beta', 'mountains'],
      ['Alpha', 'a desert'],
      ['gamma', 'the sea'],
    ]) {
      const r = await create(
        { scene_name: name, scene_prompt: prompt, reference_image_ids: name === 'beta' ? [i.id] : [] },
        tenant.liveKey,
      );
      ids[name] = r.body.data.id;
    }
    const list = async (q: string) => (await s.api(`/api/scenes${q}`, { key: tenant.liveKey })).body;
    const all = await list('');
    expect(all.data.map((x: { sceneName: string }) => x.sceneName)).toEqual(['Alpha', 'beta', 'gamma']);
    expect(all.pagination).toEqual({ total: 3, limit: 50, offset: 0, hasMore: false, nextCursor: null });
    expect(all.data[1]).toMatchObject({ imageCount: 1, thumbnailUrl: i.thumbnailUrl, scenePrompt: 'mountains' });
    expect(all.data[1].referenceImages).toBeUndefined();
    expect(all.data[0]).toMatchObject({ imageCount: 0, thumbnailUrl: null });
    expect((await list('?sort_by=created')).data.map((x: { id: number }) => x.id)).toEqual([ids.gamma, ids.Alpha, ids.beta]);
    expect((await list('?sort_by=used')).data).toHaveLength(3);
    expect((await list('?sort_by=recent')).data).toHaveLength(3);
    const page = await list('?limit=1&offset=1');
    expect(page.pagination).toEqual({ total: 3, limit: 1, offset: 1, hasMore: true, nextCursor: expect.any(String) });
    expect(page.data.map((x: { sceneName: string }) => x.sceneName)).toEqual(['beta']);
    expect((await list('?search=desert')).data.map((x: { sceneName: string }) => x.sceneName)).toEqual(['Alpha']);
    for (const q of ['?limit=101', '?sort_by=best']) expect((await s.api(`/api/scenes${q}`, { key: tenant.liveKey })).status).toBe(400);
  });
});

describe('scene isolation and auth', () => {
  it("another tenant's scenes are 404 with the spec text", async () => {
    const mine = await create({ scene_name: 'Private scene', scene_prompt: 'x' });
    const id = mine.body.data.id;
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const r = await s.api(path(id), { key: other.liveKey, method, body: method === 'PATCH' ? { description: 'x' } : undefined });
      expect(r.status, method).toBe(404);
      expect(r.body).toEqual({ error: `Scene preset with ID ${id} not found for this tenant` });
    }
    const list = await s.api('/api/scenes?limit=100', { key: other.liveKey });
    expect(list.body.data.map((x: { id: number }) => x.id)).not.toContain(id);
  });

  it('needs an API key', async () => {
    for (const [p, method] of [
      ['/api/scenes', 'GET'],
      ['/api/scenes', 'POST'],
      ['/api/scenes/1', 'GET'],
      ['/api/scenes/1', 'PATCH'],
      ['/api/scenes/1', 'DELETE'],
    ] as const) {
      const r = await s.api(p, { method, body: method === 'POST' || method === 'PATCH' ? {} : undefined });
      expect(r.status, `${method} ${p}`).toBe(401);
    }
  });
});

describe('GET /api/scenes cursor paging (issue 16)', () => {
  it('cursor paging lists what offset paging lists, on every sort with ties; foreign or changed cursors are 400', async () => {
    await withSeededTenants(s, async (sql, A, B) => {
      const T = TIMES(sql);
      for (const tenant of [A.tenantId, B.tenantId]) {
        await sql`INSERT INTO scenes (tenant_id, scene_name, times_used, last_used_at, created_at)
          SELECT ${tenant}, ${T.name}, ${T.timesUsed}, ${T.lastUsed}, ${T.created} FROM generate_series(1, 21) g`;
      }
      for (const sort of ['name', 'created', 'used', 'recent']) {
        await expectCursorEqualsOffset(s, A.liveKey, { url: `/api/scenes?sort_by=${sort}`, size: 5, style: 'offset' }, 21);
      }
      const url = '/api/scenes?sort_by=recent&limit=3';
      const cursor = await firstCursor(s, A.liveKey, url);
      await expectRefused(s, A.liveKey, url, tampered(cursor));
      await expectRefused(s, B.liveKey, url, cursor);
      await expectRefused(s, A.liveKey, '/api/scenes?sort_by=created', cursor);
      await expectRefused(s, A.liveKey, '/api/characters?sort_by=recent', cursor);
      await expectRefused(s, A.liveKey, `${url}&offset=3`, cursor, ['cursor and offset cannot be combined']);
    });
  });
});
