import { readFileSync } from 'node:fs';
import { buildInfo } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Tenant API-key authentication through the gateway (SPEC 5): header precedence, format, revocation
 * and tenant deactivation seen through the gateway's cache within seconds, X-Session-Id, isolation.
 */
let s: TestStack;
let a: TestTenant;
let b: TestTenant;
let probePath = '/api/profile';

const INVALID = { error: 'Invalid or missing API key' };

beforeAll(async () => {
  s = await startTestStack();
  a = await s.createTenant();
  b = await s.createTenant();
  // GET /api/profile belongs to usage metering; until it exists, any authenticated /api route will do.
  const r = await s.api('/api/profile', { key: a.liveKey });
  if (r.status === 404 && /^Route /.test(r.body?.error ?? '')) probePath = '/api/sessions';
});

afterAll(async () => {
  await s?.stop();
});

describe('tenant API keys', () => {
  it('accepts live and test keys in X-API-Key and in Authorization: Bearer', async () => {
    expect((await s.api(probePath, { key: a.liveKey })).status).toBe(200);
    expect((await s.api(probePath, { key: a.testKey })).status).toBe(200);
    expect((await s.api(probePath, { headers: { authorization: `Bearer ${a.liveKey}` } })).status).toBe(200);
    expect((await s.api(probePath, { headers: { authorization: `bearer ${a.testKey}` } })).status).toBe(200);
  });

  it('answers 401 for a missing, malformed or unknown key', async () => {
    for (const headers of <Record<string, string>[]>[
      {},
      { 'x-api-key': 'nope' },
      { 'x-api-key': 'sk_live_short' },
      { 'x-api-key': `sk_prod_${'a'.repeat(40)}` },
      { 'x-api-key': `sk_live_${'a'.repeat(40)}` },
      { authorization: `Basic ${a.liveKey}` },
      { authorization: 'Bearer ' },
    ]) {
      const r = await s.api(probePath, { headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(r.body).toEqual(INVALID);
    }
  });

  it('lets X-API-Key win over Authorization: Bearer', async () => {
    const bad = `sk_live_${'b'.repeat(40)}`;
    const r1 = await s.api(probePath, { headers: { 'x-api-key': bad, authorization: `Bearer ${a.liveKey}` } });
    expect(r1.status).toBe(401);
    const r2 = await s.api(probePath, { headers: { 'x-api-key': a.liveKey, authorization: `Bearer ${bad}` } });
    expect(r2.status).toBe(200);
  });

  it('does not accept admin credentials on tenant routes, nor tenant keys on admin routes', async () => {
    expect((await s.api(probePath, { admin: true })).status).toBe(401);
    const r = await s.api('/admin/tenants', { key: a.liveKey });
    expect(r.status).toBe(401);
    expect(r.body).toEqual({ error: 'Admin authentication required' });
  });

  it('validates X-Session-Id (1-200 characters)', async () => {
    expect((await s.api(probePath, { key: a.liveKey, headers: { 'x-session-id': 'my-session' } })).status).toBe(200);
    expect((await s.api(probePath, { key: a.liveKey, headers: { 'x-session-id': 's'.repeat(200) } })).status).toBe(200);
    const r = await s.api(probePath, { key: a.liveKey, headers: { 'x-session-id': 's'.repeat(201) } });
    expect(r.status).toBe(400);
    expect(r.body.details).toEqual(['X-Session-Id must be between 1 and 200 characters']);
  });

  it('leaves /health and unknown routes alone', async () => {
    const h = await s.api('/health');
    expect(h.status).toBe(200);
    expect(h.body.status).toBe('ok');
    // What the gateway runs: the root package.json's version and the commit (IMAGEGEN_COMMIT, else git HEAD).
    expect(h.body).toEqual({ status: 'ok', timestamp: expect.any(String), ...buildInfo() });
    expect(h.body.version).toBe(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
    // The gateway's own liveness says the same.
    const live = await fetch(`${s.baseUrl}/livez`);
    expect(await live.json()).toEqual({ status: 'ok', timestamp: expect.any(String), ...buildInfo() });
    expect((await s.api('/no-such-route')).status).toBe(404);
  });

  it('shows each key its own tenant only', async () => {
    const ra = await s.api('/api/profile', { key: a.liveKey });
    const rb = await s.api('/api/profile', { key: b.liveKey });
    expect(ra.body.data?.tenant?.tenantId ?? ra.body.tenant?.tenantId).toBe(a.tenantId);
    expect(rb.body.data?.tenant?.tenantId ?? rb.body.tenant?.tenantId).toBe(b.tenantId);
    // Another tenant's key ids are not found under this tenant.
    const keyOfA = (await s.api(`/admin/tenants/${a.tenantId}`, { admin: true })).body.data.apiKeys[0].keyId;
    const r = await s.api(`/admin/tenants/${b.tenantId}/api-keys/${keyOfA}`, { method: 'DELETE', admin: true });
    expect(r.status).toBe(404);
    expect((await s.api(probePath, { key: a.liveKey })).status).toBe(200);
  });

  it('refuses a revoked key within seconds, also after it was cached', async () => {
    const t = await s.createTenant();
    expect((await s.api(probePath, { key: t.liveKey })).status).toBe(200); // now cached
    const del = await s.api(`/admin/tenants/${t.tenantId}/api-keys/Default%20live%20key`, { method: 'DELETE', admin: true });
    expect(del.status).toBe(200);
    expect(del.body.data.key).toMatchObject({ keyName: 'Default live key', isActive: false });
    const r = await waitFor(
      async () => {
        const x = await s.api(probePath, { key: t.liveKey });
        return x.status === 401 && x;
      },
      { message: 'the revoked key refused', interval: 200 },
    );
    expect(r.status).toBe(401);
    expect(r.body).toEqual(INVALID);
    expect((await s.api(probePath, { key: t.testKey })).status).toBe(200);
  });

  it('answers 403 for an inactive tenant and accepts its keys again after reactivation', async () => {
    const t = await s.createTenant();
    expect((await s.api(probePath, { key: t.testKey })).status).toBe(200);
    const off = await s.api(`/admin/tenants/${t.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: false } });
    expect(off.status).toBe(200);
    expect(off.body.data.tenant.isActive).toBe(false);
    const r = await waitFor(
      async () => {
        const x = await s.api(probePath, { key: t.testKey });
        return x.status === 403 && x;
      },
      { message: 'the inactive tenant refused', interval: 200 },
    );
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ error: 'Tenant account is inactive' });
    // An invalid key of an inactive tenant is still 401 (format and lookup come first).
    expect((await s.api(probePath, { key: `sk_test_${'z'.repeat(40)}` })).status).toBe(401);
    // Other tenants are unaffected.
    expect((await s.api(probePath, { key: a.liveKey })).status).toBe(200);
    const on = await s.api(`/admin/tenants/${t.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: true } });
    expect(on.status).toBe(200);
    const back = await waitFor(
      async () => {
        const x = await s.api(probePath, { key: t.testKey });
        return x.status === 200 && x;
      },
      { message: 'the reactivated tenant accepted', interval: 200 },
    );
    expect(back.status).toBe(200);
  });

  it('counts key usage (usageCount, lastUsedAt) including cached requests', async () => {
    const t = await s.createTenant();
    for (let i = 0; i < 5; i++) expect((await s.api(probePath, { key: t.liveKey })).status).toBe(200);
    const r = await waitFor(
      async () => {
        const x = await s.api(`/admin/tenants/${t.tenantId}`, { admin: true });
        return x.body.data.apiKeys.find((k: any) => k.type === 'live').usageCount >= 5 && x;
      },
      { message: 'a usage count of 5', interval: 200 },
    );
    const live = r.body.data.apiKeys.find((k: { type: string }) => k.type === 'live');
    expect(live.usageCount).toBe(5);
    expect(live.lastUsedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    const test = r.body.data.apiKeys.find((k: { type: string }) => k.type === 'test');
    expect(test.usageCount).toBe(0);
    expect(test.lastUsedAt).toBeNull();
  });
});
