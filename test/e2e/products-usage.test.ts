/**
 * Saved-asset images count in usage like every stored image: a product's image (ImageStored, operation
 * 'product', written with the product row) and scene reference images imported from URLs (stored through the
 * library's storeImage, operation 'scene-reference'). Deleting a product keeps the month's billed bytes but
 * lowers the platform's storage total (ImageDeleted).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestStack, TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { type ImageServer, noisePng, startAssetsStack, startImageServer } from './products-support.js';

const MIB = 1024 * 1024;
const thisMonth = () => new Date().toISOString().slice(0, 7);

let s: TestStack;
let img: ImageServer;

beforeAll(async () => {
  [s, img] = await Promise.all([startAssetsStack(), startImageServer()]);
});
afterAll(async () => {
  await img?.close();
  await s?.stop();
});

const usage = async (t: TestTenant) => {
  const r = await s.api('/api/usage', { key: t.liveKey });
  expect(r.status).toBe(200);
  return r.body.data;
};
const platformBytes = async (): Promise<number> => {
  const r = await s.api('/admin/stats', { admin: true });
  expect(r.status).toBe(200);
  return r.body.data.storage.totalBytes;
};

describe('usage of saved-asset images', () => {
  it('counts a product image (bytes, image, operation) and keeps it billed after the product is deleted', async () => {
    const [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
    img.set('/product-noise.png', await noisePng(1.5 * MIB), 'image/png');
    const c = await s.api('/api/products', {
      key: t.liveKey,
      body: { product_name: 'Noise', product_url: `${img.url}/product-noise.png` },
    });
    expect(c.status).toBe(200);
    const bytes = c.body.data.sizeBytes as number;
    expect(bytes).toBeGreaterThan(MIB);

    const u = await waitFor(
      async () => {
        const d = await usage(t);
        return d.months[0]?.total_bytes === bytes && d;
      },
      { interval: 100 },
    );
    expect(u.months).toEqual([
      {
        month: thisMonth(),
        total_operations: 1,
        total_images: 1,
        total_bytes: bytes,
        total_mb: Math.round((bytes / MIB) * 100) / 100,
        avg_duration_ms: 0,
      },
    ]);
    expect(u.recent).toEqual({ bytes, images: 1 });
    expect(u.quota.monthlyUsedMb).toBe(Math.round(bytes / MIB));
    await waitFor(async () => (await platformBytes()) >= bytes, { interval: 100 });
    const before = await platformBytes();

    // Another tenant's usage is untouched.
    expect((await usage(other)).months).toEqual([]);

    const del = await s.api(`/api/products/${c.body.data.id}`, { key: t.liveKey, method: 'DELETE' });
    expect(del.status).toBe(200);
    // Storage held by the platform drops by the product's bytes...
    await waitFor(async () => (await platformBytes()) === before - bytes, { interval: 100 });
    // ...while the month keeps what was billed.
    const after = await usage(t);
    expect(after.months[0]).toMatchObject({ total_images: 1, total_bytes: bytes, total_operations: 1 });
  });

  it('counts scene reference images imported from URLs', async () => {
    const t = await s.createTenant();
    const c = await s.api('/api/scenes', {
      key: t.liveKey,
      body: { scene_name: 'imported', reference_image_urls: [`${img.url}/red.png`, `${img.url}/blue.jpg`] },
    });
    expect(c.status).toBe(200);
    const ids = (c.body.data.referenceImages as { id: number }[]).map((r) => r.id);
    expect(ids).toHaveLength(2);
    const sizes = await Promise.all(
      ids.map(async (id) => {
        const r = await s.api(`/api/images/${id}`, { key: t.liveKey });
        expect(r.status).toBe(200);
        return (r.body.data.size_bytes ?? r.body.data.sizeBytes) as number;
      }),
    );
    const bytes = sizes.reduce((a, b) => a + b, 0);
    expect(bytes).toBeGreaterThan(0);
    const u = await waitFor(
      async () => {
        const d = await usage(t);
        return d.months[0]?.total_images === 2 && d;
      },
      { interval: 100 },
    );
    expect(u.months[0]).toMatchObject({ month: thisMonth(), total_operations: 2, total_images: 2, total_bytes: bytes });
  });
});
