import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_MODELS, startTestStack, type TestStack } from '../support/stack.js';

/** Admin tenant and API-key routes (SPEC 4.9, issue 3 item 6, issue 7 item 4). */
let s: TestStack;
let seq = 0;
const uid = () => `ten${Date.now().toString(36)}${++seq}`;
const base = (id = uid()) => ({
  tenant_id: id,
  tenant_name: `Tenant ${id}`,
  contact_email: `${id}@example.com`,
  provider_credentials: { provA: 'key-a' },
});
/** Every request from its own client address: the gateway rate-limits /admin/* per cf-connecting-ip. */
const randomIp = () => `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 254) + 1}`;
const api: TestStack['api'] = (path, init = {}) =>
  s.api(path, { ...init, headers: { 'cf-connecting-ip': randomIp(), ...(init.headers ?? {}) } });
const post = (body: unknown) => api('/admin/tenants', { admin: true, body });
const patch = (id: string, body: unknown) => api(`/admin/tenants/${id}`, { method: 'PATCH', admin: true, body });

beforeAll(async () => {
  s = await startTestStack();
});
afterAll(async () => {
  await s?.stop();
});

describe('POST /admin/tenants', () => {
  it('creates a tenant with the defaults and returns the full keys once', async () => {
    const id = uid();
    const r = await post(base(id));
    expect(r.status).toBe(200);
    const { tenant, apiKeys } = r.body.data;
    expect(tenant).toEqual({
      tenantId: id,
      tenantName: `Tenant ${id}`,
      isActive: true,
      contactEmail: `${id}@example.com`,
      monthlyQuotaMb: 10240,
      rateLimitPerMinute: 60,
      notes: null,
      modelId: 'provA-flash-lite-image',
      allowedModels: ['provA-flash-lite-image', 'provA-flash-image', 'provA-pro-image'],
      credentialsIncludePrompt: false,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: expect.any(String),
    });
    expect(apiKeys).toHaveLength(2);
    expect(apiKeys.map((k: any) => k.type).sort()).toEqual(['live', 'test']);
    for (const k of apiKeys) {
      expect(k.apiKey).toMatch(/^sk_(live|test)_[a-zA-Z0-9]{32,}$/);
      expect(k.keyName).toBeTruthy();
    }
    // Afterwards keys are abbreviated and provider credentials are never returned.
    const d = await api(`/admin/tenants/${id}`, { admin: true });
    expect(d.status).toBe(200);
    expect(d.body.data.tenant).toEqual(tenant);
    for (const k of d.body.data.apiKeys) {
      expect(k.apiKey).toMatch(/^sk_(live|test)_[a-zA-Z0-9]{4}\.\.\.[a-zA-Z0-9]{4}$/);
      expect(k).toMatchObject({ isActive: true, usageCount: 0, lastUsedAt: null, createdAt: expect.any(String) });
      expect(apiKeys.map((x: any) => x.apiKey)).not.toContain(k.apiKey);
    }
    expect(JSON.stringify(d.body)).not.toContain('key-a');
    expect(d.body.data.providerCredentials).toEqual({
      provA: { configured: true, keyCount: 1 },
      provB: { configured: false, keyCount: 0 },
    });
  });

  it('takes every optional field, lowercases tenant_id, and accepts the legacy provA_api_key', async () => {
    const id = uid();
    const r = await post({
      tenant_id: id.toUpperCase(),
      tenant_name: 'Full',
      contact_email: 'full@example.com',
      provA_api_key: 'legacy-key',
      monthly_quota_mb: 500,
      rate_limit_per_minute: 120,
      model_id: 'provA-pro-image',
      allowed_models: ['provA-pro-image', 'provA-flash-image'],
      notes: 'vip',
      api_keys: [{ key_name: 'ci', type: 'test' }, { key_name: 'prod' }],
    });
    expect(r.status).toBe(200);
    expect(r.body.data.tenant).toMatchObject({
      tenantId: id,
      monthlyQuotaMb: 500,
      rateLimitPerMinute: 120,
      modelId: 'provA-pro-image',
      allowedModels: ['provA-pro-image', 'provA-flash-image'],
      notes: 'vip',
    });
    expect(r.body.data.apiKeys.map((k: any) => [k.keyName, k.type])).toEqual([
      ['ci', 'test'],
      ['prod', 'live'],
    ]);
    expect((await api(`/admin/tenants/${id.toUpperCase()}`, { admin: true })).status).toBe(200);
  });

  it('accepts provider pools as lists of up to five keys per provider', async () => {
    const id = uid();
    const r = await post({
      ...base(id),
      provider_credentials: { provA: ['a1', 'a2', 'a3', 'a4', 'a5'], provB: ['b1'] },
      allowed_models: ALL_MODELS,
    });
    expect(r.status).toBe(200);
    const d = await api(`/admin/tenants/${id}`, { admin: true });
    expect(d.body.data.providerCredentials).toEqual({ provA: { configured: true, keyCount: 5 }, provB: { configured: true, keyCount: 1 } });
  });

  it('answers 400 with details for invalid bodies', async () => {
    const cases: [unknown, string][] = [
      [{}, 'tenant_id is required'],
      [{ ...base(), tenant_name: undefined }, 'tenant_name is required'],
      [{ ...base(), contact_email: 'not-an-email' }, 'contact_email'],
      [{ ...base(), provider_credentials: undefined }, 'At least one provider key is required'],
      [{ ...base(), provider_credentials: { provA: null, provB: null } }, 'At least one provider key is required'],
      [
        { ...base(), provider_credentials: { provA: ['1', '2', '3', '4', '5', '6'] } },
        'provider_credentials.provA must have at most 5 items',
      ],
      [{ ...base(), provider_credentials: { provC: 'x' } }, 'provider_credentials.provC is not allowed'],
      [{ ...base(), monthly_quota_mb: '10' }, 'monthly_quota_mb must be an integer'],
      [{ ...base(), rate_limit_per_minute: 1.5 }, 'rate_limit_per_minute must be an integer'],
      [{ ...base(), model_id: 'gpt-image' }, 'model_id must be one of'],
      [{ ...base(), allowed_models: ['provA-flash-image', 'nope'] }, 'allowed_models.1 must be one of'],
      [{ ...base(), model_id: 'provA-pro-image', allowed_models: ['provA-flash-image'] }, 'model_id must be one of allowed_models'],
      [{ ...base(), tenant_id: 'bad id!' }, 'tenant_id must be'],
      [{ ...base(), api_keys: [{ key_name: 'x'.repeat(101) }] }, 'api_keys.0.key_name must be at most 100 characters'],
      [{ ...base(), api_keys: [{ key_name: 'k', type: 'prod' }] }, 'api_keys.0.type must be one of: live, test'],
      [{ ...base(), api_keys: Array.from({ length: 11 }, (_, i) => ({ key_name: `k${i}` })) }, 'api_keys must have at most 10 items'],
      [{ ...base(), provA_api_key: 'x', provider_credentials: { provA: 'y' } }, 'either provA_api_key'],
    ];
    for (const [body, detail] of cases) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBe('Invalid request payload');
      expect(r.body.details.join(' | '), JSON.stringify(body)).toContain(detail);
    }
    const bad = await api('/admin/tenants', { admin: true, body: '{not json' });
    expect(bad.status).toBe(400);
  });

  it('refuses a duplicate tenant id with 409', async () => {
    const id = uid();
    expect((await post(base(id))).status).toBe(200);
    const r = await post(base(id));
    expect(r.status).toBe(409);
    expect(r.body.error).toContain('already exists');
    expect((await post(base(id.toUpperCase()))).status).toBe(409);
  });
});

