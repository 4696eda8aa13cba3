import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestStack, TestTenant } from '../support/stack.js';
import { expectCursorEqualsOffset, expectRefused, firstCursor, TIMES, tampered, withSeededTenants } from './asset-paging-support.js';
import { chars, startAssetsStack } from './products-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;

beforeAll(async () => {
  s = await startAssetsStack();
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
});
afterAll(async () => {
  await s?.stop();
});

const create = (body: unknown, key = t.liveKey) => s.api('/api/style-presets', { key, body });

describe('style presets', () => {
  it('creates, reads, lists, updates and deletes (snake_case)', async () => {
    const c = await create({
      name: 'Watercolor',
      prompt: 'soft watercolor painting,',
      negative_prompt: 'photo',
      system_instruction: 'Paint gently.',
      aspect_ratio: '4:3',
    });
    expect(c.status).toBe(200);
    const p = c.body.data;
    expect(p).toMatchObject({
      name: 'Watercolor',
      prompt: 'soft watercolor painting,',
      negative_prompt: 'photo',
      system_instruction: 'Paint gently.',
      aspect_ratio: '4:3',
    });
    expect(p.id).toEqual(expect.any(Number));
    expect(p.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(p.updated_at).toEqual(expect.any(String));

    const g = await s.api(`/api/style-presets/${p.id}`, { key: t.liveKey });
    expect(g.status).toBe(200);
    expect(g.body.data).toEqual(p);

    const l = await s.api('/api/style-presets', { key: t.liveKey });
    expect(l.status).toBe(200);
    expect(l.body.pagination).toEqual({ limit: 50, offset: 0, total: 1, nextCursor: null });
    expect(l.body.data).toEqual([p]);

    const u = await s.api(`/api/style-presets/${p.id}`, {
      key: t.liveKey,
      method: 'PATCH',
      body: { new_name: 'Watercolour', prompt: null, negative_prompt: null, system_instruction: null, aspect_ratio: null },
    });
    expect(u.status).toBe(200);
    expect(u.body.data).toMatchObject({
      id: p.id,
      name: 'Watercolour',
      prompt: null,
      negative_prompt: null,
      system_instruction: null,
      aspect_ratio: null,
      created_at: p.created_at,
    });
    expect(u.body.data.updated_at).not.toBe(p.updated_at);
    expect(Date.parse(u.body.data.updated_at)).toBeGreaterThan(Date.parse(p.updated_at));

    // Only given fields change.
    const u2 = await s.api(`/api/style-presets/${p.id}`, { key: t.liveKey, method: 'PATCH', body: { prompt: 'ink,' } });
    expect(u2.body.data).toMatchObject({ name: 'Watercolour', prompt: 'ink,', negative_prompt: null });

    const d = await s.api(`/api/style-presets/${p.id}`, { key: t.liveKey, method: 'DELETE' });
    expect(d.status).toBe(200);
    expect(d.body).toEqual({ data: { deleted: true } });
    const gone = await s.api(`/api/style-presets/${p.id}`, { key: t.liveKey });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ error: 'Style preset not found' });
  });

  it('enforces the name length 1-128 with the spec text, on create and on rename', async () => {
    expect((await create({ name: chars(128, 'n') })).status).toBe(200);
    for (const name of ['', '   ', chars(129, 'm')]) {
      const r = await create({ name });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: 'Preset name must be between 1 and 128 characters' });
    }
    const missing = await create({ prompt: 'x' });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('Preset name must be between 1 and 128 characters');

    const one = await create({ name: 'x' });
    expect(one.status).toBe(200);
    const rename = await s.api(`/api/style-presets/${one.body.data.id}`, {
      key: t.liveKey,
      method: 'PATCH',
      body: { new_name: chars(129) },
    });
    expect(rename.status).toBe(400);
    expect(rename.body).toEqual({ error: 'Preset name must be between 1 and 128 characters' });
  });

  it('enforces prompt 2048, negative_prompt 1024, system_instruction 512 at their boundaries', async () => {
    const ok = await create({ name: 'limits-ok', prompt: chars(2048), negative_prompt: chars(1024), system_instruction: chars(512) });
    expect(ok.status).toBe(200);
    const cases: [string, unknown][] = [
      ['prompt', chars(2049)],
      ['negative_prompt', chars(1025)],
      ['system_instruction', chars(513)],
    ];
    for (const [field, value] of cases) {
      const r = await create({ name: `limits-${field}`, [field]: value });
      expect(r.status, field).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
      expect(r.body.details.join(' ')).toContain(field);
    }
    const patch = await s.api(`/api/style-presets/${ok.body.data.id}`, { key: t.liveKey, method: 'PATCH', body: { prompt: chars(2049) } });
    expect(patch.status).toBe(400);
  });

  it('answers 409 on duplicate names (create and rename)', async () => {
    const a = await create({ name: 'Noir' });
    expect(a.status).toBe(200);
    const dup = await create({ name: 'Noir' });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ error: 'Style preset with name Noir already exists' });
    const b = await create({ name: 'Pastel' });
    const rename = await s.api(`/api/style-presets/${b.body.data.id}`, { key: t.liveKey, method: 'PATCH', body: { new_name: 'Noir' } });
    expect(rename.status).toBe(409);
    expect(rename.body).toEqual({ error: 'Style preset with name Noir already exists' });
    // Another tenant may use the same name.
    expect((await create({ name: 'Noir' }, other.liveKey)).status).toBe(200);
  });

  it('isolates tenants and needs an API key', async () => {
    const mine = await create({ name: 'Private style' });
    const id = mine.body.data.id;
    for (const method of ['GET', 'DELETE'] as const) {
      const r = await s.api(`/api/style-presets/${id}`, { key: other.liveKey, method });
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ error: 'Style preset not found' });
    }
    const patch = await s.api(`/api/style-presets/${id}`, { key: other.liveKey, method: 'PATCH', body: { prompt: 'x' } });
    expect(patch.status).toBe(404);
    const list = await s.api('/api/style-presets', { key: other.liveKey });
    expect(list.body.data.map((p: { id: number }) => p.id)).not.toContain(id);

    for (const [path, method] of [
      ['/api/style-presets', 'GET'],
      ['/api/style-presets', 'POST'],
      [`/api/style-presets/${id}`, 'GET'],
      [`/api/style-presets/${id}`, 'PATCH'],
      [`/api/style-presets/${id}`, 'DELETE'],
    ] as const) {
      const r = await s.api(path, { method, body: method === 'POST' || method === 'PATCH' ? { name: 'x' } : undefined });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.body.error).toBe('Invalid or missing API key');
    }
  });

  it('paginates with limit and offset', async () => {
    const tenant = await s.createTenant();
    for (const n of ['a', 'b', 'c']) expect((await create({ name: n }, tenant.liveKey)).status).toBe(200);
    const page = await s.api('/api/style-presets?limit=2&offset=1', { key: tenant.liveKey });
    expect(page.body.pagination).toEqual({ limit: 2, offset: 1, total: 3, nextCursor: null });
    expect(page.body.data.map((p: { name: string }) => p.name)).toEqual(['b', 'c']);
    const bad = await s.api('/api/style-presets?limit=101', { key: tenant.liveKey });
    expect(bad.status).toBe(400);
  });
});

