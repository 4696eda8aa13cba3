import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ImageRecord } from '@imagegen/contracts/library/v1/library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testClient } from '../support/client.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { readZip } from '../support/zip.js';
import { librarySeeder, solidPng } from './images-seed.js';

let s: TestStack;
let A: TestTenant;
let B: TestTenant;
let seed: ReturnType<typeof librarySeeder>;
const imgs: Record<string, ImageRecord> = {};

const LIST_KEYS = [
  'id',
  'sessionId',
  'fullUrl',
  'thumbnailUrl',
  'width',
  'height',
  'sizeBytes',
  'prompt',
  'negativePrompt',
  'operation',
  'aspectRatio',
  'createdAt',
].sort();

beforeAll(async () => {
  // Unsigned storage: these tests compare served files and ZIP entries byte for byte with the seeded pictures, and
  // filter by their sizes (a Content Credentials manifest adds ~13 KB; signing is test/e2e/content-credentials.test.ts).
  s = await startTestStack({ env: { C2PA_SIGNING: 'off' } });
  [A, B] = await Promise.all([s.createTenant({ rate_limit_per_minute: 100000 }), s.createTenant({ rate_limit_per_minute: 100000 })]);
  seed = librarySeeder(s);
  const t = A.tenantId;
  // Stored one after the other so the newest-first order is the reverse of this list.
  imgs.fox = await seed.store(t, { prompt: 'A red fox in the snow', sessionId: 'sess-1', width: 120, height: 80 });
  imgs.car = await seed.store(t, {
    prompt: 'red car on a street',
    negativePrompt: 'blurry',
    aspectRatio: '16:9',
    modelId: 'provA-flash-image',
    resolutionTier: '2k',
    sessionId: 'sess-1',
    width: 160,
    height: 90,
  });
  imgs.edit = await seed.store(t, {
    prompt: 'blue fox portrait',
    operation: 'edit',
    parentImageId: imgs.fox.id,
    modelId: 'provA-pro-image',
    resolutionTier: '4k',
    sessionId: 'sess-2',
    width: 120,
    height: 80,
  });
  imgs.styled = await seed.store(t, { prompt: 'watercolor hills', stylePresetId: 11, modelId: 'provB-image-2', resolutionTier: '' });
  imgs.product = await seed.store(t, {
    prompt: 'product shot',
    operation: 'product',
    productReferenceId: 22,
    isReference: true,
    referenceGroupIds: [3, 4],
    width: 400,
    height: 400,
  });
  imgs.theirs = await seed.store(B.tenantId, { prompt: 'A red fox in the snow', sessionId: 'sess-1' });
});
afterAll(async () => {
  seed?.close();
  await s?.stop();
});

const ids = (body: { data: { id: number }[] }) => body.data.map((i) => i.id);

describe('auth', () => {
  it('answers 401 without an API key on every image route (the files route is public)', async () => {
    const routes: [string, string, unknown?][] = [
      ['GET', '/api/images'],
      ['GET', `/api/images/${imgs.fox.id}`],
      ['DELETE', `/api/images/${imgs.fox.id}`],
      ['POST', '/api/images/delete-bulk', { ids: [imgs.fox.id] }],
      ['POST', '/api/images/download', { imageIds: [imgs.fox.id] }],
    ];
    for (const [method, path, body] of routes) {
      const r = await s.api(path, { method, body });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.body).toEqual({ error: 'Invalid or missing API key' });
      const bad = await s.api(path, { method, body, key: 'sk_live_notarealkeynotarealkeynotarealkey12' });
      expect(bad.status).toBe(401);
    }
    expect((await fetch(imgs.fox.fullUrl)).status).toBe(200);
  });
});