describe('GET /admin/tenants', () => {
  it('lists tenants', async () => {
    const t = await s.createTenant();
    const r = await api('/admin/tenants', { admin: true });
    expect(r.status).toBe(200);
    expect(Array.isArray(r.body.data)).toBe(true);
    expect(r.body.data.find((x: any) => x.tenantId === t.tenantId)).toMatchObject({ tenantId: t.tenantId, isActive: true });
  });

  it('answers 404 for an unknown tenant', async () => {
    for (const [method, path, body] of [
      ['GET', '/admin/tenants/nope-nope', undefined],
      ['PATCH', '/admin/tenants/nope-nope', { notes: 'x' }],
      ['POST', '/admin/tenants/nope-nope/api-keys', { key_name: 'k' }],
      ['DELETE', '/admin/tenants/nope-nope/api-keys/k', undefined],
    ] as const) {
      const r = await api(path, { method, admin: true, body });
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body).toEqual({ error: 'Tenant not found' });
    }
  });
});

describe('PATCH /admin/tenants/:tenantId', () => {
  it('updates fields and returns the detail shape', async () => {
    const t = await s.createTenant();
    const r = await patch(t.tenantId, {
      tenant_name: 'Renamed',
      contact_email: 'new@example.com',
      monthly_quota_mb: 2048,
      rate_limit_per_minute: 30,
      notes: 'hello',
      model_id: 'provB-image-2',
      allowed_models: ['provB-image-2', 'provA-flash-lite-image'],
    });
    expect(r.status).toBe(200);
    expect(r.body.data.tenant).toMatchObject({
      tenantName: 'Renamed',
      contactEmail: 'new@example.com',
      monthlyQuotaMb: 2048,
      rateLimitPerMinute: 30,
      notes: 'hello',
      modelId: 'provB-image-2',
      allowedModels: ['provB-image-2', 'provA-flash-lite-image'],
    });
    expect(r.body.data.apiKeys).toHaveLength(2);
    expect(Date.parse(r.body.data.tenant.updatedAt)).toBeGreaterThanOrEqual(Date.parse(r.body.data.tenant.createdAt));
    const cleared = await patch(t.tenantId, { notes: null });
    expect(cleared.body.data.tenant.notes).toBeNull();
  });

  it('validates models against the six ids and the allowlist', async () => {
    const t = await s.createTenant();
    let r = await patch(t.tenantId, { model_id: 'nope' });
    expect(r.status).toBe(400);
    r = await patch(t.tenantId, { allowed_models: ['provB-image-2'] }); // current model provA-flash-lite-image
    expect(r.status).toBe(400);
    expect(r.body.details[0]).toContain('allowed_models must include');
    r = await patch(t.tenantId, { allowed_models: [] });
    expect(r.status).toBe(400);
    r = await patch(t.tenantId, { is_active: 'no' });
    expect(r.status).toBe(400);
    expect(r.body.details).toContain('is_active must be a boolean');
  });

  it('replaces or removes one provider pool without touching the other, keeping at least one', async () => {
    const t = await s.createTenant(); // provA and provB
    const pools = async () => (await api(`/admin/tenants/${t.tenantId}`, { admin: true })).body.data.providerCredentials;
    let r = await patch(t.tenantId, { provider_credentials: { provA: ['n1', 'n2', 'n3'] } });
    expect(r.status).toBe(200);
    expect(await pools()).toEqual({ provA: { configured: true, keyCount: 3 }, provB: { configured: true, keyCount: 1 } });
    r = await patch(t.tenantId, { provider_credentials: { provB: null } });
    expect(r.status).toBe(200);
    expect(r.body.data.providerCredentials).toEqual({
      provA: { configured: true, keyCount: 3 },
      provB: { configured: false, keyCount: 0 },
    });
    r = await patch(t.tenantId, { provider_credentials: { provA: [] } });
    expect(r.status).toBe(400);
    expect(r.body.details[0]).toContain('At least one provider key is required');
    r = await patch(t.tenantId, { provider_credentials: { provA: null, provB: 'b-new' } });
    expect(r.status).toBe(200);
    expect(await pools()).toEqual({ provA: { configured: false, keyCount: 0 }, provB: { configured: true, keyCount: 1 } });
    r = await patch(t.tenantId, { provA_api_key: 'legacy' });
    expect(await pools()).toEqual({ provA: { configured: true, keyCount: 1 }, provB: { configured: true, keyCount: 1 } });
  });
});

