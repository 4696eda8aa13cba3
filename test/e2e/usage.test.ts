import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testClient } from '../support/client.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { MIB, noisePng, startImageServer } from './usage-support.js';

let s: TestStack;
let A: TestTenant;
let B: TestTenant;
let images: Awaited<ReturnType<typeof startImageServer>>;

const thisMonth = () => new Date().toISOString().slice(0, 7);

beforeAll(async () => {
  s = await startTestStack();
  // High per-minute limits: these tests poll (rate limits have their own test file).
  [A, B] = await Promise.all([
    s.createTenant({ rate_limit_per_minute: 100_000 }),
    s.createTenant({ monthly_quota_mb: 2048, rate_limit_per_minute: 5000 }),
  ]);
  images = await startImageServer();
});
afterAll(async () => {
  await images?.stop();
  await s?.stop();
});

describe('GET /api/usage', () => {
  it('answers the empty shape for a new tenant', async () => {
    const r = await s.api('/api/usage', { key: B.liveKey });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      data: {
        months: [],
        recent: { bytes: 0, images: 0 },
        quota: { monthlyQuotaMb: 2048, monthlyUsedMb: 0, monthlyRemainingMb: 2048, rateLimitPerMinute: 5000 },
      },
    });
  });

  it('counts a generation: one operation, its images and bytes, in this month and the last 30 days', async () => {
    const gen = await s.api('/api/images', { key: A.liveKey, body: { prompt: 'a lighthouse at dusk', n: 2 } });
    expect(gen.status).toBe(200);
    const stored = gen.body.data.images as { size_bytes: number }[];
    const bytes = stored.reduce((n, i) => n + i.size_bytes, 0);
    const usage = await waitFor(
      async () => {
        const r = await s.api('/api/usage', { key: A.liveKey });
        const m = r.body.data.months[0];
        return m?.total_images === stored.length && m.total_operations === 1 && r.body.data;
      },
      { message: 'usage of the generation', timeout: 20_000 },
    );
    expect(usage.months).toEqual([
      {
        month: thisMonth(),
        total_operations: 1,
        total_images: stored.length,
        total_bytes: bytes,
        total_mb: Math.round((bytes / MIB) * 100) / 100,
        avg_duration_ms: expect.any(Number),
      },
    ]);
    expect(Number.isInteger(usage.months[0].avg_duration_ms)).toBe(true);
    expect(usage.recent).toEqual({ bytes, images: stored.length });
    expect(usage.quota).toEqual({
      monthlyQuotaMb: 10240,
      monthlyUsedMb: Math.round(bytes / MIB),
      monthlyRemainingMb: 10240 - Math.round(bytes / MIB),
      rateLimitPerMinute: 100_000,
    });

    // Another tenant sees none of it.
    const other = await s.api('/api/usage', { key: B.liveKey });
    expect(other.body.data.months).toEqual([]);
    expect(other.body.data.recent).toEqual({ bytes: 0, images: 0 });
  });

  it('accepts limit 1..24 and answers 400 Invalid limit otherwise', async () => {
    for (const ok of ['1', '12', '24']) {
      const r = await s.api(`/api/usage?limit=${ok}`, { key: A.liveKey });
      expect(r.status, ok).toBe(200);
    }
    expect((await s.api('/api/usage?limit=1', { key: A.liveKey })).body.data.months.length).toBeLessThanOrEqual(1);
    for (const bad of ['0', '25', '-1', 'abc', '1.5', '']) {
      const r = await s.api(`/api/usage?limit=${bad}`, { key: A.liveKey });
      expect(r.status, bad).toBe(400);
      expect(r.body, bad).toEqual({ error: 'Invalid limit' });
    }
  });

  it('needs a tenant API key', async () => {
    expect((await s.api('/api/usage')).status).toBe(401);
    expect((await s.api('/api/usage', { key: 'sk_live_notavalidkeynotavalidkeynotavalid00' })).body).toEqual({
      error: 'Invalid or missing API key',
    });
    expect((await s.api('/api/usage', { admin: true })).status).toBe(401);
  });
});

