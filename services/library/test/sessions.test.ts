import type { StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { sessionImageJson } from '@imagegen/operations';
import { PLAIN_KEY_SQL } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionImagesJson, sessionImagesJsonParts } from '../src/images/store.js';
import { sessionImageRawSafe, sessionJsonPlain } from '../src/images/types.js';
import { type LibraryHarness, makeImage, startLibrary, storeRequest } from './support.js';

let h: LibraryHarness;
let png: Buffer;
beforeAll(async () => {
  h = await startLibrary();
  png = await makeImage(30, 20);
});
afterAll(async () => {
  await h?.stop();
});

const store = (tenantId: string, over: Partial<StoreImageRequest>) =>
  h.client.storeImage(storeRequest({ tenantId, sessionId: 's', data: png, aspectRatio: '3:2', ...over }), h.principal(tenantId));

describe('sessions', () => {
  it('TouchSession creates once, validates the id, reports capacity', async () => {
    const a = await h.client.touchSession({ sessionId: 'new-one', tenantId: '' }, h.principal('tS'));
    expect(a).toEqual({ sessionId: 'new-one', imageCount: 0, remaining: 1000, created: true });
    const b = await h.client.touchSession({ sessionId: 'new-one', tenantId: '' }, h.principal('tS'));
    expect(b.created).toBe(false);
    await expect(h.client.touchSession({ sessionId: '', tenantId: '' }, h.principal('tS'))).rejects.toMatchObject({ status: 400 });
    await expect(h.client.touchSession({ sessionId: 'z'.repeat(201), tenantId: '' }, h.principal('tS'))).rejects.toMatchObject({
      status: 400,
    });
  });

  it('lists with totals, most recently active first; detail lists images oldest first; tenant-scoped', async () => {
    await store('tL', { sessionId: 'one', tokens: 7 });
    await store('tL', { sessionId: 'one', operation: 'edit', tokens: 3 });
    await store('tL', { sessionId: 'two' });
    await store('tL2', { sessionId: 'one' });
    const r = await h.client.listSessions({ limit: 0, offset: 0 }, h.principal('tL'));
    expect(r).toMatchObject({ total: 2, limit: 20, offset: 0 });
    expect(r.sessions.map((x) => x.sessionId)).toEqual(['two', 'one']);
    expect(r.sessions[1]).toMatchObject({
      tenantId: 'tL',
      isActive: true,
      totalImages: 2,
      totalEdits: 1,
      totalBytes: png.length * 2,
      totalTokens: 10,
    });
    const capped = await h.client.listSessions({ limit: 1000, offset: 1 }, h.principal('tL'));
    expect(capped).toMatchObject({ limit: 100, offset: 1 });
    expect(capped.sessions.map((x) => x.sessionId)).toEqual(['one']);

    const d = await h.client.getSession({ sessionId: 'one', asJson: false, sessionOnly: false }, h.principal('tL'));
    expect(d.session?.totalImages).toBe(2);
    expect(d.images.map((i) => i.operation)).toEqual(['generate', 'edit']);
    const other = await h.client.getSession({ sessionId: 'one', asJson: false, sessionOnly: false }, h.principal('tL2'));
    expect(other.images).toHaveLength(1);
    await expect(h.client.getSession({ sessionId: 'two', asJson: false, sessionOnly: false }, h.principal('tL2'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Session not found' },
    });
    await expect(h.client.getSession({ sessionId: '', asJson: false, sessionOnly: false }, h.principal('tL'))).rejects.toMatchObject({
      status: 404,
    });

    // session_only: the record alone (an existence check), the same 404s.
    const only = await h.client.getSession({ sessionId: 'one', asJson: false, sessionOnly: true }, h.principal('tL'));
    expect(only.session).toEqual(d.session);
    expect(only.images).toEqual([]);
    expect(only.imagesJson).toHaveLength(0);
    await expect(h.client.getSession({ sessionId: 'two', asJson: true, sessionOnly: true }, h.principal('tL2'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Session not found' },
    });
  });
});

describe('GetSession as_json (the images rendered by PostgreSQL in their session detail form)', () => {
  const insert = (tenant: string, session: string, r: Record<string, unknown>) => h.sql`
    INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
      thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id, resolution_tier, parent_image_id,
      style_preset_id, product_reference_id, reference_group_ids, is_reference, created_at)
    VALUES (${tenant}, ${session}, ${r.objectKey as string}, ${`tenants/${tenant}/thumbnails/${r.key}.webp`}, 'image/png', 'png', 3, 4,
      ${r.size as number}, 9, ${r.prompt as string}, ${(r.negative as string | null) ?? null}, ${r.operation as string}, '3:4',
      'provA-pro-image', ${r.tier as string}, ${(r.parent as number | null) ?? null}, ${(r.style as number | null) ?? null},
      ${(r.product as number | null) ?? null}, ${(r.groups as string | null) ?? null}::bigint[], ${r.reference as boolean},
      ${r.at as string}::text::timestamptz)`; // through text: a timestamptz parameter would go through a JS Date (milliseconds)
  const both = async (tenant: string, sessionId: string) => {
    const records = await h.client.getSession({ sessionId, asJson: false, sessionOnly: false }, h.principal(tenant));
    const json = await h.client.getSession({ sessionId, asJson: true, sessionOnly: false }, h.principal(tenant));
    return { records, json, got: json.imagesJson.length ? JSON.parse(Buffer.from(json.imagesJson).toString('utf8')) : undefined };
  };

  it('equals sessionImageJson of the records field for field, oldest first; the same session; tenant-scoped', async () => {
    const T = 'tSJ';
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count, is_active) VALUES (${T}, 'sJ', 0, true), (${T}, 'empty', 0, true)`;
    const rows = [
      {
        key: 'a',
        at: '2025-03-01T10:00:00.123999Z',
        negative: null,
        prompt: 'ünïcödé "quoted" \\ back\nline',
        size: 2 ** 40,
        tier: '',
        operation: 'generate',
        groups: null,
        reference: false,
      },
      {
        key: 'b',
        at: '2025-03-01T10:00:00.123001Z',
        negative: '',
        prompt: 'same millisecond, earlier',
        size: 1,
        tier: '2k',
        operation: 'edit',
        parent: 5,
        style: 7,
        product: 9,
        groups: '{}',
        reference: true,
      },
      {
        key: 'c',
        at: '1999-12-31T23:59:59.999999+02:00',
        negative: 'dark',
        prompt: 'old',
        size: 5,
        tier: '4k',
        operation: 'generate',
        groups: '{3,4}',
        reference: false,
      },
    ];
    for (const r of rows) await insert(T, 'sJ', { ...r, objectKey: `tenants/${T}/images/${r.key}.png` });
    await insert('tSJother', 'sJ', { ...rows[0], objectKey: 'tenants/tSJother/images/x.png' });

    const { records, json, got } = await both(T, 'sJ');
    expect(records.images.map((i) => i.prompt)).toEqual(['old', 'same millisecond, earlier', rows[0].prompt]);
    expect(json.images).toEqual([]);
    expect(json.session).toEqual(records.session);
    const expected = JSON.parse(JSON.stringify(records.images.map(sessionImageJson)));
    expect(got).toEqual(expected);
    expect(Object.keys(got[0])).toEqual(Object.keys(expected[0])); // same field order too
    expect(got[2]).toMatchObject({ createdAt: '2025-03-01T10:00:00.123Z', sizeBytes: 2 ** 40, negativePrompt: null, resolutionTier: null });
    expect(got[1]).toMatchObject({ referenceGroupIds: [], parent_image_id: 5, stylePresetId: 7, productReferenceId: 9, isReference: true });
    expect(got[0]).toMatchObject({ referenceGroupIds: [3, 4], fullUrl: `http://files.test/files/tenants/${T}/images/c.png` });

    expect(Buffer.from((await both(T, 'empty')).json.imagesJson).toString('utf8')).toBe('[]');
    await expect(
      h.client.getSession({ sessionId: 'sJ', asJson: true, sessionOnly: false }, h.principal('tSJnobody')),
    ).rejects.toMatchObject({
      status: 404,
      body: { error: 'Session not found' },
    });
  });

  it('falls back to the records when a key is not plain (its URL encoded as publicUrl does)', async () => {
    const T = 'tSJodd';
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count, is_active) VALUES (${T}, 'odd', 0, true)`;
    const row = { key: 'o', at: '2025-01-01T00:00:00Z', prompt: 'odd', size: 1, tier: '1k', operation: 'generate', reference: false };
    await insert(T, 'odd', { ...row, objectKey: `tenants/${T}/images/with space.png` });
    const { records, json } = await both(T, 'odd');
    expect(json.imagesJson).toHaveLength(0);
    expect(json.images).toEqual(records.images);
    expect(sessionImageJson(json.images[0]).fullUrl).toMatch(/with%20space\.png$/);
  });

  it('falls back to the records when an enumerated field holds what JSON escapes, whole or for the images added', async () => {
    const T = 'tSJenum';
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count, is_active) VALUES (${T}, 'en', 0, true)`;
    const row = { at: '2025-01-01T00:00:00Z', prompt: 'p', size: 1, tier: '1k', operation: 'generate', reference: false };
    await insert(T, 'en', { ...row, key: 'a', objectKey: `tenants/${T}/images/a.png` });
    expect((await both(T, 'en')).got).toHaveLength(1); // rendered and kept
    // A new image with a model id a JSON string must escape: the kept rendering is completed image by image (parts).
    await insert(T, 'en', { ...row, key: 'b', at: '2025-01-02T00:00:00Z', objectKey: `tenants/${T}/images/b.png` });
    await h.sql`UPDATE images SET model_id = ${'model "q" \\ \n'} WHERE tenant_id = ${T} AND object_key LIKE '%/b.png'`;
    const again = await both(T, 'en');
    expect(again.json.imagesJson).toHaveLength(0);
    expect(again.json.images).toEqual(again.records.images);
    expect(again.records.images[1].modelId).toBe('model "q" \\ \n');
    // Read whole (nothing kept for this URL prefix): the same.
    expect(await sessionImagesJson(h.sql, T, 'en', 1000, 'http://elsewhere/')).toBeUndefined();
    expect(await sessionImagesJsonParts(h.sql, T, 'en', 1000, 'http://elsewhere/', [])).toBeUndefined();
  });

  it('images stored through StoreImage carry their verdict (json_plain) and render as their records do', async () => {
    const T = 'tSJstored';
    await store(T, { sessionId: 'st', prompt: 'a "stored" one', tokens: 3 });
    await store(T, { sessionId: 'st', operation: 'edit', resolutionTier: '2K', modelId: 'provB-image' });
    await store(T, { sessionId: 'st', modelId: 'model "q" \\ odd' }); // decided false: the session renders from its records
    const verdicts = await h.sql`SELECT model_id, json_plain FROM images WHERE tenant_id = ${T} ORDER BY id`;
    expect(verdicts.map((r) => r.json_plain)).toEqual([true, true, false]);
    const mixed = await both(T, 'st');
    expect(mixed.json.imagesJson).toHaveLength(0);
    expect(mixed.json.images).toEqual(mixed.records.images);

    await h.sql`DELETE FROM images WHERE tenant_id = ${T} AND json_plain = false`;
    const plain = await both(T, 'st');
    expect(plain.got).toEqual(JSON.parse(JSON.stringify(plain.records.images.map(sessionImageJson))));
    expect(plain.got.map((i: { operation: string }) => i.operation)).toEqual(['generate', 'edit']);
  });

  it('an UPDATE of a checked column drops the stored verdict (the session falls back); other columns keep it', async () => {
    const T = 'tSJupd';
    await store(T, { sessionId: 'up' });
    await store(T, { sessionId: 'up' });
    expect((await both(T, 'up')).got).toHaveLength(2);
    await h.sql`UPDATE images SET prompt = 'fixed by hand' WHERE tenant_id = ${T}`;
    expect((await h.sql`SELECT json_plain FROM images WHERE tenant_id = ${T}`).map((r) => r.json_plain)).toEqual([true, true]);
    const [first] = await h.sql`SELECT id FROM images WHERE tenant_id = ${T} ORDER BY id LIMIT 1`;
    await h.sql`UPDATE images SET model_id = ${'model "q" \\ \n'} WHERE id = ${first.id}`;
    const verdicts = await h.sql`SELECT json_plain FROM images WHERE tenant_id = ${T} ORDER BY id`;
    expect(verdicts.map((r) => r.json_plain)).toEqual([null, true]);
    const again = await both(T, 'up');
    expect(again.json.imagesJson).toHaveLength(0);
    expect(again.json.images).toEqual(again.records.images);
    expect(again.records.images[0].modelId).toBe('model "q" \\ \n');
  });

  it("the writer's verdict (sessionJsonPlain) is the SQL check's on random values (property)", async () => {
    const alphabet = ['a', 'Z', '0', '.', '..', '/', '-', '_', '~', ':', '+', ' ', '"', '\\', '\n', '\t', '\u0001', 'é', '😀', '%', '<'];
    let seed = 16;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const word = (plainish: boolean) =>
      Array.from({ length: 1 + rand(8) }, () => (plainish && rand(4) > 0 ? 'abc/._-~:+ '[rand(11)] : alphabet[rand(alphabet.length)])).join(
        '',
      );
    const cases = Array.from({ length: 400 }, () => {
      const plainish = rand(3) > 0; // most mostly plain, so both verdicts occur often
      return {
        objectKey: `tenants/t/images/${word(plainish)}`,
        thumbnailKey: rand(5) === 0 ? word(false) : `tenants/t/thumbnails/${word(true)}`,
        operation: rand(6) === 0 ? word(false) : 'generate',
        aspectRatio: rand(6) === 0 ? word(plainish) : '16:9',
        modelId: rand(3) === 0 ? word(plainish) : 'provA-pro-image',
        resolutionTier: rand(6) === 0 ? word(plainish) : '2k',
        format: rand(8) === 0 ? word(plainish) : 'png',
        mimeType: rand(8) === 0 ? word(plainish) : 'image/png',
      };
    });
    const col = (k: keyof (typeof cases)[number]) => cases.map((c) => c[k]);
    const rows = await h.sql.unsafe(
      `SELECT ${sessionImageRawSafe('$9')} AS plain
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY
         AS t(object_key, thumbnail_key, operation, aspect_ratio, model_id, resolution_tier, format, mime_type, n),
         LATERAL (SELECT NULL::boolean AS json_plain) AS undecided
       ORDER BY n`,
      [
        col('objectKey'),
        col('thumbnailKey'),
        col('operation'),
        col('aspectRatio'),
        col('modelId'),
        col('resolutionTier'),
        col('format'),
        col('mimeType'),
        PLAIN_KEY_SQL,
      ],
    );
    const sqlVerdicts = rows.map((r) => r.plain);
    const jsVerdicts = cases.map(sessionJsonPlain);
    expect(jsVerdicts).toEqual(sqlVerdicts);
    expect(new Set(jsVerdicts)).toEqual(new Set([true, false]));
  });

  it('escapes the session id, the text and the URL prefix as JSON does', async () => {
    const T = 'tSJesc';
    const sid = 'sé "q" \\ \t';
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count, is_active) VALUES (${T}, ${sid}, 0, true)`;
    await insert(T, sid, {
      key: 'e',
      at: '2025-01-01T00:00:00Z',
      prompt: '\u0001 ctrl, "quote", \\, 😀',
      negative: '</script>',
      size: 1,
      tier: '1k',
      operation: 'generate',
      reference: false,
      objectKey: `tenants/${T}/images/e.png`,
    });
    const prefix = 'http://x.test/"odd"\\path/';
    const whole = await sessionImagesJson(h.sql, T, sid, 1000, prefix);
    const parts = await sessionImagesJsonParts(h.sql, T, sid, 1000, prefix, []);
    if (!whole || !parts) throw new Error('rendered as records');
    const [image] = JSON.parse(whole.json.toString('utf8'));
    expect(JSON.parse(String(parts.images[0].json))).toEqual(image);
    expect(image).toMatchObject({
      sessionId: sid,
      prompt: '\u0001 ctrl, "quote", \\, 😀',
      negativePrompt: '</script>',
      fullUrl: `${prefix}tenants/${T}/images/e.png`,
    });
  });
});
