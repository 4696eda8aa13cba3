/**
 * POST /api/images and POST /api/edit-image through the gateway with the whole stack and the sandbox
 * upstream: every validation rule, each model's allowed and refused options, the tenant allowlist and
 * default model, sessions, image_to_edit_id, key failover, safety blocks, quota, tenant isolation.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { lastSandboxId, receivedSince, sharp } from './generation-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let since = 0;

beforeAll(async () => {
  // Many generations per tenant: the gateway's per-minute limits are not what this file tests.
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
});
afterAll(async () => {
  await s?.stop();
});
beforeEach(async () => {
  since = await lastSandboxId(s);
});

/** What the sandbox upstream received since the test started. */
const received = () => receivedSince(s, since);

const gen = (body: unknown, key = t.liveKey, headers?: Record<string, string>) => s.api('/api/images', { key, body, headers });
const ok = async (body: unknown, key = t.liveKey, headers?: Record<string, string>) => {
  const r = await gen(body, key, headers);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.data;
};
const invalid = async (body: unknown, key = t.liveKey) => {
  const r = await gen(body, key);
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect(r.body.error).toBe('Invalid request payload');
  return r.body.details as string[];
};

describe('POST /api/images', () => {
  it('generates with the defaults and answers the spec shape', async () => {
    const d = await ok({ prompt: 'a lighthouse at dusk' });
    expect(Object.keys(d).sort()).toEqual(['executionId', 'images', 'metadata']);
    expect(d.metadata).toEqual({ requested: 1, generated: 1, session_id: expect.any(String) });
    const [img] = d.images;
    expect(img).toMatchObject({
      record_id: expect.any(Number),
      full_url: expect.stringMatching(/^http/),
      thumbnail_url: expect.stringMatching(/^http/),
      width: 1024,
      height: 1024,
      size_bytes: expect.any(Number),
      format: 'png',
      prompt: 'a lighthouse at dusk',
      negative_prompt: null,
      has_synthid: true,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    const file = await fetch(img.full_url);
    expect(file.status).toBe(200);
    const meta = await sharp(Buffer.from(await file.arrayBuffer())).metadata();
    expect([meta.width, meta.height]).toEqual([1024, 1024]);
    const [rec] = await received();
    expect(rec).toMatchObject({
      provider: 'provA',
      model: 'flash-lite-image',
      prompt: 'a lighthouse at dusk',
      aspectRatio: '1:1',
      apiKey: 'sandbox-key-a1',
    });
    const list = await s.api(`/api/images/${img.record_id}`, { key: t.liveKey });
    expect(list.body.data).toMatchObject({ operation: 'generate', modelId: 'provA-flash-lite-image', aspectRatio: '1:1' });
  });

  it('needs an API key', async () => {
    const r = await s.api('/api/images', { body: { prompt: 'x' } });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('Invalid or missing API key');
    expect((await s.api('/api/edit-image', { body: { image_id: 1, prompt: 'x' } })).status).toBe(401);
    expect((await s.api('/api/upload-for-editing', { body: { image_url: 'http://example.com/a.png' } })).status).toBe(401);
  });

  describe('validation', () => {
    it('prompt: required, not empty, 16384 provA / 32000 provB', async () => {
      expect(await invalid({})).toEqual(['prompt is required']);
      expect(await invalid({ prompt: '' })).toEqual(['prompt cannot be empty']);
      expect(await invalid({ prompt: 'x'.repeat(16385) })).toEqual(['prompt must be at most 16384 characters for provA models']);
      expect(await invalid({ prompt: 'x'.repeat(32001), model_id: 'provB-image-2' })).toEqual([
        'prompt must be at most 32000 characters for provB models',
      ]);
      await ok({ prompt: `${'word '.repeat(3276)}abcd` }); // 16384 characters
      await ok({ prompt: 'x'.repeat(32000), model_id: 'provB-image-2' });
    });

    it('types are checked strictly and unknown fields refused', async () => {
      expect(await invalid({ prompt: 5, n: '2', use_provA_search: 'yes', character_ids: [1, 'a'], colour: 'red' })).toEqual([
        'colour is not allowed',
        'prompt must be a string',
        'n must be an integer',
        'use_provA_search must be a boolean',
        'character_ids.1 must be an integer',
      ]);
      const r = await s.api('/api/images', { key: t.liveKey, body: '{"prompt":', headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
    });

    it('null where the document forbids it is a 400, as in the document (issue 36: character_ids: null was accepted)', async () => {
      expect(await invalid({ prompt: 'p', character_ids: null })).toEqual(['character_ids must be an array']);
      expect(await invalid({ prompt: 'p', negative_prompt: null, n: null })).toEqual([
        'negative_prompt must be a string',
        'n must be an integer',
      ]);
      const e = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: null, prompt: 'p' } });
      expect(e.status).toBe(400);
    });

    it('integers beyond the wire ranges are a 400 (or an unknown id), never a 500', async () => {
      // n and output_compression travel as int32, ids as int64 read back as safe integers.
      expect(await invalid({ prompt: 'p', n: 4294967297 })).toEqual(['n must be between 1 and 4']);
      expect(await invalid({ prompt: 'p', n: -1e12 })).toEqual(['n must be between 1 and 4']);
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2', output_format: 'jpeg', output_compression: 1e15 })).toEqual([
        'output_compression must be between 0 and 100',
      ]);
      for (const body of [
        { prompt: 'p', image_to_edit_id: 1e20 },
        { prompt: 'p', style_preset_id: 2 ** 60 },
        { prompt: 'p', character_ids: [1, 1e19] },
      ]) {
        const r = await gen(body);
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.body.error).toBe('Invalid request payload');
      }
      const e = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: 2 ** 60, prompt: 'p' } });
      expect(e.status).toBe(400);
      expect(e.body).toEqual({ error: 'Invalid request payload', details: ['image_id must be <= 9007199254740991'] });
    });

    it('negative_prompt, aspect_ratio, n', async () => {
      expect(await invalid({ prompt: 'p', negative_prompt: 'n'.repeat(1025) })).toEqual([
        'negative_prompt must be at most 1024 characters',
      ]);
      expect(await invalid({ prompt: 'p', aspect_ratio: '7:3' })).toEqual([
        'aspect_ratio must be one of: square, portrait, landscape, 1:1, 2:3, 3:2, 3:4, 4:3, 4:5, 5:4, 9:16, 16:9, 21:9',
      ]);
      expect(await invalid({ prompt: 'p', n: 0 })).toEqual(['n must be between 1 and 4']);
      expect(await invalid({ prompt: 'p', n: 5 })).toEqual(['n must be between 1 and 4']);
      const d = await ok({ prompt: 'p', negative_prompt: 'n'.repeat(1024), aspect_ratio: 'portrait', n: 4 });
      expect(d.metadata).toMatchObject({ requested: 4, generated: 4 });
      expect(d.images.map((i: any) => [i.width, i.height])).toEqual(Array(4).fill([896, 1200]));
      expect(d.images[0].negative_prompt).toHaveLength(1024);
      const recs = await received();
      expect(recs).toHaveLength(4);
      expect(recs[0].prompt).toBe(`p\n\nAvoid: ${'n'.repeat(1024)}`);
    });

    it('each aspect ratio and alias reaches the upstream', async () => {
      const ratios: [string, string, number, number][] = [
        ['square', '1:1', 1024, 1024],
        ['landscape', '4:3', 1200, 896],
        ['2:3', '2:3', 848, 1264],
        ['3:2', '3:2', 1264, 848],
        ['4:5', '4:5', 928, 1152],
        ['5:4', '5:4', 1152, 928],
        ['9:16', '9:16', 768, 1376],
        ['16:9', '16:9', 1376, 768],
        ['21:9', '21:9', 1584, 672],
      ];
      const results = await Promise.all(ratios.map(([r]) => ok({ prompt: `ratio ${r}`, aspect_ratio: r })));
      results.forEach((d, i) => {
        expect([d.images[0].width, d.images[0].height]).toEqual([ratios[i][2], ratios[i][3]]);
      });
      const recs = await received();
      for (const [given, canonical] of ratios) expect(recs.find((x) => x.prompt === `ratio ${given}`)?.aspectRatio).toBe(canonical);
    });

    it('reports every problem at once', async () => {
      expect(await invalid({ negative_prompt: 'n'.repeat(1100), aspect_ratio: 'wide', n: 7, quality: 'high' })).toEqual([
        'prompt is required',
        'negative_prompt must be at most 1024 characters',
        expect.stringMatching(/^aspect_ratio must be one of/),
        'n must be between 1 and 4',
        'quality is only supported by provB models',
      ]);
    });

    it('applies the saved-asset rules: singular and array forms together refused, unknown assets 404', async () => {
      const d = await invalid({ prompt: 'p', character_id: 1, character_ids: [1, 2], product_id: 1, product_ids: [2] });
      expect(d.some((x) => /character_id/.test(x) && /character_ids/.test(x))).toBe(true);
      expect(d.some((x) => /product_id/.test(x) && /product_ids/.test(x))).toBe(true);
      const r = await gen({ prompt: 'p', character_id: 987654 });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('Character not found');
    });

    it('session_id and X-Session-Id: 1-200 characters', async () => {
      expect(await invalid({ prompt: 'p', session_id: 's'.repeat(201) })).toEqual(['session_id must be between 1 and 200 characters']);
      expect(await invalid({ prompt: 'p', session_id: '' })).toEqual(['session_id must be between 1 and 200 characters']);
      const r = await gen({ prompt: 'p' }, t.liveKey, { 'x-session-id': 'h'.repeat(201) });
      expect(r.status).toBe(400);
      expect(r.body.details).toEqual(['X-Session-Id must be between 1 and 200 characters']);
    });

    it('image_to_edit_id must be a positive integer of the tenant', async () => {
      expect(await invalid({ prompt: 'p', image_to_edit_id: 0 })).toEqual(['image_to_edit_id must be a positive integer']);
      const r = await gen({ prompt: 'p', image_to_edit_id: 99_999_999 });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('Image not found');
    });
  });

  describe('models', () => {
    it('provA-flash-lite-image: fixed at 1K, no search; thinking allowed', async () => {
      await ok({ prompt: 'lite 1k', resolution_tier: '1k', enable_thinking: true });
      expect(await invalid({ prompt: 'p', resolution_tier: '2k' })).toEqual([
        'resolution_tier 2k is not available for provA-flash-lite-image (fixed at 1K); use provA-flash-image or provA-pro-image',
      ]);
      expect(await invalid({ prompt: 'p', resolution_tier: '4k' })).toHaveLength(1);
      expect(await invalid({ prompt: 'p', resolution_tier: '0.5k' })).toHaveLength(1);
      expect(await invalid({ prompt: 'p', use_provA_search: true })).toEqual([
        'use_provA_search needs provA-flash-image or provA-pro-image',
      ]);
      const [rec] = await received();
      expect(rec).toMatchObject({ imageSize: null, thinkingConfig: expect.any(Object) });
    });

    it('provA-flash-image: tiers, search; refuses provB options', async () => {
      const d = await ok({
        prompt: 'flash 2k',
        model_id: 'provA-flash-image',
        resolution_tier: '2k',
        aspect_ratio: '16:9',
        use_provA_search: true,
      });
      expect(d.images[0]).toMatchObject({ width: 2752, height: 1536, has_synthid: true });
      const d2 = await ok({ prompt: 'flash half', model_id: 'provA-flash-image', resolution_tier: '0.5k' });
      expect([d2.images[0].width, d2.images[0].height]).toEqual([512, 512]);
      const recs = await received();
      expect(recs.map((r) => [r.model, r.imageSize, r.tools])).toEqual([
        ['flash-image', '2K', ['googleSearch']],
        ['flash-image', '512', []],
      ]);
      expect(
        await invalid({
          prompt: 'p',
          model_id: 'provA-flash-image',
          size: '1024x1024',
          output_format: 'jpeg',
          quality: 'high',
          output_compression: 5,
          background: 'opaque',
          moderation: 'low',
        }),
      ).toEqual([
        'size is only supported by provB models',
        'output_format is only supported by provB models',
        'quality is only supported by provB models',
        'output_compression is only supported by provB models',
        'background is only supported by provB models',
        'moderation is only supported by provB models',
      ]);
      expect(await invalid({ prompt: 'p', model_id: 'provA-flash-image', resolution_tier: '8k' })).toEqual([
        'resolution_tier must be one of: 0.5k, 1k, 2k, 4k',
      ]);
    });

    it('provA-pro-image: 4K tier, search, system instruction', async () => {
      const d = await ok({
        prompt: 'pro 4k',
        model_id: 'provA-pro-image',
        resolution_tier: '4k',
        use_provA_search: true,
        system_instruction: 'cinematic',
      });
      expect(d.images[0]).toMatchObject({ width: 4096, height: 4096 });
      const [rec] = await received();
      expect(rec).toMatchObject({ model: 'pro-image', imageSize: '4K', systemInstruction: 'cinematic', tools: ['googleSearch'] });
      const img = await s.api(`/api/images/${d.images[0].record_id}`, { key: t.liveKey });
      expect(img.body.data.modelId).toBe('provA-pro-image');
    });

    it('provB-image-2: size, jpeg compression, quality; no xhigh/max, no transparency, no provA options', async () => {
      const d = await ok({
        prompt: 'b2 jpeg',
        model_id: 'provB-image-2',
        size: '1024x1536',
        output_format: 'jpeg',
        output_compression: 60,
        quality: 'high',
        moderation: 'low',
        background: 'opaque',
      });
      expect(d.images[0]).toMatchObject({ width: 1024, height: 1536, format: 'jpeg', has_synthid: false });
      const [rec] = await received();
      expect(rec).toMatchObject({
        provider: 'provB',
        endpoint: 'generations',
        model: 'image-2',
        size: '1024x1536',
        outputFormat: 'jpeg',
        outputCompression: 60,
        quality: 'high',
        moderation: 'low',
        background: 'opaque',
        n: 1,
        apiKey: 'sandbox-key-b1',
      });
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2', quality: 'xhigh' })).toEqual([
        'quality xhigh requires provB-image-2.5-flare or provB-image-2.5-sunburst',
      ]);
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2', quality: 'max' })).toEqual([
        'quality max requires provB-image-2.5-flare or provB-image-2.5-sunburst',
      ]);
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2', background: 'transparent' })).toEqual([
        'background transparent requires provB-image-2.5-flare or provB-image-2.5-sunburst',
      ]);
      expect(
        await invalid({ prompt: 'p', model_id: 'provB-image-2', resolution_tier: '1k', use_provA_search: true, enable_thinking: true }),
      ).toEqual([
        'resolution_tier is only supported by provA models (use size with provB models)',
        'use_provA_search is only supported by provA models',
        'enable_thinking is only supported by provA models',
      ]);
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2', output_compression: 50 })).toEqual([
        'output_compression is only supported with output_format jpeg or webp',
      ]);
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2', output_format: 'webp', output_compression: 101 })).toEqual([
        'output_compression must be between 0 and 100',
      ]);
      expect(
        await invalid({
          prompt: 'p',
          model_id: 'provB-image-2',
          output_format: 'bmp',
          quality: 'best',
          moderation: 'none',
          background: 'blue',
        }),
      ).toEqual([
        'output_format must be one of: png, jpeg, webp',
        'quality must be one of: low, medium, high, auto, xhigh, max',
        'background must be one of: auto, opaque, transparent',
        'moderation must be one of: auto, low',
      ]);
    });

    it('provB size rules', async () => {
      const m = { prompt: 'p', model_id: 'provB-image-2' };
      expect(await invalid({ ...m, size: 'huge' })).toEqual(['size must be auto or WIDTHxHEIGHT (e.g. 1024x1536)']);
      expect(await invalid({ ...m, size: '1000x1000' })).toEqual(['size width and height must be multiples of 16']);
      expect(await invalid({ ...m, size: '3856x1440' })).toEqual(['size longest edge must be at most 3840 pixels']);
      expect(await invalid({ ...m, size: '2448x800' })).toEqual(['size long:short ratio must be at most 3:1']);
      expect(await invalid({ ...m, size: '800x800' })).toEqual(['size must have between 655,360 and 8,294,400 pixels in total']);
      expect(await invalid({ ...m, size: '3840x2176' })).toEqual(['size must have between 655,360 and 8,294,400 pixels in total']);
      expect(await invalid({ ...m, size: '1024x1024', aspect_ratio: '16:9' })).toEqual(['aspect_ratio 16:9 does not match size 1024x1024']);
      const auto = await ok({ ...m, prompt: 'auto size', size: 'auto' });
      expect([auto.images[0].width, auto.images[0].height]).toEqual([1024, 1024]);
      const edge = await ok({ ...m, prompt: 'min pixels', size: '1024x640' });
      expect([edge.images[0].width, edge.images[0].height]).toEqual([1024, 640]);
      const ratio = await ok({ ...m, prompt: 'ratio to size', aspect_ratio: '21:9' });
      expect([ratio.images[0].width, ratio.images[0].height]).toEqual([1344, 576]);
      expect((await received()).map((r) => r.size)).toEqual(['auto', '1024x640', '1344x576']);
    });

    it('provB 2.5 models: xhigh/max and transparent png/webp, n in one call', async () => {
      const flare = await ok({ prompt: 'flare', model_id: 'provB-image-2.5-flare', quality: 'xhigh', background: 'transparent', n: 2 });
      expect(flare.images).toHaveLength(2);
      const png = await sharp(Buffer.from(await (await fetch(flare.images[0].full_url)).arrayBuffer())).metadata();
      expect([png.format, png.hasAlpha]).toEqual(['png', true]);
      const sun = await ok({
        prompt: 'sunburst',
        model_id: 'provB-image-2.5-sunburst',
        quality: 'max',
        background: 'transparent',
        output_format: 'webp',
      });
      expect(sun.images[0].format).toBe('webp');
      const recs = await received();
      expect(recs.map((r) => [r.model, r.n, r.quality, r.background])).toEqual([
        ['image-2.5-flare', 2, 'xhigh', 'transparent'],
        ['image-2.5-sunburst', 1, 'max', 'transparent'],
      ]);
      expect(await invalid({ prompt: 'p', model_id: 'provB-image-2.5-flare', background: 'transparent', output_format: 'jpeg' })).toEqual([
        'background transparent requires output_format png or webp',
      ]);
    });

    it('model_id must exist and be in the tenant allowlist; the tenant model is the default', async () => {
      expect((await invalid({ prompt: 'p', model_id: 'provC' }))[0]).toMatch(
        /^model_id must be one of: provA-flash-lite-image, provA-flash-image/,
      );
      const narrow = await s.createTenant({ allowed_models: ['provA-flash-lite-image', 'provB-image-2'], model_id: 'provB-image-2' });
      const d = await ok({ prompt: 'tenant default' }, narrow.liveKey);
      expect(d.images[0]).toMatchObject({ has_synthid: false });
      expect((await received()).map((r) => r.provider)).toEqual(['provB']);
      expect(await invalid({ prompt: 'p', model_id: 'provA-pro-image' }, narrow.liveKey)).toEqual([
        'model_id provA-pro-image is not allowed for this tenant (allowed: provA-flash-lite-image, provB-image-2)',
      ]);
      await ok({ prompt: 'allowed lite', model_id: 'provA-flash-lite-image' }, narrow.liveKey);
    });
  });

  describe('sessions', () => {
    it('uses X-Session-Id, lets session_id win, generates one otherwise', async () => {
      const sid = `sess-${Date.now()}`;
      const a = await ok({ prompt: 'in header session' }, t.liveKey, { 'x-session-id': sid });
      expect(a.metadata.session_id).toBe(sid);
      const b = await ok({ prompt: 'in body session', session_id: `${sid}-body` }, t.liveKey, { 'x-session-id': sid });
      expect(b.metadata.session_id).toBe(`${sid}-body`);
      const sess = await s.api(`/api/sessions/${sid}`, { key: t.liveKey });
      expect(sess.status).toBe(200);
      expect(sess.body.data.images.map((i: any) => i.id)).toEqual([a.images[0].record_id]);
      expect((await s.api(`/api/sessions/${sid}`, { key: other.liveKey })).status).toBe(404);
    });
  });

  describe('edits', () => {
    it('image_to_edit_id edits a stored image: parent recorded, shape kept, source sent upstream', async () => {
      const src = await ok({ prompt: 'tall source', aspect_ratio: '9:16' });
      const d = await ok({ prompt: 'add rain', image_to_edit_id: src.images[0].record_id });
      expect(d.images[0]).toMatchObject({ width: 768, height: 1376, parent_image_id: src.images[0].record_id });
      const recs = await received();
      expect(recs[1]).toMatchObject({ prompt: 'add rain', imageInputs: 1, aspectRatio: '9:16' });
      const detail = await s.api(`/api/images/${d.images[0].record_id}`, { key: t.liveKey });
      expect(detail.body.data).toMatchObject({ operation: 'edit', parent_image_id: src.images[0].record_id });
      const ex = await s.api(`/api/executions/${d.executionId}`, { key: t.liveKey });
      expect(ex.body.execution.toolName).toBe('edit_image');
    });

    it('POST /api/edit-image answers the flat shape; a ratio overrides the source shape; provB edits are multipart', async () => {
      const src = await ok({ prompt: 'edit me', aspect_ratio: '3:2' });
      const id = src.images[0].record_id;
      const r = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: id, prompt: 'make it blue', negative_prompt: 'red' } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body).toMatchObject({
        thumbnailUrl: expect.any(String),
        fullUrl: expect.any(String),
        width: 1264,
        height: 848,
        sizeBytes: expect.any(Number),
        format: 'png',
        prompt: 'make it blue',
        parentImageId: id,
        recordId: expect.any(Number),
        createdAt: expect.any(String),
      });
      const r2 = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: id, prompt: 'square crop', aspect_ratio: 'square' } });
      expect([r2.body.width, r2.body.height]).toEqual([1024, 1024]);
      const r3 = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: id, prompt: 'b edit', model_id: 'provB-image-2' } });
      expect(r3.status, JSON.stringify(r3.body)).toBe(200);
      expect([r3.body.width, r3.body.height, r3.body.parentImageId]).toEqual([1536, 1024, id]);
      const recs = await received();
      expect(recs.map((x) => [x.provider, x.endpoint, x.imageInputs])).toEqual([
        ['provA', 'generateContent', 0],
        ['provA', 'generateContent', 1],
        ['provA', 'generateContent', 1],
        ['provB', 'edits', 1],
      ]);
      expect(recs[1].prompt).toBe('make it blue\n\nAvoid: red');
    });

    it('POST /api/edit-image validation and isolation', async () => {
      let r = await s.api('/api/edit-image', { key: t.liveKey, body: {} });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: 'Invalid request payload', details: ['image_id is required', 'prompt is required'] });
      r = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: 'x', prompt: 'p' } });
      expect(r.body.details).toEqual(['image_id must be an integer']);
      r = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: 1, prompt: 'p', aspect_ratio: 'odd' } });
      expect(r.body.details[0]).toMatch(/^aspect_ratio must be one of/);
      const mine = await ok({ prompt: 'private picture' });
      r = await s.api('/api/edit-image', { key: other.liveKey, body: { image_id: mine.images[0].record_id, prompt: 'steal it' } });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('Image not found');
      r = await gen({ prompt: 'steal it', image_to_edit_id: mine.images[0].record_id }, other.liveKey);
      expect(r.status).toBe(404);
      expect((await received()).filter((x) => x.prompt.includes('steal'))).toHaveLength(0);
    });
  });

  describe('providers', () => {
    it('fails over to the next key when the first is rejected (401)', async () => {
      const ft = await s.createTenant({
        provider_credentials: { provA: ['bad-key-1', 'sandbox-key-a2'], provB: ['quota-key-1', 'sandbox-key-b2'] },
      });
      const d = await ok({ prompt: 'failover please' }, ft.liveKey);
      expect(d.metadata.generated).toBe(1);
      const b = await ok({ prompt: 'failover b', model_id: 'provB-image-2' }, ft.liveKey);
      expect(b.metadata.generated).toBe(1);
      expect((await received()).map((r) => [r.provider, r.apiKey, r.status])).toEqual([
        ['provA', 'bad-key-1', 401],
        ['provA', 'sandbox-key-a2', 200],
        ['provB', 'quota-key-1', 429],
        ['provB', 'sandbox-key-b2', 200],
      ]);
      const ex = await s.api(`/api/executions/${d.executionId}`, { key: ft.liveKey });
      expect(ex.body.execution.logEntries.map((l: any) => l.message)).toContain(
        'provA key 1 of 2 refused (auth, HTTP 401); trying the next key',
      );
    });

    it('all keys rejected: 502; no credentials for a provider: 400', async () => {
      const bad = await s.createTenant({ provider_credentials: { provA: ['bad-1', 'bad-2'] } });
      const r = await gen({ prompt: 'nope' }, bad.liveKey);
      expect(r.status).toBe(502);
      expect(r.body.error).toBe('Image generation failed: provider provA rejected every configured API key');
      const r2 = await gen({ prompt: 'nope', model_id: 'provB-image-2' }, bad.liveKey);
      expect(r2.status).toBe(400);
      expect(r2.body.error).toBe('No provB credentials are configured for this tenant');
    });

    it('a safety block is a 400 with the upstream reason and a failed execution; nothing is stored', async () => {
      const sid = `safety-${Date.now()}`;
      const r = await gen({ prompt: 'something awful [[safety]]', session_id: sid });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({
        error: 'Content blocked by provider safety filters: SAFETY',
        details: { provider: 'provA', reason: 'SAFETY' },
      });
      const rb = await gen({ prompt: 'awful b [[safety]]', model_id: 'provB-image-2', session_id: sid });
      expect(rb.status).toBe(400);
      expect(rb.body.error).toMatch(/^Content blocked by provider safety filters: Your request was rejected by the safety system/);
      const logs = await s.api(`/api/sessions/${sid}/logs`, { key: t.liveKey });
      expect(logs.body.executions.map((e: any) => [e.status, e.error])).toEqual([
        ['failed', expect.stringMatching(/^Content blocked by provider safety filters/)],
        ['failed', 'Content blocked by provider safety filters: SAFETY'],
      ]);
      const list = await s.api(`/api/images?sessionId=${sid}`, { key: t.liveKey });
      expect(list.body.pagination.total).toBe(0);
    });

    it('an upstream error is a 502 and the execution fails', async () => {
      const r = await gen({ prompt: 'server trouble [[fail]]' });
      expect(r.status).toBe(502);
      expect(r.body.error).toBe('Image generation failed: provider provA is not available');
    });
  });

  it('402 once the monthly quota is used up: nothing stored, nothing billed', async () => {
    const small = await s.createTenant({ monthly_quota_mb: 1 });
    // The request that crosses the quota is still served (usage's rule); 3 pictures of 4K are ~1.4 MB.
    const first = await ok({ prompt: 'big pictures', model_id: 'provA-pro-image', resolution_tier: '4k', n: 3 }, small.liveKey);
    const stored = first.images.length;
    // usage learns of the stored bytes from ImageStored events
    await waitFor(async () => (await s.api('/api/profile', { key: small.liveKey })).body?.tenant?.quotas?.monthlyUsedMb >= 1, {
      message: 'usage to catch up (1 MB used)',
      interval: 100,
    });
    const before = await lastSandboxId(s);
    const r = await gen({ prompt: 'one more' }, small.liveKey);
    expect(r.status).toBe(402);
    expect(r.body).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
    const list = await s.api('/api/images', { key: small.liveKey });
    expect(list.body.pagination.total).toBe(stored);
    const usage = await s.api('/api/usage', { key: small.liveKey });
    expect(usage.body.data.months[0].total_images).toBe(stored);
    // the provider was asked (quota is checked with the bytes in hand) but nothing was kept
    expect((await receivedSince(s, before)).map((x) => x.prompt)).toEqual(['one more']);
  });
});
