import { imageJson } from '@imagegen/operations';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ImageListFilters, listImages, normalizeFilters } from '../src/images/list-query.js';
import { type LibraryHarness, startLibrary } from './support.js';

let h: LibraryHarness;
const T = 'tList';

interface Seed {
  prompt: string;
  negative?: string | null;
  operation?: string;
  aspect?: string;
  size: number;
  session?: string;
  model?: string;
  tier?: string;
  style?: number | null;
  product?: number | null;
  ref?: boolean;
  at: string;
}

const seeds: Seed[] = [
  { prompt: 'A red fox in the snow', size: 1000, at: '2025-01-01T10:00:00Z', model: 'provA-flash-lite-image', tier: '1k' },
  {
    prompt: 'red car on a street',
    negative: 'blurry',
    size: 2000,
    at: '2025-01-02T10:00:00Z',
    model: 'provA-flash-image',
    tier: '2k',
    aspect: '16:9',
  },
  {
    prompt: 'Blue fox portrait',
    size: 3000,
    at: '2025-01-03T23:59:59Z',
    operation: 'edit',
    session: 'sX',
    model: 'provA-pro-image',
    tier: '4k',
  },
  { prompt: '100% pure_snow', negative: '', size: 4000, at: '2025-01-04T00:00:00Z', style: 11, model: 'provB-image-2' },
  { prompt: 'green hills', size: 5000, at: '2025-01-05T12:00:00Z', product: 22, ref: true, operation: 'product', session: 'sX' },
  {
    prompt: 'snow fox red',
    negative: 'dark',
    size: 6000,
    at: '2025-01-06T12:00:00Z',
    model: 'provA-flash-image',
    tier: '2k',
    aspect: '16:9',
  },
];
const ids: number[] = [];

beforeAll(async () => {
  h = await startLibrary();
  for (const s of seeds) {
    const [r] = await h.sql`
      INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
        thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id, resolution_tier, style_preset_id,
        product_reference_id, is_reference, created_at)
      VALUES (${T}, ${s.session ?? 'sMain'}, ${`tenants/${T}/images/${s.size}.png`}, ${`tenants/${T}/thumbnails/${s.size}.webp`},
        'image/png', 'png', 10, 10, ${s.size}, 100, ${s.prompt}, ${s.negative ?? null}, ${s.operation ?? 'generate'},
        ${s.aspect ?? '1:1'}, ${s.model ?? ''}, ${s.tier ?? ''}, ${s.style ?? null}, ${s.product ?? null}, ${s.ref ?? false}, ${s.at})
      RETURNING id`;
    ids.push(Number(r.id));
  }
  // Another tenant with matching content never shows up.
  await h.sql`INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes,
      thumbnail_size_bytes, prompt, operation) VALUES ('tOther', 'sMain', 'k', 'k2', 'image/png', 'png', 1, 1, 1000, 1, 'A red fox', 'generate')`;
});
afterAll(async () => {
  await h?.stop();
});

/** Seed indexes (0-based) matching the filters, in result order. */
async function q(f: ImageListFilters, page: { limit?: number; offset?: number } = {}) {
  const r = await listImages(h.sql, T, f, page);
  return { idx: r.rows.map((row) => ids.indexOf(row.id)), total: r.total, limit: r.limit, offset: r.offset };
}