describe('GET /api/images', () => {
  it('lists the tenant images newest first in the list form with pagination', async () => {
    const r = await s.api('/api/images', { key: A.liveKey });
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual([imgs.product.id, imgs.styled.id, imgs.edit.id, imgs.car.id, imgs.fox.id]);
    expect(r.body.pagination).toEqual({ total: 5, limit: 20, offset: 0, totalIsExact: true, nextCursor: null });
    const car = r.body.data.find((i: { id: number }) => i.id === imgs.car.id);
    expect(Object.keys(car).sort()).toEqual(LIST_KEYS);
    expect(car).toEqual({
      id: imgs.car.id,
      sessionId: 'sess-1',
      fullUrl: imgs.car.fullUrl,
      thumbnailUrl: imgs.car.thumbnailUrl,
      width: 160,
      height: 90,
      sizeBytes: imgs.car.sizeBytes,
      prompt: 'red car on a street',
      negativePrompt: 'blurry',
      operation: 'generate',
      aspectRatio: '16:9',
      createdAt: imgs.car.createdAt,
    });
    expect(car.fullUrl).toMatch(new RegExp(`^${s.baseUrl}/files/tenants/${A.tenantId}/images/`));
    expect(r.body.data.find((i: { id: number }) => i.id === imgs.fox.id).negativePrompt).toBeNull();

    const p = await s.api('/api/images?limit=2&offset=1', { key: A.liveKey });
    expect(ids(p.body)).toEqual([imgs.styled.id, imgs.edit.id]);
    expect(p.body.pagination).toEqual({ total: 5, limit: 2, offset: 1, totalIsExact: true, nextCursor: expect.any(String) });
    const past = await s.api('/api/images?offset=50', { key: A.liveKey });
    expect(past.body).toEqual({ data: [], pagination: { total: 5, limit: 20, offset: 50, totalIsExact: true, nextCursor: null } });
    const max = await s.api('/api/images?limit=100', { key: A.liveKey });
    expect(max.body.pagination.limit).toBe(100);
  });

  it('applies every filter', async () => {
    const cases: [string, ImageRecord[]][] = [
      ['search=red%20fox', [imgs.fox]],
      ['search=RED%20FOX&searchMode=exact', [imgs.fox]],
      ['search=fox%20red&searchMode=all', [imgs.fox]],
      ['search=fox%20car&searchMode=any', [imgs.edit, imgs.car, imgs.fox]],
      ['aspectRatio=16:9', [imgs.car]],
      ['operationType=edit', [imgs.edit]],
      ['sessionId=sess-1', [imgs.car, imgs.fox]],
      ['hasNegativePrompt=true', [imgs.car]],
      ['hasNegativePrompt=false', [imgs.product, imgs.styled, imgs.edit, imgs.fox]],
      ['modelId=provA-pro-image', [imgs.edit]],
      ['resolutionTier=2k,4k', [imgs.edit, imgs.car]],
      ['resolutionTier=1k', [imgs.product, imgs.fox]],
      ['stylePresetId=11', [imgs.styled]],
      ['productReferenceId=22', [imgs.product]],
      ['isReference=true', [imgs.product]],
      ['isReference=false', [imgs.styled, imgs.edit, imgs.car, imgs.fox]],
      [`minSize=${imgs.product.sizeBytes}`, [imgs.product]],
      [`maxSize=${Math.min(imgs.fox.sizeBytes, imgs.edit.sizeBytes, imgs.styled.sizeBytes) - 1}`, []],
      ['search=fox&sessionId=sess-2&operationType=edit', [imgs.edit]],
    ];
    for (const [query, expected] of cases) {
      const r = await s.api(`/api/images?${query}`, { key: A.liveKey });
      expect(r.status, query).toBe(200);
      expect(ids(r.body), query).toEqual(expected.map((i) => i.id));
      expect(r.body.pagination.total, query).toBe(expected.length);
    }
  });

  it('filters by date range (plain dates cover the whole day)', async () => {
    const today = imgs.fox.createdAt.slice(0, 10);
    const r = await s.api(`/api/images?dateFrom=${today}&dateTo=${today}`, { key: A.liveKey });
    expect(r.body.pagination.total).toBe(5);
    const after = await s.api(`/api/images?dateFrom=${encodeURIComponent(imgs.styled.createdAt)}`, { key: A.liveKey });
    expect(ids(after.body)).toEqual([imgs.product.id, imgs.styled.id]);
    const before = await s.api(`/api/images?dateTo=${encodeURIComponent(imgs.car.createdAt)}`, { key: A.liveKey });
    expect(ids(before.body)).toEqual([imgs.car.id, imgs.fox.id]);
    const none = await s.api('/api/images?dateTo=2001-01-01', { key: A.liveKey });
    expect(none.body.data).toEqual([]);
  });

  it('refuses an invalid query with 400 Invalid request payload and details', async () => {
    const cases: [string, string[]][] = [
      ['limit=0', ['limit must be >= 1']],
      ['limit=101', ['limit must be <= 100']],
      ['limit=abc', ['limit must be an integer']],
      ['offset=-1', ['offset must be >= 0']],
      ['searchMode=fuzzy', ['searchMode must be one of: exact, all, any']],
      ['hasNegativePrompt=maybe', ['hasNegativePrompt must be a boolean']],
      ['modelId=gpt', [expect.stringContaining('modelId must be one of: provA-flash-lite-image')]],
      ['stylePresetId=x', ['stylePresetId must be an integer']],
      ['minSize=-5', ['minSize must be >= 0']],
      ['dateFrom=yesterday', ['dateFrom must be an ISO 8601 date']],
      ['resolutionTier=8k', ['resolutionTier must be a comma-separated list of: 0.5k, 1k, 2k, 4k']],
      ['minSize=10&maxSize=5', ['minSize must not be greater than maxSize']],
      [`search=${'x'.repeat(201)}`, ['search must be at most 200 characters']],
      // beyond the wire ranges (offset int32, ids int64 read back as safe integers): 400, not 500
      ['offset=3000000000', ['offset must be <= 2147483647']],
      ['stylePresetId=100000000000000000000', ['stylePresetId must be <= 9007199254740991']],
      ['productReferenceId=18014398509481984', ['productReferenceId must be <= 9007199254740991']],
    ];
    for (const [query, details] of cases) {
      const r = await s.api(`/api/images?${query}`, { key: A.liveKey });
      expect(r.status, query).toBe(400);
      expect(r.body, query).toEqual({ error: 'Invalid request payload', details });
    }
    const many = await s.api('/api/images?limit=0&searchMode=x', { key: A.liveKey });
    expect(many.body.details).toHaveLength(2);
  });

  it('never shows another tenant images', async () => {
    const r = await s.api('/api/images?search=red%20fox', { key: B.liveKey });
    expect(ids(r.body)).toEqual([imgs.theirs.id]);
    const all = await s.api('/api/images', { key: B.testKey });
    expect(ids(all.body)).toEqual([imgs.theirs.id]);
  });
});

