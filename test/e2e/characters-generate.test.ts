/**
 * Generation with saved assets, checked on what the sandbox upstream actually received: the character and
 * product generate endpoints (SPEC 4.2, 4.4) and POST /api/images with style presets, characters, products
 * and reference groups (SPEC 4.1 rules 1-5), composed by generation's assets composer
 * (services/generation/src/assets-composer.ts).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TestStack, TestTenant } from '../support/stack.js';
import { type ImageServer, seeder, startAssetsStack, startImageServer } from './products-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let img: ImageServer;
let seed: ReturnType<typeof seeder>;
let since = 0;

interface Received {
  provider: string;
  prompt: string;
  systemInstruction: string | null;
  imageInputs: number;
  aspectRatio: string | null;
  size: string | null;
  n: number | null;
}

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
beforeEach(async () => {
  since = (await (await fetch(`${s.sandboxUrl}/_sandbox/requests?limit=1`)).json()).lastId;
});

/** Upstream requests since the test started. */
async function received(): Promise<Received[]> {
  const r = await (await fetch(`${s.sandboxUrl}/_sandbox/requests?since=${since}`)).json();
  return r.requests;
}

const api = (path: string, body?: unknown, key = t.liveKey) => s.api(path, { key, body });

async function character(body: Record<string, unknown>, key = t.liveKey) {
  const r = await api('/api/characters', body, key);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.data;
}

describe('POST /api/characters/:identifier/generate', () => {
  it('generates with the character (by id and by URL-encoded name) and records its use', async () => {
    const [r1, r2] = [await seed.image(t.tenantId), await seed.image(t.tenantId)];
    const c = await character({
      character_name: 'Sir Lancelot du Lac',
      base_prompt: 'a knight in shining silver armour',
      negative_prompt: 'modern clothes',
      system_instruction: 'Keep his face identical.',
      preferred_aspect_ratio: '3:4',
      reference_image_ids: [r1.id, r2.id],
    });
    const r = await api(`/api/characters/${c.id}/generate`, { scene_prompt: 'riding through a forest', additional_details: 'at dawn' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data).toEqual({
      imageId: expect.any(Number),
      sessionId: expect.any(String),
      fullUrl: expect.any(String),
      thumbnailUrl: expect.any(String),
      objectKey: expect.stringMatching(new RegExp(`^tenants/${t.tenantId}/`)),
      width: expect.any(Number),
      height: expect.any(Number),
      format: 'png',
      sizeBytes: expect.any(Number),
      thumbnailSizeBytes: expect.any(Number),
      prompt: expect.stringContaining('riding through a forest'),
      message: expect.any(String),
    });
    expect(r.body.data.thumbnailSizeBytes).toBeGreaterThan(0);
    const [up] = await received();
    expect(up.prompt).toContain('Character "Sir Lancelot du Lac": a knight in shining silver armour');
    expect(up.prompt).toContain('riding through a forest');
    expect(up.prompt).toContain('at dawn');
    expect(up.systemInstruction).toBe('Keep his face identical.');
    expect(up.imageInputs).toBe(2);
    expect(up.aspectRatio).toBe('3:4'); // the character's default

    const byName = await api(`/api/characters/${encodeURIComponent('Sir Lancelot du Lac')}/generate`, {
      scene_prompt: 'resting by a river',
      aspect_ratio: '16:9',
      override_negative_prompt: 'rain',
    });
    expect(byName.status).toBe(200);
    const ups = await received();
    expect(ups[ups.length - 1].aspectRatio).toBe('16:9');

    const after = (await api(`/api/characters/${c.id}`)).body.data;
    expect(after.times_used).toBe(2);
    expect(after.last_used_at).toEqual(expect.any(String));
    // The generated image records the character.
    const rec = await seed.get(t.tenantId, r.body.data.imageId);
    expect(rec.image?.characterId).toBe(c.id);
  });

  it('validates scene_prompt 5-1500 and finds only own characters', async () => {
    const c = await character({ character_name: 'Limits', base_prompt: 'a quiet librarian' });
    expect((await api(`/api/characters/${c.id}/generate`, { scene_prompt: 'abcde' })).status).toBe(200);
    for (const scene_prompt of ['abcd', 'x'.repeat(1501)]) {
      const r = await api(`/api/characters/${c.id}/generate`, { scene_prompt });
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
    }
    expect((await api(`/api/characters/${c.id}/generate`, { scene_prompt: 'x'.repeat(1500) })).status).toBe(200);
    const missing = await api(`/api/characters/${c.id}/generate`, {});
    expect(missing.body).toEqual({ error: 'Invalid request payload', details: ['scene_prompt is required'] });
    const foreign = await api(`/api/characters/${c.id}/generate`, { scene_prompt: 'in the library' }, other.liveKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'Character not found' });
  });
});

