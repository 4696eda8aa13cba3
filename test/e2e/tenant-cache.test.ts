/**
 * Generation keeps a tenant and its provider keys for API_KEY_CACHE_TTL_MS (services/generation/src/deps.ts,
 * withTenantCache), and drops them when tenancy's TenantChanged arrives. With a TTL of a minute here, only the
 * event can make an admin's change visible within the test.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ env: { API_KEY_CACHE_TTL_MS: '60000', RATE_LIMIT_DISABLED: '1' } });
});
afterAll(async () => {
  await s?.stop();
});

const generate = (key: string, model: string) =>
  fetch(`${s.baseUrl}/api/images`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'a cached tenant', model_id: model }),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: string; details?: string[] } }));

it("an admin's change of allowed models applies at once (TenantChanged), not after the cache's minute", async () => {
  const t = await s.createTenant({ allowed_models: ['provA-flash-lite-image', 'provB-image-2'], model_id: 'provA-flash-lite-image' });
  expect((await generate(t.liveKey, 'provB-image-2')).status).toBe(200); // the tenant is cached now
  const patched = await s.api(`/admin/tenants/${t.tenantId}`, {
    method: 'PATCH',
    admin: true,
    body: { allowed_models: ['provA-flash-lite-image'] },
  });
  expect(patched.status).toBe(200);
  await waitFor(async () => (await generate(t.liveKey, 'provB-image-2')).status === 400, {
    message: 'the narrowed allowlist',
    timeout: 15_000,
    interval: 100,
  });
  const refused = await generate(t.liveKey, 'provB-image-2');
  expect(refused.body.details).toEqual(['model_id provB-image-2 is not allowed for this tenant (allowed: provA-flash-lite-image)']);
  expect((await generate(t.liveKey, 'provA-flash-lite-image')).status).toBe(200);
});

it('a deactivation applies at once on REST and MCP (TenantChanged clears the gateway and mcp key caches), not after their minute', async () => {
  const t = await s.createTenant();
  const rest = () => fetch(`${s.baseUrl}/api/webhooks`, { headers: { 'x-api-key': t.liveKey } }).then((r) => r.status);
  const mcp = () =>
    fetch(`${s.baseUrl}/mcp`, {
      method: 'POST',
      headers: { 'x-api-key': t.liveKey, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    }).then(async (r) => {
      await r.text();
      return r.status;
    });
  expect([await rest(), await mcp()]).toEqual([200, 200]); // both caches hold the key now
  expect((await s.api(`/admin/tenants/${t.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: false } })).status).toBe(200);
  await waitFor(async () => (await rest()) === 403 && (await mcp()) === 403, {
    message: 'the deactivation on REST and MCP',
    timeout: 15_000,
    interval: 100,
  });
});
