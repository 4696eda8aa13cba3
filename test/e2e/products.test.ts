import { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import { createClient, internalPrincipal } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestStack, TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { expectCursorEqualsOffset, expectRefused, firstCursor, TIMES, tampered, withSeededTenants } from './asset-paging-support.js';
import { chars, type ImageServer, noisePng, seeder, startAssetsStack, startImageServer } from './products-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let img: ImageServer;

beforeAll(async () => {
  [s, img] = await Promise.all([startAssetsStack(), startImageServer()]);
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
});
afterAll(async () => {
  await img?.close();
  await s?.stop();
});

const create = (body: Record<string, unknown>, key = t.liveKey) =>
  s.api('/api/products', { key, body: { product_url: `${img.url}/red.png`, ...body } });
const path = (identifier: string | number) => `/api/products/${encodeURIComponent(String(identifier))}`;

describe('products CRUD', () => {
  it('creates from a URL (image + thumbnail stored), reads by id and name, updates and deletes', async () => {
    const c = await create({ product_name: 'Red Mug Ø 杯', product_description: 'A red mug', tags: 'kitchen, red' });
    expect(c.status).toBe(200);
    const p = c.body.data;
    expect(p).toMatchObject({
      productName: 'Red Mug Ø 杯',
      productUrl: `${img.url}/red.png`,
      width: 64,
      height: 48,
      format: 'png',
      message: expect.any(String),
    });
    expect(p.id).toEqual(expect.any(Number));
    expect(p.objectKey).toMatch(new RegExp(`^tenants/${t.tenantId}/`));
    expect(p.objectThumbnailKey).toMatch(new RegExp(`^tenants/${t.tenantId}/`));
    expect(p.sizeBytes).toBeGreaterThan(0);
    expect(p.thumbnailSizeBytes).toBeGreaterThan(0);

    const byId = await s.api(path(p.id), { key: t.liveKey });
    expect(byId.status).toBe(200);
    const d = byId.body.data;
    expect(d).toMatchObject({
      id: p.id,
      productName: 'Red Mug Ø 杯',
      productDescription: 'A red mug',
      productUrl: `${img.url}/red.png`,
      tags: 'kitchen, red',
      timesUsed: 0,
      lastUsedAt: null,
      width: 64,
      height: 48,
      sizeBytes: p.sizeBytes,
      format: 'png',
      mimeType: 'image/png',
      objectKey: p.objectKey,
      objectThumbnailKey: p.objectThumbnailKey,
    });
    expect(d.createdAt).toMatch(/Z$/);
    expect(d.updatedAt).toMatch(/Z$/);
    // The stored image and thumbnail are served.
    const full = await fetch(d.fullUrl);
    expect(full.status).toBe(200);
    expect(Buffer.from(await full.arrayBuffer()).length).toBe(p.sizeBytes);
    expect((await fetch(d.thumbnailUrl)).status).toBe(200);

    const byName = await s.api(path('Red Mug Ø 杯'), { key: t.liveKey });
    expect(byName.body.data.id).toBe(p.id);

    const u = await s.api(path(p.id), { key: t.liveKey, method: 'PATCH', body: { product_name: 'Blue Mug', tags: 'kitchen' } });
    expect(u.status).toBe(200);
    expect(u.body.data).toEqual({
      id: p.id,
      productName: 'Blue Mug',
      productDescription: 'A red mug',
      tags: 'kitchen',
      updatedAt: expect.any(String),
    });
    const u2 = await s.api(path(p.id), { key: t.liveKey, method: 'PATCH', body: { product_description: null } });
    expect(u2.body.data.productDescription).toBeNull();

    const del = await s.api(path(p.id), { key: t.liveKey, method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ data: { deleted: true } });
    // The stored product image is deleted.
    expect((await fetch(d.fullUrl)).status).toBe(404);
    const gone = await s.api(path(p.id), { key: t.liveKey });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ error: 'Product not found' });
  });

  it('accepts JPEG and WebP images', async () => {
    const j = await create({ product_name: 'Blue box', product_url: `${img.url}/blue.jpg` });
    expect(j.status).toBe(200);
    expect(j.body.data).toMatchObject({ format: 'jpeg', width: 40, height: 40 });
    const w = await create({ product_name: 'Green tube', product_url: `${img.url}/green.webp` });
    expect(w.status).toBe(200);
    expect(w.body.data).toMatchObject({ format: 'webp', width: 30, height: 60 });
  });

  it('deleting a product keeps generated images', async () => {
    const seed = seeder(s);
    try {
      const p = await create({ product_name: 'Keeper' });
      const generated = await seed.image(t.tenantId, { prompt: 'made with the product' });
      expect((await s.api(path(p.body.data.id), { key: t.liveKey, method: 'DELETE' })).status).toBe(200);
      expect((await seed.get(t.tenantId, generated.id)).image?.id).toBe(generated.id);
    } finally {
      seed.close();
    }
  });
});

