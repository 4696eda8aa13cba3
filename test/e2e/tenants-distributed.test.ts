import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { TenantChanged } from '@imagegen/contracts/events/v1/events';
import { createEventTransport, createLogger, createTestDatabase, type EventTransport } from '@imagegen/platform';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../support/stack.js';

/**
 * The distributed shape: tenancy and the gateway as separate processes (their standalone entries),
 * on the machine's PostgreSQL and NATS JetStream. Covers admin sign-in, tenant creation, API-key
 * auth (401 / accepted / 403 after deactivation) and the TenantChanged event arriving over JetStream.
 */
const root = new URL('../..', import.meta.url).pathname;
const procs: ChildProcess[] = [];
let db: { url: string; drop: () => Promise<void> };
let events: EventTransport;
let baseUrl: string;
const changes: string[] = [];
const prefix = `dist${randomBytes(4).toString('hex')}`;
const adminToken = `adm_${randomBytes(16).toString('hex')}`;

function run(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'fatal', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  procs.push(child);
  return child;
}

async function waitFor(url: string, timeoutMs = 90_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {}
    if (Date.now() > until) throw new Error(`${url} did not come up`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function api(path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: init.method ?? (init.body ? 'POST' : 'GET'),
    headers: { ...(init.body ? { 'content-type': 'application/json' } : {}), ...(init.headers ?? {}) },
    body: init.body ? JSON.stringify(init.body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'dist');
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  events = await createEventTransport({ natsUrl, eventsPrefix: prefix }, createLogger('dist-test', 'silent'));
  await events.subscribe({
    durable: 'dist-test',
    subjects: [`${prefix}.tenancy.tenant_changed`],
    handler: async (m) => {
      const e = TenantChanged.decode(m.data);
      changes.push(`${e.tenantId}:${e.reason}`);
    },
  });
  const [grpcPort, tenancyOps, gatewayPort, nobody] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const common = { DATABASE_URL: db.url, NATS_URL: natsUrl, EVENTS_PREFIX: prefix, HOST: '127.0.0.1' };
  run('services/tenancy/src/main.ts', {
    ...common,
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(grpcPort),
    HTTP_PORT: String(tenancyOps),
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ADMIN_EMAIL: 'ops@example.com',
    ADMIN_PASSWORD: 'distributed password',
  });
  await waitFor(`http://127.0.0.1:${tenancyOps}/readyz`);
  run('services/gateway/src/main.ts', {
    ...common,
    PORT: String(gatewayPort),
    TENANCY_ADDR: `127.0.0.1:${grpcPort}`,
    // Nothing listens there: routes of other services answer 503 once authentication passed.
    LIBRARY_ADDR: `127.0.0.1:${nobody}`,
    ADMIN_TOKEN: adminToken,
  });
  baseUrl = `http://127.0.0.1:${gatewayPort}`;
  await waitFor(`${baseUrl}/health`);
}, 180_000);

afterAll(async () => {
  for (const p of procs.reverse()) {
    if (p.exitCode !== null) continue;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
    if (p.exitCode === null) p.kill('SIGKILL');
  }
  await events?.close();
  await db?.drop();
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
  const until = Date.now() + 10_000;
  let status = 0;
  while (Date.now() < until) {
    status = (await api('/api/sessions', { headers: { 'x-api-key': key } })).status;
    if (status === 403) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  expect(status).toBe(403);

  await expect.poll(() => changes, { timeout: 15_000 }).toEqual(expect.arrayContaining([`${tenantId}:created`, `${tenantId}:deactivated`]));
});
