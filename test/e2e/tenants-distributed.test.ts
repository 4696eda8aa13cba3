import { randomBytes } from 'node:crypto';
import { TenantChanged } from '@imagegen/contracts/events/v1/events';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Api, createApi } from '../support/api.js';
import { freePort, type ServiceProcesses, startServiceProcesses, waitForUrl } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

/**
 * The distributed shape: tenancy and the gateway as separate processes (their standalone entries),
 * on the machine's PostgreSQL and NATS JetStream. Covers admin sign-in, tenant creation, API-key
 * auth (401 / accepted / 403 after deactivation) and the TenantChanged event arriving over JetStream.
 */
let split: ServiceProcesses;
let api: Api;
const changes: string[] = [];
const prefix = `dist${randomBytes(4).toString('hex')}`;
const adminToken = `adm_${randomBytes(16).toString('hex')}`;

beforeAll(async () => {
  split = await startServiceProcesses({
    name: 'dist',
    eventsPrefix: prefix,
    subjects: [`${prefix}.tenancy.tenant_changed`],
    handler: async (m) => {
      const e = TenantChanged.decode(m.data);
      changes.push(`${e.tenantId}:${e.reason}`);
    },
  });
  const [grpcPort, tenancyOps, gatewayPort, nobody] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const common = { DATABASE_URL: split.db.url, NATS_URL: split.natsUrl, EVENTS_PREFIX: prefix, HOST: '127.0.0.1' };
  split.run('services/tenancy/src/main.ts', {
    ...common,
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(grpcPort),
    HTTP_PORT: String(tenancyOps),
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ADMIN_EMAIL: 'ops@example.com',
    ADMIN_PASSWORD: 'distributed password',
  });
  await waitForUrl(`http://127.0.0.1:${tenancyOps}/readyz`);
  split.run('services/gateway/src/main.ts', {
    ...common,
    PORT: String(gatewayPort),
    TENANCY_ADDR: `127.0.0.1:${grpcPort}`,
    // Nothing listens there: routes of other services answer 503 once authentication passed.
    LIBRARY_ADDR: `127.0.0.1:${nobody}`,
    ADMIN_TOKEN: adminToken,
  });
  const baseUrl = `http://127.0.0.1:${gatewayPort}`;
  api = createApi(baseUrl);
  await waitForUrl(`${baseUrl}/health`);
}, 180_000);

afterAll(async () => {
  await split?.stop();
});

it('serves admin sign-in, tenants and API-key auth across processes', async () => {
  const login = await api('/admin/auth/login', { body: { email: 'ops@example.com', password: 'distributed password' } });
  expect(login.status).toBe(200);
  const session = { authorization: `Bearer ${login.body.data.token}` };
  expect((await api('/admin/me', { headers: session })).body.data.user.email).toBe('ops@example.com');

  const tenantId = `d${randomBytes(3).toString('hex')}`;
  const created = await api('/admin/tenants', {
    headers: { 'x-admin-token': adminToken },
    body: { tenant_id: tenantId, tenant_name: 'Dist', contact_email: 'd@example.com', provider_credentials: { provB: ['b1', 'b2'] } },
  });
  expect(created.status).toBe(200);
  const key = created.body.data.apiKeys.find((k: { type: string }) => k.type === 'live').apiKey;
  const detail = await api(`/admin/tenants/${tenantId}`, { headers: session });
  expect(detail.body.data.tenant.modelId).toBe('provB-image-2');

  // Only tenancy runs: a valid key passes authentication (whatever the route then answers), others do not.
  const bad = await api('/api/sessions', { headers: { 'x-api-key': `sk_live_${'q'.repeat(40)}` } });
  expect(bad.status).toBe(401);
  const ok = await api('/api/sessions', { headers: { 'x-api-key': key } });
  expect(ok.status).toBe(503);

  expect((await api(`/admin/tenants/${tenantId}`, { method: 'PATCH', headers: session, body: { is_active: false } })).status).toBe(200);
  await waitFor(async () => (await api('/api/sessions', { headers: { 'x-api-key': key } })).status === 403, {
    message: 'the deactivated tenant refused (403)',
    interval: 250,
  });

  await waitFor(() => changes.includes(`${tenantId}:created`) && changes.includes(`${tenantId}:deactivated`), {
    message: `TenantChanged created and deactivated of ${tenantId}`,
    timeout: 15_000,
  });
});