describe('product URL errors (SPEC 7 texts)', () => {
  it('refuses non-HTTP(S) URLs', async () => {
    for (const url of ['ftp://example.com/a.png', 'not a url', '', 'file:///etc/passwd', 'javascript:alert(1)']) {
      const r = await create({ product_name: `bad url ${url}`, product_url: url });
      expect(r.status, url).toBe(400);
      expect(r.body).toEqual({ error: 'Product URL must be a valid HTTP or HTTPS URL' });
    }
  });

  it('reports the fetch status and non-image content types', async () => {
    const missing = await create({ product_name: 'missing', product_url: `${img.url}/missing` });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: 'Failed to fetch image from URL: 404' });
    img.set('/boom', 'oops', 'text/plain', 500);
    const boom = await create({ product_name: 'boom', product_url: `${img.url}/boom` });
    expect(boom.body).toEqual({ error: 'Failed to fetch image from URL: 500' });
    const html = await create({ product_name: 'html', product_url: `${img.url}/page.html` });
    expect(html.status).toBe(400);
    expect(html.body).toEqual({ error: 'URL does not point to an image. Content-Type: text/html; charset=utf-8' });
    const garbage = await create({ product_name: 'garbage', product_url: `${img.url}/garbage.png` });
    expect(garbage.status).toBe(400);
    const list = await s.api('/api/products', { key: t.liveKey });
    expect(list.body.data.map((p: { productName: string }) => p.productName)).not.toEqual(
      expect.arrayContaining(['missing', 'html', 'garbage']),
    );
  });

  it('refuses private addresses (SSRF guard) even with loopback allowed for tests', async () => {
    const r = await create({ product_name: 'metadata', product_url: 'http://169.254.169.254/latest/meta-data' });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatch(/^Failed to fetch image from URL: /);
  });
});

describe('product limits and duplicates', () => {
  it('product_name 1-100, product_description 500, tag length 50', async () => {
    expect((await create({ product_name: chars(100, 'p'), product_description: chars(500), tags: `${chars(50)},b` })).status).toBe(200);
    const cases: [string, Record<string, unknown>][] = [
      ['product_name', { product_name: chars(101, 'q') }],
      ['product_name', { product_name: '' }],
      ['product_name', { product_name: '   ' }],
      ['product_description', { product_name: 'desc501', product_description: chars(501) }],
      ['tags', { product_name: 'tag51', tags: `ok,${chars(51)}` }],
    ];
    for (const [field, body] of cases) {
      const r = await create(body);
      expect(r.status, field).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
      expect(r.body.details.join(' ')).toContain(field);
    }
    const missing = await s.api('/api/products', { key: t.liveKey, body: { product_name: 'no url' } });
    expect(missing.body).toEqual({ error: 'Invalid request payload', details: ['product_url is required'] });
  });

  it('answers 409 on duplicate names (create and rename)', async () => {
    expect((await create({ product_name: 'Same' })).status).toBe(200);
    const hitsBefore = img.hits['/blue.jpg'] ?? 0;
    const dup = await create({ product_name: 'Same', product_url: `${img.url}/blue.jpg` });
    expect(dup.status).toBe(409);
    expect(dup.body.error).toMatch(/^Product with name Same already exists\. \S/);
    expect(img.hits['/blue.jpg'] ?? 0).toBe(hitsBefore); // refused before fetching
    const second = await create({ product_name: 'Different' });
    const rename = await s.api(path(second.body.data.id), { key: t.liveKey, method: 'PATCH', body: { product_name: 'Same' } });
    expect(rename.status).toBe(409);
    expect(rename.body.error).toMatch(/^Product with name Same already exists\./);
    expect((await create({ product_name: 'Same' }, other.liveKey)).status).toBe(200);
  });
});

describe('product list', () => {
  it('pages with page/page_size and searches name, description and tags', async () => {
    const tenant = await s.createTenant();
    const made: string[] = [];
    for (const [name, desc, tags] of [
      ['Lamp', 'A desk lamp', 'light'],
      ['Chair', 'Wooden', 'furniture,oak'],
      ['Table', 'Glass top', 'furniture'],
    ]) {
      const r = await create({ product_name: name, product_description: desc, tags }, tenant.liveKey);
      expect(r.status).toBe(200);
      made.push(name);
    }
    const list = async (q: string) => (await s.api(`/api/products${q}`, { key: tenant.liveKey })).body;
    const all = await list('');
    expect(all.pagination).toEqual({ page: 1, pageSize: 20, total: 3, hasMore: false, nextCursor: null });
    expect(all.data[0]).toEqual(
      expect.objectContaining({
        id: expect.any(Number),
        productName: expect.any(String),
        productDescription: expect.any(String),
        productUrl: expect.any(String),
        tags: expect.any(String),
        timesUsed: 0,
        lastUsedAt: null,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
        fullUrl: expect.any(String),
        thumbnailUrl: expect.any(String),
      }),
    );
    const p1 = await list('?page=1&page_size=2');
    expect(p1.pagination).toEqual({ page: 1, pageSize: 2, total: 3, hasMore: true, nextCursor: expect.any(String) });
    expect(p1.data).toHaveLength(2);
    const p2 = await list('?page=2&page_size=2');
    expect(p2.pagination).toEqual({ page: 2, pageSize: 2, total: 3, hasMore: false, nextCursor: null });
    expect(p2.data).toHaveLength(1);
    expect(new Set([...p1.data, ...p2.data].map((p: { productName: string }) => p.productName))).toEqual(new Set(made));

    expect((await list('?search=lamp')).data.map((p: { productName: string }) => p.productName)).toEqual(['Lamp']);
    expect((await list('?search=glass')).data.map((p: { productName: string }) => p.productName)).toEqual(['Table']);
    expect(new Set((await list('?search=furniture')).data.map((p: { productName: string }) => p.productName))).toEqual(
      new Set(['Chair', 'Table']),
    );

    expect((await list('?page_size=100')).pagination.pageSize).toBe(100);
    for (const q of ['?page_size=101', '?page=0', '?page_size=0']) {
      const r = await s.api(`/api/products${q}`, { key: tenant.liveKey });
      expect(r.status, q).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
    }
  });
});