describe('GET /api/images/:id', () => {
  it('returns the detail form with edit history', async () => {
    const r = await s.api(`/api/images/${imgs.edit.id}`, { key: A.liveKey });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({
      id: imgs.edit.id,
      sessionId: 'sess-2',
      operation: 'edit',
      modelId: 'provA-pro-image',
      stylePresetId: null,
      productReferenceId: null,
      referenceGroupIds: null,
      parent_image_id: imgs.fox.id,
      editHistory: { ancestors: [{ id: imgs.fox.id, operation: 'generate', parent_image_id: null }], edits: [] },
    });
    const parent = await s.api(`/api/images/${imgs.fox.id}`, { key: A.liveKey });
    expect(parent.body.data.parent_image_id).toBeNull();
    expect(parent.body.data.editHistory.edits).toMatchObject([
      { id: imgs.edit.id, prompt: 'blue fox portrait', parent_image_id: imgs.fox.id },
    ]);
    const product = await s.api(`/api/images/${imgs.product.id}`, { key: A.liveKey });
    expect(product.body.data).toMatchObject({ productReferenceId: 22, referenceGroupIds: [3, 4], isReference: true });
    const styled = await s.api(`/api/images/${imgs.styled.id}`, { key: A.liveKey });
    expect(styled.body.data).toMatchObject({ stylePresetId: 11, modelId: 'provB-image-2' });
  });

  it('404 for another tenant image and a missing id, 400 for a non-integer id', async () => {
    for (const path of [`/api/images/${imgs.theirs.id}`, '/api/images/99999999']) {
      const r = await s.api(path, { key: A.liveKey });
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ error: 'Image not found' });
    }
    const bad = await s.api('/api/images/abc', { key: A.liveKey });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'Invalid request payload', details: ['id must be an integer'] });
  });
});

