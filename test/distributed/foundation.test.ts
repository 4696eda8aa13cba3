import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait.js';
import { type Journey, metricValue, startJourney } from './harness.js';

/**
 * Issue 3, distributed shape: the gateway and tenancy as separate OS processes against the machine's
 * PostgreSQL and NATS (unique EVENTS_PREFIX): tenant creation, API-key auth and its 401/403 paths,
 * plus the ops endpoints and a graceful stop/restart of tenancy. usage-metering runs too, as its own
 * process: GET /api/profile reads the tenant's quota from it.
 */
describe('gateway and tenancy as separate processes', () => {
  let j: Journey;
  let tenant: Awaited<ReturnType<Journey['createTenant']>>;

  beforeAll(async () => {
    j = await startJourney({ services: ['tenancy', 'usage-metering', 'gateway'] });
    tenant = await j.createTenant();
  }, 240_000);
  afterAll(async () => {
    await j?.stop();
  }, 60_000);

  it('creates a tenant with a live and a test key over gRPC between processes', async () => {
    expect(tenant.liveKey).toMatch(/^sk_live_[a-zA-Z0-9]{32,}$/);
    expect(tenant.testKey).toMatch(/^sk_test_[a-zA-Z0-9]{32,}$/);
    const res = await j.api(`/admin/tenants/${tenant.tenantId}`, { admin: true });
    expect(res.status).toBe(200);
    expect(res.body.data.tenant.tenantId).toBe(tenant.tenantId);
    expect(JSON.stringify(res.body)).not.toContain(tenant.liveKey);
  });

  it('authenticates API keys by X-API-Key and by Bearer', async () => {
    const a = await j.api('/api/profile', { key: tenant.liveKey });
    expect(a.status).toBe(200);
    expect(a.body.tenant.tenantId).toBe(tenant.tenantId);
    const b = await j.api('/api/profile', { headers: { authorization: `Bearer ${tenant.testKey}` } });
    expect(b.status).toBe(200);
    expect(b.body.tenant.tenantId).toBe(tenant.tenantId);
  });

  it('answers 401 for a missing, malformed or unknown key, and X-API-Key wins over Bearer', async () => {
    const cases: Record<string, string>[] = [
      {},
      { 'x-api-key': 'nope' },
      { 'x-api-key': `sk_live_${'a'.repeat(40)}` },
      { 'x-api-key': `sk_live_${'b'.repeat(40)}`, authorization: `Bearer ${tenant.liveKey}` },
    ];
    for (const headers of cases) {
      const res = await j.api('/api/profile', { headers });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: 'Invalid or missing API key' });
    }
  });

  it('answers 401 without admin credentials and 404 for an unknown tenant', async () => {
    const noAdmin = await j.api('/admin/tenants');
    expect(noAdmin.status).toBe(401);
    const unknown = await j.api('/admin/tenants/no-such-tenant', { admin: true });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe('Tenant not found');
  });

  it('refuses a duplicate tenant id', async () => {
    const res = await j.api('/admin/tenants', {
      admin: true,
      body: {
        tenant_id: tenant.tenantId,
        tenant_name: 'dup',
        contact_email: 'dup@example.com',
        provider_credentials: { provA: 'k' },
      },
    });
    expect(res.status).toBe(409);
  });

  it('answers 403 once the tenant is deactivated, and 200 again after reactivation', async () => {
    const other = await j.createTenant();
    expect((await j.api('/api/profile', { key: other.liveKey })).status).toBe(200);
    const off = await j.api(`/admin/tenants/${other.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: false } });
    expect(off.status).toBe(200);
    const denied = await waitFor(
      async () => {
        const r = await j.api('/api/profile', { key: other.liveKey });
        return r.status === 403 ? r : undefined;
      },
      { message: '403 for the inactive tenant', timeout: 30_000, interval: 200 },
    );
    expect(denied.body).toEqual({ error: 'Tenant account is inactive' });
    // Tenant isolation: the first tenant is unaffected.
    expect((await j.api('/api/profile', { key: tenant.liveKey })).status).toBe(200);
    await j.api(`/admin/tenants/${other.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: true } });
    await waitFor(async () => (await j.api('/api/profile', { key: other.liveKey })).status === 200, {
      message: '200 after reactivation',
      timeout: 30_000,
      interval: 200,
    });
  });

  it('serves /livez, /readyz and Prometheus /metrics from each process', async () => {
    const gw = j.services.get('gateway')!;
    const tn = j.services.get('tenancy')!;
    for (const url of [gw.opsUrl, tn.opsUrl]) {
      expect((await fetch(`${url}/livez`)).status).toBe(200);
      const ready = await fetch(`${url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready' });
    }
    const gwMetrics = await (await fetch(`${gw.opsUrl}/metrics`)).text();
    expect(
      metricValue(gwMetrics, 'imagegen_http_requests_total', { service: 'gateway', route: '/api/profile', status_code: '200' }),
    ).toBeGreaterThan(0);
    expect(gwMetrics).toContain('imagegen_http_request_duration_seconds_bucket');
    const tnMetrics = await (await fetch(`${tn.opsUrl}/metrics`)).text();
    const authCalls = metricValue(tnMetrics, 'imagegen_grpc_server_handled_total', {
      service: 'tenancy',
      method: '/imagegen.tenancy.v1.TenancyService/AuthenticateApiKey',
    });
    expect(authCalls).toBeGreaterThan(0);
    expect(tnMetrics).toContain('process_resident_memory_bytes');
  });

  it('stops tenancy gracefully on SIGTERM; the gateway turns unready, then recovers when tenancy is back', async () => {
    const gw = j.services.get('gateway')!;
    const exit = await j.kill('tenancy', 'SIGTERM');
    expect(exit.code).toBe(0);
    await waitFor(async () => (await fetch(`${gw.opsUrl}/readyz`)).status === 503, {
      message: 'gateway unready',
      timeout: 10_000,
      interval: 200,
    });
    // The gateway itself stays alive.
    expect((await fetch(`${gw.opsUrl}/livez`)).status).toBe(200);
    await j.start('tenancy');
    await waitFor(async () => (await fetch(`${gw.opsUrl}/readyz`)).status === 200, {
      message: 'gateway ready again',
      timeout: 10_000,
      interval: 200,
    });
    // The gateway's gRPC channel reconnects within its backoff (at most 2 s).
    await waitFor(async () => (await j.api('/api/profile', { key: tenant.liveKey })).status === 200, {
      message: 'profile through the restarted tenancy',
      timeout: 10_000,
      interval: 200,
    });
  });
});