describe('product isolation, auth and quota', () => {
  it("another tenant's products are 404", async () => {
    const mine = await create({ product_name: 'Secret product' });
    const id = mine.body.data.id;
    for (const ident of [String(id), 'Secret product']) {
      for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
        const r = await s.api(path(ident), { key: other.liveKey, method, body: method === 'PATCH' ? { tags: 'x' } : undefined });
        expect(r.status, `${method} ${ident}`).toBe(404);
        expect(r.body).toEqual({ error: 'Product not found' });
      }
    }
    const list = await s.api('/api/products?page_size=100', { key: other.liveKey });
    expect(list.body.data.map((p: { id: number }) => p.id)).not.toContain(id);
  });

  it('needs an API key', async () => {
    for (const [p, method] of [
      ['/api/products', 'GET'],
      ['/api/products', 'POST'],
      ['/api/products/1', 'GET'],
      ['/api/products/1', 'PATCH'],
      ['/api/products/1', 'DELETE'],
      ['/api/products/1/generate', 'POST'],
    ] as const) {
      const r = await s.api(p, { method, body: method === 'POST' || method === 'PATCH' ? {} : undefined });
      expect(r.status, `${method} ${p}`).toBe(401);
    }
  });

  it('refuses with 402 QUOTA_EXCEEDED once the monthly quota is used up, before fetching anything is stored', async () => {
    const tenant = await s.createTenant({ monthly_quota_mb: 1 });
    const seed = seeder(s);
    const usage = createClient(UsageServiceService, () => s.stack.ctx.resolve('usage'));
    try {
      await seed.image(tenant.tenantId, { data: await noisePng(1_100_000) });
      await waitFor(
        async () => {
          const q = await usage.checkQuota({ tenantId: tenant.tenantId, incomingBytes: 1 }, internalPrincipal(tenant.tenantId));
          return !q.allowed;
        },
        { interval: 100 },
      );
      const r = await create({ product_name: 'over quota' }, tenant.liveKey);
      expect(r.status).toBe(402);
      expect(r.body).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
      const list = await s.api('/api/products', { key: tenant.liveKey });
      expect(list.body.pagination.total).toBe(0);
    } finally {
      seed.close();
      usage.close();
    }
  });
});

describe('GET /api/products cursor paging (issue 16)', () => {
  it('cursor paging lists what page paging lists (created_at ties); foreign or changed cursors are 400', async () => {
    await withSeededTenants(s, async (sql, A, B) => {
      const T = TIMES(sql);
      for (const tenant of [A.tenantId, B.tenantId]) {
        await sql`INSERT INTO products (tenant_id, product_name, product_url, object_key, object_thumbnail_key, width, height,
            size_bytes, thumbnail_size_bytes, format, mime_type, created_at)
          SELECT ${tenant}, 'product ' || g, 'http://127.0.0.1/p.png', 'k' || g, 't' || g, 10, 10, 100, 10, 'png', 'image/png',
            ${T.created}
          FROM generate_series(1, 19) g`;
      }
      await expectCursorEqualsOffset(s, A.liveKey, { url: '/api/products', size: 4, style: 'page' }, 19);
      await expectCursorEqualsOffset(s, A.liveKey, { url: '/api/products?search=product%201', size: 3, style: 'page' }, 11);
      const url = '/api/products?page_size=4';
      const cursor = await firstCursor(s, A.liveKey, url);
      await expectRefused(s, A.liveKey, url, tampered(cursor));
      await expectRefused(s, B.liveKey, url, cursor);
      await expectRefused(s, A.liveKey, '/api/characters?sort_by=created', cursor);
      await expectRefused(s, A.liveKey, `${url}&page=2`, cursor, ['cursor and page cannot be combined']);
      // page=1 is the first page: a cursor goes with it.
      expect((await s.api(`${url}&page=1&cursor=${encodeURIComponent(cursor)}`, { key: A.liveKey })).status).toBe(200);
    });
  });
});