describe('GET /api/profile', () => {
  it('answers the tenant and its quota object (integers), and (extension) its allowed and default models', async () => {
    const r = await s.api('/api/profile', { key: B.liveKey });
    expect(r.status).toBe(200);
    // B was created without models: the admin's view of it says which it got.
    const admin = await s.api(`/admin/tenants/${B.tenantId}`, { admin: true });
    expect(admin.body.data.tenant.allowedModels.length).toBeGreaterThan(0);
    expect(r.body).toEqual({
      tenant: {
        tenantId: B.tenantId,
        tenantName: `Tenant ${B.tenantId}`,
        quotas: { monthlyQuotaMb: 2048, monthlyUsedMb: 0, monthlyRemainingMb: 2048, rateLimitPerMinute: 5000 },
        allowedModels: admin.body.data.tenant.allowedModels,
        modelId: admin.body.data.tenant.modelId,
      },
    });
    expect((await s.api('/api/profile', { key: A.liveKey })).body.tenant.tenantId).toBe(A.tenantId);
  });

  it("says each tenant's own models only (tenant isolation), and an admin's change of them within seconds", async () => {
    const [narrow, wide] = await Promise.all([
      s.createTenant({
        allowed_models: ['provA-flash-lite-image', 'provB-image-2'],
        model_id: 'provB-image-2',
        rate_limit_per_minute: 100_000,
      }),
      s.createTenant({ allowed_models: ['provA-pro-image'], model_id: 'provA-pro-image' }),
    ]);
    const own = await s.api('/api/profile', { key: narrow.liveKey });
    expect(own.status).toBe(200);
    expect(own.body.tenant).toMatchObject({ tenantId: narrow.tenantId, modelId: 'provB-image-2' });
    expect([...own.body.tenant.allowedModels].sort()).toEqual(['provA-flash-lite-image', 'provB-image-2']);
    // The test key answers the same tenant; the other tenant's keys answer only its own.
    expect((await s.api('/api/profile', { key: narrow.testKey })).body.tenant).toMatchObject({
      tenantId: narrow.tenantId,
      modelId: 'provB-image-2',
    });
    const theirs = await s.api('/api/profile', { key: wide.liveKey });
    expect(theirs.body.tenant).toMatchObject({ tenantId: wide.tenantId, allowedModels: ['provA-pro-image'], modelId: 'provA-pro-image' });

    const patch = await s.api(`/admin/tenants/${narrow.tenantId}`, {
      method: 'PATCH',
      admin: true,
      body: { allowed_models: ['provA-flash-lite-image'], model_id: 'provA-flash-lite-image' },
    });
    expect(patch.status, JSON.stringify(patch.body)).toBe(200);
    const changed = await waitFor(
      async () => {
        const r = await s.api('/api/profile', { key: narrow.liveKey });
        return r.body.tenant.modelId === 'provA-flash-lite-image' && r.body.tenant;
      },
      { message: 'new models', timeout: 15_000 },
    );
    expect(changed.allowedModels).toEqual(['provA-flash-lite-image']);
    // The other tenant is untouched.
    expect((await s.api('/api/profile', { key: wide.liveKey })).body.tenant.allowedModels).toEqual(['provA-pro-image']);
  });

  it('reflects an admin change of the quota and rate limit within seconds', async () => {
    const patch = await s.api(`/admin/tenants/${B.tenantId}`, {
      method: 'PATCH',
      admin: true,
      body: { monthly_quota_mb: 4096, rate_limit_per_minute: 6000 },
    });
    expect(patch.status).toBe(200);
    const q = await waitFor(
      async () => {
        const r = await s.api('/api/profile', { key: B.liveKey });
        return r.body.tenant.quotas.monthlyQuotaMb === 4096 && r.body.tenant.quotas;
      },
      { message: 'new quota', timeout: 15_000 },
    );
    expect(q).toEqual({ monthlyQuotaMb: 4096, monthlyUsedMb: 0, monthlyRemainingMb: 4096, rateLimitPerMinute: 6000 });
  });

  it('needs a tenant API key', async () => {
    expect((await s.api('/api/profile')).status).toBe(401);
  });
});