describe('POST /api/characters/generate-multi', () => {
  it('generates one image with 2-5 characters, default landscape', async () => {
    const a = await character({ character_name: 'Multi A', base_prompt: 'a tall woman with red hair' });
    const b = await character({ character_name: 'Multi B', base_prompt: 'a short man with a green hat' });
    const r = await api('/api/characters/generate-multi', { character_ids: [a.id, b.id], scene_prompt: 'playing chess in a park' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data).toEqual({
      imageId: expect.any(Number),
      sessionId: expect.any(String),
      fullUrl: expect.any(String),
      thumbnailUrl: expect.any(String),
      width: expect.any(Number),
      height: expect.any(Number),
      prompt: expect.stringContaining('playing chess in a park'),
      characterCount: 2,
      message: expect.any(String),
    });
    const [up] = await received();
    expect(up.prompt).toContain('1. Multi A: a tall woman with red hair');
    expect(up.prompt).toContain('2. Multi B: a short man with a green hat');
    expect(up.aspectRatio).toBe('4:3'); // landscape

    const five = await Promise.all(
      [1, 2, 3, 4, 5].map((i) => character({ character_name: `Five ${i}`, base_prompt: `person number ${i} of five` })),
    );
    expect(
      (await api('/api/characters/generate-multi', { character_ids: five.map((c) => c.id), scene_prompt: 'a group photo outside' })).status,
    ).toBe(200);
    const bad: [unknown, number][] = [
      [{ character_ids: [a.id], scene_prompt: 'playing chess in a park' }, 400],
      [{ character_ids: [...five.map((c) => c.id), a.id], scene_prompt: 'playing chess in a park' }, 400],
      [{ character_ids: [a.id, b.id], scene_prompt: 'too short' }, 400],
    ];
    for (const [body, status] of bad) {
      const r2 = await api('/api/characters/generate-multi', body);
      expect(r2.status, JSON.stringify(body)).toBe(status);
      expect(r2.body.error).toBe('Invalid request payload');
    }
  });
});

describe('POST /api/products/:id/generate', () => {
  it('generates 1-4 images with the product image as input', async () => {
    const p = await api('/api/products', {
      product_name: 'Sneaker',
      product_url: `${img.url}/red.png`,
      product_description: 'A red running shoe',
    });
    expect(p.status).toBe(200);
    const id = p.body.data.id;
    const r = await api(`/api/products/${id}/generate`, {
      scene_prompt: 'on a marble table',
      number_of_images: 2,
      aspect_ratio: '16:9',
      negative_prompt: 'people',
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const d = r.body.data;
    expect(d).toMatchObject({ productId: id, productName: 'Sneaker', scenePrompt: 'on a marble table', format: 'png' });
    expect(d.images).toHaveLength(2);
    expect(d.images[0]).toEqual({ id: d.imageId, url: d.fullUrl, thumbnail_url: d.thumbnailUrl });
    for (const k of ['imageId', 'width', 'height', 'sizeBytes']) expect(d[k]).toEqual(expect.any(Number));
    for (const k of ['sessionId', 'fullUrl', 'thumbnailUrl', 'prompt', 'message']) expect(d[k]).toEqual(expect.any(String));
    const ups = await received();
    expect(ups).toHaveLength(2); // provA: one call per image
    for (const up of ups) {
      expect(up.prompt).toContain('Product "Sneaker": A red running shoe');
      expect(up.prompt).toContain('on a marble table');
      expect(up.imageInputs).toBe(1);
      expect(up.aspectRatio).toBe('16:9');
    }
    expect((await api(`/api/products/${id}`)).body.data.timesUsed).toBe(1);
    const rec = await seed.get(t.tenantId, d.imageId);
    expect(rec.image?.productReferenceId).toBe(id);

    for (const body of [{ scene_prompt: 'x', number_of_images: 5 }, { scene_prompt: 'x', aspect_ratio: '21:9' }, {}]) {
      const bad = await api(`/api/products/${id}/generate`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
    }
    const foreign = await api(`/api/products/${id}/generate`, { scene_prompt: 'on a table' }, other.liveKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'Product not found' });
  });
});

describe('POST /api/images with saved assets (SPEC 4.1 rules)', () => {
  it('prepends the style preset prompt, uses its defaults only when the request has none', async () => {
    const sp = await api('/api/style-presets', {
      name: 'Comic',
      prompt: 'comic book style,',
      negative_prompt: 'photo',
      system_instruction: 'Bold outlines.',
      aspect_ratio: '2:3',
    });
    const r = await api('/api/images', { prompt: 'a cat on a wall', style_preset_id: sp.body.data.id });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    let [up] = await received();
    expect(up.prompt.startsWith('comic book style,')).toBe(true);
    expect(up.prompt).toContain('a cat on a wall');
    expect(up.systemInstruction).toBe('Bold outlines.');
    expect(up.aspectRatio).toBe('2:3');
    const listed = await api(`/api/images?stylePresetId=${sp.body.data.id}`);
    expect(listed.body.data.map((i: { id: number }) => i.id)).toContain(r.body.data.images[0].record_id);

    since = (await (await fetch(`${s.sandboxUrl}/_sandbox/requests?limit=1`)).json()).lastId;
    const r2 = await api('/api/images', {
      prompt: 'a dog',
      style_preset_name: 'Comic',
      aspect_ratio: '1:1',
      system_instruction: 'Thin lines.',
    });
    expect(r2.status).toBe(200);
    [up] = await received();
    expect(up.aspectRatio).toBe('1:1');
    expect(up.systemInstruction).toBe('Thin lines.');
  });

  it('aspect ratio: scene (reference group) before style preset before character, else 1:1', async () => {
    const ref = await seed.image(t.tenantId);
    const sc = await api('/api/scenes', {
      scene_name: 'Wide scene',
      scene_prompt: 'a wide valley',
      reference_image_ids: [ref.id],
      preferred_aspect_ratio: '21:9',
    });
    const sp = await api('/api/style-presets', { name: 'Tall style', aspect_ratio: '9:16' });
    const ch = await character({ character_name: 'Square guy', base_prompt: 'a man with a square jaw', preferred_aspect_ratio: '1:1' });
    const go = async (body: Record<string, unknown>) => {
      since = (await (await fetch(`${s.sandboxUrl}/_sandbox/requests?limit=1`)).json()).lastId;
      const r = await api('/api/images', { prompt: 'a scene', ...body });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return { r, up: (await received())[0] };
    };
    const all = await go({ reference_group_id: sc.body.data.id, style_preset_id: sp.body.data.id, character_id: ch.id });
    expect(all.up.aspectRatio).toBe('21:9');
    expect(all.up.imageInputs).toBe(1);
    expect(all.up.prompt).toContain('a wide valley');
    expect((await go({ style_preset_id: sp.body.data.id, character_id: ch.id })).up.aspectRatio).toBe('9:16');
    expect((await go({ character_ids: [ch.id] })).up.aspectRatio).toBe('1:1');
    expect((await go({})).up.aspectRatio).toBe('1:1');
    const rec = await seed.get(t.tenantId, all.r.body.data.images[0].record_id);
    expect(rec.image?.referenceGroupIds).toEqual([sc.body.data.id]);
  });

  it('refuses singular and array forms together and unknown assets', async () => {
    const ch = await character({ character_name: 'Combo', base_prompt: 'a person for combos' });
    const both = await api('/api/images', { prompt: 'x', character_id: ch.id, character_ids: [ch.id] });
    expect(both.status).toBe(400);
    expect(both.body.error).toBe('Invalid request payload');
    const unknown = await api('/api/images', { prompt: 'x', character_id: 99999999 });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: 'Character not found' });
  });
});