describe('listImages', () => {
  it('newest first with total, default limit 20, pagination', async () => {
    expect(await q({})).toEqual({ idx: [5, 4, 3, 2, 1, 0], total: 6, limit: 20, offset: 0 });
    expect(await q({}, { limit: 2, offset: 2 })).toEqual({ idx: [3, 2], total: 6, limit: 2, offset: 2 });
    expect(await q({}, { limit: 500 })).toMatchObject({ limit: 100 });
    expect(await q({}, { offset: 10 })).toEqual({ idx: [], total: 6, limit: 20, offset: 10 });
  });

  it('search modes exact, all, any (case-insensitive, LIKE characters literal)', async () => {
    expect((await q({ search: 'red fox' })).idx).toEqual([0]);
    expect((await q({ search: 'RED FOX', searchMode: 'exact' })).idx).toEqual([0]);
    expect((await q({ search: 'red fox', searchMode: 'all' })).idx).toEqual([5, 0]);
    expect((await q({ search: 'fox car', searchMode: 'any' })).idx).toEqual([5, 2, 1, 0]);
    expect((await q({ search: '100%' })).idx).toEqual([3]);
    expect((await q({ search: 'd_c' })).idx).toEqual([]);
    expect((await q({ search: 'd c' })).idx).toEqual([1]);
    expect((await q({ search: 'pure_snow' })).idx).toEqual([3]);
  });

  it('date range: plain dates cover whole days, date-times are exact', async () => {
    expect((await q({ dateFrom: '2025-01-02', dateTo: '2025-01-03' })).idx).toEqual([2, 1]);
    expect((await q({ dateFrom: '2025-01-04T00:00:00Z' })).idx).toEqual([5, 4, 3]);
    expect((await q({ dateTo: '2025-01-03T23:59:58Z' })).idx).toEqual([1, 0]);
    expect((await q({ dateTo: '2025-01-03T23:59:59.000Z' })).idx).toEqual([2, 1, 0]);
  });

  it('aspect ratio, operation, size range, session, negative prompt', async () => {
    expect((await q({ aspectRatio: '16:9' })).idx).toEqual([5, 1]);
    expect((await q({ operationType: 'edit' })).idx).toEqual([2]);
    expect((await q({ minSize: 2000, maxSize: 4000 })).idx).toEqual([3, 2, 1]);
    expect((await q({ minSize: 5500 })).idx).toEqual([5]);
    expect((await q({ sessionId: 'sX' })).idx).toEqual([4, 2]);
    expect((await q({ hasNegativePrompt: true })).idx).toEqual([5, 1]);
    expect((await q({ hasNegativePrompt: false })).idx).toEqual([4, 3, 2, 0]);
  });

  it('model, resolution tiers, style preset, product reference, reference flag', async () => {
    expect((await q({ modelId: 'provA-flash-image' })).idx).toEqual([5, 1]);
    expect((await q({ resolutionTier: '2k,4k' })).idx).toEqual([5, 2, 1]);
    expect((await q({ resolutionTier: ' 1K ' })).idx).toEqual([0]);
    expect((await q({ resolutionTier: ['1k', '4k'] })).idx).toEqual([2, 0]);
    expect((await q({ stylePresetId: 11 })).idx).toEqual([3]);
    expect((await q({ productReferenceId: 22 })).idx).toEqual([4]);
    expect((await q({ isReference: true })).idx).toEqual([4]);
    expect((await q({ isReference: false })).total).toBe(5);
  });

  it('combines filters with AND and sorts for search presets', async () => {
    expect((await q({ search: 'fox', sessionId: 'sX', operationType: 'edit' })).idx).toEqual([2]);
    expect((await q({ sortBy: 'oldest' }, { limit: 3 })).idx).toEqual([0, 1, 2]);
    expect((await q({ sortBy: 'largest' }, { limit: 2 })).idx).toEqual([5, 4]);
    expect((await q({ sortBy: 'smallest' }, { limit: 2 })).idx).toEqual([0, 1]);
  });

  it('reports every invalid filter as a detail', async () => {
    const { errors } = normalizeFilters({
      searchMode: 'fuzzy' as never,
      dateFrom: 'yesterday',
      dateTo: '2025-13-45',
      modelId: 'nope',
      resolutionTier: '1k,8k',
      minSize: -1,
      sortBy: 'random' as never,
      search: 'x'.repeat(201),
      stylePresetId: 0,
    });
    expect(errors).toEqual([
      'search must be at most 200 characters',
      'searchMode must be one of: exact, all, any',
      'dateFrom must be an ISO 8601 date',
      'dateTo must be an ISO 8601 date',
      'minSize must be a non-negative number',
      expect.stringContaining('modelId must be one of: provA-flash-lite-image'),
      'resolutionTier must be a comma-separated list of: 0.5k, 1k, 2k, 4k',
      'stylePresetId must be a positive integer',
      'sortBy must be one of: newest, oldest, largest, smallest',
    ]);
    // dates that do not exist in the calendar are refused, not rolled over (2025-02-30 is not March 2)
    for (const [dateFrom, dateTo] of [
      ['2025-02-30', '2025-04-31'],
      ['2025-02-29T10:00:00Z', '2024-06-31T23:59:59.999Z'],
    ]) {
      expect(normalizeFilters({ dateFrom, dateTo }).errors).toEqual([
        'dateFrom must be an ISO 8601 date',
        'dateTo must be an ISO 8601 date',
      ]);
    }
    expect(normalizeFilters({ dateFrom: '2024-02-29', dateTo: '2024-12-31T23:59:59Z' }).errors).toEqual([]);
    await expect(listImages(h.sql, T, { minSize: 10, maxSize: 5 })).rejects.toMatchObject({
      status: 400,
      body: { error: 'Invalid request payload', details: ['minSize must not be greater than maxSize'] },
    });
  });

  it('the RPC applies the same filters', async () => {
    const request = { limit: 0, offset: 0, resolutionTiers: ['2k'], search: 'red', searchMode: 'all', asJson: false };
    const r = await h.client.listImages(request, h.principal(T));
    expect(r.images.map((i) => ids.indexOf(i.id))).toEqual([5, 1]);
    expect(r).toMatchObject({ total: 2, limit: 20, offset: 0 });
    expect(r.images[0]?.fullUrl).toBe(`http://files.test/files/tenants/${T}/images/6000.png`);
    const none = await h.client.listImages({ limit: 5, offset: 0, resolutionTiers: [], asJson: false }, h.principal('nobody'));
    expect(none).toMatchObject({ images: [], total: 0, limit: 5 });

    // as_json: the same page, already in its public JSON form (present.ts imageJson), and no records.
    const asJson = await h.client.listImages({ ...request, asJson: true }, h.principal(T));
    expect(asJson).toMatchObject({ images: [], total: 2, limit: 20, offset: 0 });
    expect(JSON.parse(Buffer.from(asJson.pageJson).toString('utf8'))).toEqual(JSON.parse(JSON.stringify(r.images.map(imageJson))));
    const noneJson = await h.client.listImages({ limit: 5, offset: 0, resolutionTiers: [], asJson: true }, h.principal('nobody'));
    expect(Buffer.from(noneJson.pageJson).toString('utf8')).toBe('[]');
  });
});