describe('monthly storage quota (402)', () => {
  it('refuses generations and uploads once the month reached the quota, storing and billing nothing', async () => {
    const C = await s.createTenant({ monthly_quota_mb: 1, rate_limit_per_minute: 100_000 });
    // ~1.1 MiB of incompressible pixels: allowed (usage 0 < quota) and it fills the quota.
    const url = images.serve(noisePng(620, 620));
    const up = await s.api('/api/upload-for-editing', { key: C.liveKey, body: { image_url: url } });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    expect(up.body.size_bytes).toBeGreaterThan(MIB);
    await waitFor(async () => (await s.api('/api/usage', { key: C.liveKey })).body.data.quota.monthlyRemainingMb === 0, {
      message: 'usage at quota',
      timeout: 20_000,
    });

    const before = await s.api('/api/images', { key: C.liveKey });
    expect(before.body.pagination.total).toBe(1);

    const gen = await s.api('/api/images', { key: C.liveKey, body: { prompt: 'one more please' } });
    expect(gen.status).toBe(402);
    expect(gen.body).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
    const up2 = await s.api('/api/upload-for-editing', { key: C.liveKey, body: { image_url: images.serve(noisePng(16, 16)) } });
    expect(up2.status).toBe(402);
    expect(up2.body).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });

    const after = await s.api('/api/images', { key: C.liveKey });
    expect(after.body.pagination.total).toBe(1);
    const usage = (await s.api('/api/usage', { key: C.liveKey })).body.data;
    expect(usage.months[0]).toMatchObject({ total_images: 1, total_bytes: up.body.size_bytes });
    expect(usage.quota).toEqual({ monthlyQuotaMb: 1, monthlyUsedMb: 1, monthlyRemainingMb: 0, rateLimitPerMinute: 100_000 });

    // Raising the quota lets the tenant store again (tenancy cache: seconds).
    await s.api(`/admin/tenants/${C.tenantId}`, { method: 'PATCH', admin: true, body: { monthly_quota_mb: 100 } });
    const again = await waitFor(
      async () => {
        const r = await s.api('/api/images', { key: C.liveKey, body: { prompt: 'room again' } });
        return r.status === 200 && r;
      },
      { message: 'generation allowed again', timeout: 20_000 },
    );
    expect(again.body.data.images).toHaveLength(1);
  });
});

describe('OpenAPI', () => {
  it('documents the usage, profile and webhook routes', async () => {
    const r = await fetch(`${s.baseUrl}/docs/json`);
    expect(r.status).toBe(200);
    const doc = (await r.json()) as { paths: Record<string, Record<string, unknown>> };
    for (const [path, method] of [
      ['/api/usage', 'get'],
      ['/api/profile', 'get'],
      ['/api/webhooks', 'post'],
      ['/api/webhooks/{id}', 'patch'],
      ['/api/webhooks/{id}/deliveries', 'get'],
    ]) {
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeTruthy();
    }
  });
});

describe('the typed client (libs/client)', () => {
  it('reads usage and the profile with typed calls', async () => {
    const api = testClient(s.baseUrl, A.liveKey);
    const usage = await api.GET('/api/usage', { params: { query: { limit: 3 } } });
    expect(usage.response.status).toBe(200);
    expect(usage.data?.data.quota.rateLimitPerMinute).toBe(100_000);
    expect(Array.isArray(usage.data?.data.months)).toBe(true);
    const profile = await api.GET('/api/profile');
    expect(profile.data?.tenant).toMatchObject({ tenantId: A.tenantId, quotas: { rateLimitPerMinute: 100_000 } });
    expect(profile.data?.tenant.allowedModels).toContain(profile.data?.tenant.modelId);
    const bad = await api.GET('/api/usage', { params: { query: { limit: 99 } } });
    expect(bad.response.status).toBe(400);
    expect(bad.error?.error).toBe('Invalid limit');
  });
});