describe('GET /api/style-presets?search= (extension)', () => {
  it('finds in the name and the prompt, case-insensitively, with total and cursor; refuses an over-long term', async () => {
    const tenant = await s.createTenant();
    const made: Record<string, number> = {};
    for (const [name, prompt] of [
      ['Ink wash', 'black sumi ink on rice paper'],
      ['Neon night', 'glowing city lights'],
      ['Sumi garden', null],
      ['Pastel', 'soft chalk'],
    ] as const) {
      const r = await create({ name, prompt }, tenant.liveKey);
      expect(r.status).toBe(200);
      made[name] = r.body.data.id;
    }
    const list = async (q: string, key = tenant.liveKey) => s.api(`/api/style-presets?${q}`, { key });
    const sumi = await list('search=SUMI');
    expect(sumi.status).toBe(200);
    expect(sumi.body.data.map((p: { name: string }) => p.name)).toEqual(['Ink wash', 'Sumi garden']);
    expect(sumi.body.pagination).toEqual({ limit: 50, offset: 0, total: 2, nextCursor: null });
    // A prompt match, and a term without three letters in a row (no index keys: every preset is tested).
    expect((await list('search=chalk')).body.data.map((p: { id: number }) => p.id)).toEqual([made.Pastel]);
    expect((await list('search=on')).body.data.map((p: { name: string }) => p.name)).toEqual(['Ink wash', 'Neon night']);
    expect((await list('search=nothing%20like%20this')).body).toEqual({
      data: [],
      pagination: { limit: 50, offset: 0, total: 0, nextCursor: null },
    });
    // The cursor pages of a search hold its matches only.
    const first = await list('search=i&limit=1');
    expect(first.body.pagination.total).toBe(3);
    const next = await list(`search=i&limit=5&cursor=${first.body.pagination.nextCursor}`);
    expect([...first.body.data, ...next.body.data].map((p: { name: string }) => p.name)).toEqual(['Ink wash', 'Neon night', 'Sumi garden']);
    const long = await list(`search=${'x'.repeat(201)}`);
    expect(long.status).toBe(400);
    expect(long.body).toEqual({ error: 'Invalid request payload', details: ['search must be at most 200 characters'] });
    // Another tenant's search never sees these; no key, no answer.
    const foreign = await list('search=sumi', other.liveKey);
    expect(foreign.status).toBe(200);
    expect(foreign.body.data.map((p: { id: number }) => p.id)).not.toContain(made['Ink wash']);
    expect(foreign.body.data.map((p: { id: number }) => p.id)).not.toContain(made['Sumi garden']);
    const anonymous = await s.api('/api/style-presets?search=sumi');
    expect(anonymous.status).toBe(401);
  });
});

describe('GET /api/style-presets cursor paging (issue 16)', () => {
  it('cursor paging lists what offset paging lists (names tied by case); foreign or changed cursors are 400', async () => {
    await withSeededTenants(s, async (sql, A, B) => {
      const T = TIMES(sql);
      for (const tenant of [A.tenantId, B.tenantId]) {
        await sql`INSERT INTO style_presets (tenant_id, name) SELECT ${tenant}, ${T.name} FROM generate_series(1, 17) g`;
      }
      await expectCursorEqualsOffset(s, A.liveKey, { url: '/api/style-presets', size: 4, style: 'offset' }, 17);
      const url = '/api/style-presets?limit=4';
      const cursor = await firstCursor(s, A.liveKey, url);
      await expectRefused(s, A.liveKey, url, tampered(cursor));
      await expectRefused(s, B.liveKey, url, cursor);
      // A characters cursor of the same order (name) is another list's.
      await s.api('/api/characters', { key: A.liveKey, body: { character_name: 'c1', base_prompt: 'A base prompt of a character' } });
      await s.api('/api/characters', { key: A.liveKey, body: { character_name: 'c2', base_prompt: 'A base prompt of a character' } });
      await expectRefused(s, A.liveKey, url, await firstCursor(s, A.liveKey, '/api/characters?limit=1'));
      await expectRefused(s, A.liveKey, `${url}&offset=4`, cursor, ['cursor and offset cannot be combined']);
    });
  });
});