describe('API keys', () => {
  it('creates keys (full value once), refuses the 11th and duplicates, and revokes by id or name', async () => {
    const t = await s.createTenant(); // 2 keys
    const r = await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body: { key_name: 'k3', type: 'test' } });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ keyName: 'k3', type: 'test', apiKey: expect.stringMatching(/^sk_test_[a-zA-Z0-9]{32,}$/) });
    const dflt = await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body: { key_name: 'k4' } });
    expect(dflt.body.data.type).toBe('live');
    const dup = await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body: { key_name: 'k4' } });
    expect(dup.status).toBe(409);
    for (let i = 5; i <= 10; i++) {
      expect((await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body: { key_name: `k${i}` } })).status).toBe(200);
    }
    const eleventh = await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body: { key_name: 'k11' } });
    expect(eleventh.status).toBe(400);
    expect(eleventh.body.error).toContain('at most 10');
    // Revoking frees a slot; by key id and by (URL-encoded) name.
    const byId = await api(`/admin/tenants/${t.tenantId}/api-keys/${r.body.data.keyId}`, { method: 'DELETE', admin: true });
    expect(byId.status).toBe(200);
    expect(byId.body.data).toMatchObject({
      success: true,
      key: { keyId: r.body.data.keyId, isActive: false, revokedAt: expect.any(String) },
    });
    expect((await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body: { key_name: 'k11' } })).status).toBe(200);
    const byName = await api(`/admin/tenants/${t.tenantId}/api-keys/${encodeURIComponent('Default test key')}`, {
      method: 'DELETE',
      admin: true,
    });
    expect(byName.status).toBe(200);
    expect(byName.body.data.key.keyName).toBe('Default test key');
    // Idempotent for the same id; 404 for an unknown one.
    expect((await api(`/admin/tenants/${t.tenantId}/api-keys/${r.body.data.keyId}`, { method: 'DELETE', admin: true })).status).toBe(200);
    const unknown = await api(`/admin/tenants/${t.tenantId}/api-keys/key_unknown`, { method: 'DELETE', admin: true });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: 'API key not found' });
    const detail = await api(`/admin/tenants/${t.tenantId}`, { admin: true });
    expect(detail.body.data.apiKeys.filter((k: any) => k.isActive)).toHaveLength(9);
    expect(detail.body.data.apiKeys.filter((k: any) => !k.isActive)).toHaveLength(2);
  });

  it('validates key bodies', async () => {
    const t = await s.createTenant();
    for (const [body, detail] of [
      [{}, 'key_name is required'],
      [{ key_name: '' }, 'key_name cannot be empty'],
      [{ key_name: 'x'.repeat(101) }, 'key_name must be at most 100 characters'],
      [{ key_name: 'ok', type: 'gold' }, 'type must be one of: live, test'],
    ] as const) {
      const r = await api(`/admin/tenants/${t.tenantId}/api-keys`, { admin: true, body });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: 'Invalid request payload', details: [detail] });
    }
  });
});

describe('admin credentials on tenant routes', () => {
  it('answers 401 without credentials and with a wrong admin token', async () => {
    const t = await s.createTenant();
    const routes = [
      ['GET', '/admin/tenants'],
      ['POST', '/admin/tenants'],
      ['GET', `/admin/tenants/${t.tenantId}`],
      ['PATCH', `/admin/tenants/${t.tenantId}`],
      ['POST', `/admin/tenants/${t.tenantId}/api-keys`],
      ['DELETE', `/admin/tenants/${t.tenantId}/api-keys/x`],
    ] as const;
    for (const [method, path] of routes) {
      const body = method === 'GET' || method === 'DELETE' ? undefined : {};
      const none = await api(path, { method, body });
      expect(none.status, `${method} ${path}`).toBe(401);
      expect(none.body).toEqual({ error: 'Admin authentication required' });
      const wrong = await api(path, { method, body, headers: { 'x-admin-token': 'wrong' } });
      expect(wrong.status).toBe(401);
      const bearer = await api(path, { method, body, headers: { authorization: 'Bearer adms_not-a-session' } });
      expect(bearer.status).toBe(401);
    }
  });
});