describe('GET /files/*', () => {
  it('serves originals and thumbnails with content type and cache headers', async () => {
    const r = await fetch(imgs.car.fullUrl);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('image/png');
    expect(r.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    const body = Buffer.from(await r.arrayBuffer());
    expect(body.length).toBe(imgs.car.sizeBytes);
    expect(body.equals(solidPng(160, 90, '#36c'))).toBe(true);
    const t = await fetch(imgs.car.thumbnailUrl);
    expect(t.headers.get('content-type')).toBe('image/webp');
    expect(Number(t.headers.get('content-length'))).toBe(imgs.car.thumbnailSizeBytes);
    const head = await fetch(imgs.car.fullUrl, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBe(imgs.car.sizeBytes);
  });

  it('answers 404 in the error envelope for missing or invalid keys', async () => {
    for (const path of [
      `/files/tenants/${A.tenantId}/images/nope.png`,
      '/files/tenants/x/..%2F..%2Fetc/passwd',
      '/files/%2Fetc%2Fpasswd',
      `/files/tenants/${A.tenantId}/images/.hidden.ct`,
      '/files/',
    ]) {
      const r = await fetch(`${s.baseUrl}${path}`);
      expect(r.status, path).toBe(404);
      expect(await r.json(), path).toEqual({ error: 'File not found' });
    }
  });
});

function hasUnzip(): boolean {
  try {
    execFileSync('unzip', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('POST /api/images/download', () => {
  let downloaded: Buffer | undefined;
  it('streams a ZIP of the originals', async () => {
    const res = await fetch(`${s.baseUrl}/api/images/download`, {
      method: 'POST',
      headers: { 'x-api-key': A.liveKey, 'content-type': 'application/json' },
      body: JSON.stringify({ imageIds: [imgs.car.id, imgs.fox.id, imgs.car.id] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="images-\d{8}-\d{6}\.zip"$/);
    const zip = Buffer.from(await res.arrayBuffer());
    expect(Number(res.headers.get('content-length'))).toBe(zip.length);
    const entries = readZip(zip);
    expect([...entries.keys()]).toEqual([`image-${imgs.car.id}.png`, `image-${imgs.fox.id}.png`]);
    expect(entries.get(`image-${imgs.car.id}.png`)?.equals(solidPng(160, 90, '#36c'))).toBe(true);
    expect(entries.get(`image-${imgs.fox.id}.png`)?.equals(solidPng(120, 80, '#36c'))).toBe(true);
    downloaded = zip;
  });

  // Reported as skipped (not passed) on a machine without unzip.
  it.runIf(hasUnzip())('that ZIP passes unzip -t and lists the same entries', () => {
    expect(downloaded, 'the ZIP of the test above').toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), 'zip-'));
    try {
      writeFileSync(join(dir, 'a.zip'), downloaded as Buffer);
      const test = execFileSync('unzip', ['-t', join(dir, 'a.zip')]).toString();
      expect(test).toContain('No errors detected');
      const listing = execFileSync('unzip', ['-Z1', join(dir, 'a.zip')])
        .toString()
        .trim()
        .split('\n');
      expect(listing).toEqual([`image-${imgs.car.id}.png`, `image-${imgs.fox.id}.png`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('404 with the missing ids when any id is unknown or another tenant; 400 on invalid bodies', async () => {
    const r = await s.api('/api/images/download', { key: A.liveKey, body: { imageIds: [imgs.fox.id, imgs.theirs.id, 99999999] } });
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: 'Image not found', details: { missing_ids: [imgs.theirs.id, 99999999] } });
    const cases: [unknown, string[]][] = [
      [{}, ['imageIds is required']],
      [{ imageIds: [] }, ['imageIds must have at least 1 items']],
      [{ imageIds: ['1'] }, ['imageIds.0 must be an integer']],
      [{ imageIds: Array.from({ length: 101 }, (_, i) => i + 1) }, ['imageIds must have at most 100 items']],
      [{ ids: [1] }, ['imageIds is required', 'ids is not allowed']],
    ];
    for (const [body, details] of cases) {
      const b = await s.api('/api/images/download', { key: A.liveKey, body });
      expect(b.status, JSON.stringify(body)).toBe(400);
      expect(b.body.error).toBe('Invalid request payload');
      expect([...b.body.details].sort(), JSON.stringify(body)).toEqual([...details].sort());
    }
  });
});

describe('DELETE /api/images/:id', () => {
  it('deletes (204), removes the files, keeps edit children with their parent id', async () => {
    const parent = await seed.store(A.tenantId, { prompt: 'to delete', sessionId: 'del' });
    const child = await seed.store(A.tenantId, { prompt: 'child edit', operation: 'edit', parentImageId: parent.id, sessionId: 'del' });
    const foreign = await s.api(`/api/images/${parent.id}`, { method: 'DELETE', key: B.liveKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'Image not found' });

    const r = await fetch(`${s.baseUrl}/api/images/${parent.id}`, { method: 'DELETE', headers: { 'x-api-key': A.liveKey } });
    expect(r.status).toBe(204);
    expect(await r.text()).toBe('');
    expect((await fetch(parent.fullUrl)).status).toBe(404);
    expect((await fetch(parent.thumbnailUrl)).status).toBe(404);
    expect((await s.api(`/api/images/${parent.id}`, { key: A.liveKey })).status).toBe(404);
    const c = await s.api(`/api/images/${child.id}`, { key: A.liveKey });
    expect(c.status).toBe(200);
    expect(c.body.data.parent_image_id).toBe(parent.id);
    expect(c.body.data.editHistory.ancestors).toEqual([]);
    const again = await s.api(`/api/images/${parent.id}`, { method: 'DELETE', key: A.liveKey });
    expect(again.status).toBe(404);
    await s.api(`/api/images/${child.id}`, { method: 'DELETE', key: A.liveKey });
  });
});

describe('POST /api/images/delete-bulk', () => {
  it('deletes own ids and reports foreign and missing ones', async () => {
    const a1 = await seed.store(A.tenantId, { prompt: 'bulk 1' });
    const a2 = await seed.store(A.tenantId, { prompt: 'bulk 2' });
    const b1 = await seed.store(B.tenantId, { prompt: 'bulk foreign' });
    const r = await s.api('/api/images/delete-bulk', { key: A.liveKey, body: { ids: [a1.id, b1.id, 99999999, a2.id, a1.id] } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      data: {
        deleted: [a1.id, a2.id],
        failed: [
          { id: b1.id, error: 'Image not found' },
          { id: 99999999, error: 'Image not found' },
        ],
        summary: { total: 4, succeeded: 2, failed: 2 },
      },
    });
    expect((await fetch(a1.fullUrl)).status).toBe(404);
    expect((await s.api(`/api/images/${b1.id}`, { key: B.liveKey })).status).toBe(200);
    expect((await fetch(b1.fullUrl)).status).toBe(200);
  });

  it('400 on invalid bodies (max 20 ids)', async () => {
    const cases: [unknown, string[]][] = [
      [{}, ['ids is required']],
      [{ ids: [] }, ['ids must have at least 1 items']],
      [{ ids: Array.from({ length: 21 }, (_, i) => i + 1) }, ['ids must have at most 20 items']],
      [{ ids: [1, 'x'] }, ['ids.1 must be an integer']],
      [{ ids: [0] }, ['ids.0 must be >= 1']],
      [{ ids: 5 }, [expect.stringMatching(/^ids must be an? array$/)]],
    ];
    for (const [body, details] of cases) {
      const r = await s.api('/api/images/delete-bulk', { key: A.liveKey, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body, JSON.stringify(body)).toEqual({ error: 'Invalid request payload', details });
    }
  });
});

describe('the typed client (libs/client)', () => {
  it('creates images and pages the library with typed calls and typed errors', async () => {
    const api = testClient(s.baseUrl, A.liveKey);
    const created = await api.POST('/api/images', { body: { prompt: 'a typed fox in snow', n: 2, session_id: 'typed-client' } });
    expect(created.response.status).toBe(200);
    // 200 or, with Prefer: respond-async, 202: the typed answer is a union of both forms.
    const result = created.data?.data;
    const ids = (result && 'images' in result ? result.images : []).map((i) => i.record_id);
    expect(ids).toHaveLength(2);

    const seen: number[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 3; page++) {
      const { data, error } = await api.GET('/api/images', { params: { query: { limit: 1, sessionId: 'typed-client', cursor } } });
      expect(error).toBeUndefined();
      seen.push(...(data?.data ?? []).map((i) => i.id));
      cursor = data?.pagination.nextCursor ?? undefined;
      if (!cursor) break;
    }
    expect(seen.sort()).toEqual([...ids].sort());

    const missing = await api.GET('/api/images/{id}', { params: { path: { id: 999_999_999 } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.error).toBe('Image not found');
  });
});