describe('as_json (the page rendered by PostgreSQL in its public form)', () => {
  const J = 'tJson';
  const page = async (tenant: string, extra: Record<string, unknown> = {}) => {
    const base = { limit: 0, offset: 0, resolutionTiers: [], ...extra };
    const records = await h.client.listImages({ ...base, asJson: false }, h.principal(tenant));
    const json = await h.client.listImages({ ...base, asJson: true }, h.principal(tenant));
    return {
      expected: JSON.parse(JSON.stringify(records.images.map(imageJson))),
      got: JSON.parse(Buffer.from(json.pageJson).toString('utf8')),
      json,
    };
  };

  it('equals imageJson of the records: microsecond timestamps, nulls, unicode, big sizes, filters', async () => {
    const rows = [
      { key: 'a', at: '2025-03-01T10:00:00.123999Z', negative: null, prompt: 'ünïcödé "quoted" \\ back\nline', size: 2 ** 40 },
      { key: 'b', at: '2025-03-01T10:00:00.000001+02:00', negative: '', prompt: 'plain', size: 1 },
      { key: 'c', at: '1999-12-31T23:59:59.999999Z', negative: 'dark', prompt: 'old', size: 5 },
    ];
    for (const r of rows) {
      await h.sql`INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height,
          size_bytes, thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, created_at)
        VALUES (${J}, 'sJ', ${`tenants/${J}/images/${r.key}.png`}, ${`tenants/${J}/thumbnails/${r.key}.webp`}, 'image/png', 'png',
          3, 4, ${r.size}, 9, ${r.prompt}, ${r.negative}, 'generate', '3:4', ${r.at}::text::timestamptz)`; // through text: a timestamptz parameter goes through a JS Date (milliseconds)
    }
    const [stored] =
      await h.sql`SELECT to_char(created_at AT TIME ZONE 'UTC', 'US') AS us FROM images WHERE tenant_id = ${J} AND object_key LIKE '%/a.png'`;
    expect(stored.us).toBe('123999'); // the microseconds are in the table, so both renderings below must drop them alike
    const all = await page(J);
    expect(all.got).toHaveLength(3);
    expect(all.got).toEqual(all.expected);
    expect(Object.keys(all.got[0])).toEqual(Object.keys(all.expected[0])); // same field order too
    expect(all.got[0].createdAt).toBe('2025-03-01T10:00:00.123Z');
    expect(all.json).toMatchObject({ images: [], total: 3, limit: 20, offset: 0 });
    const filtered = await page(J, { search: 'old', limit: 1 });
    expect(filtered.got).toEqual(filtered.expected);
    expect(filtered.json.total).toBe(1);
  });

  it('falls back to rendering from rows when a key is not plain (URL-encoded like publicUrl)', async () => {
    await h.sql`INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height,
        size_bytes, thumbnail_size_bytes, prompt, operation, aspect_ratio)
      VALUES ('tOdd', 's', 'tenants/tOdd/images/with space.png', 'tenants/tOdd/thumbnails/t.webp', 'image/png', 'png',
        1, 1, 1, 1, 'odd', 'generate', '1:1')`;
    const odd = await page('tOdd');
    expect(odd.got).toEqual(odd.expected);
    expect(odd.got[0].fullUrl).toMatch(/with%20space\.png$/);
  });
});
