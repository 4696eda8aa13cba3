import { randomBytes } from 'node:crypto';
import { createLogger } from '@imagegen/platform';
import { type RunningStack, startStack } from '@imagegen/stack/stack.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startTestStack, type TestStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

// Defaults (SPEC 8) unless a test file overrides them; make sure nothing in the environment does.
for (const k of Object.keys(process.env)) if (k.startsWith('RATE_LIMIT_')) delete process.env[k];

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

type Res = { status: number; body: any; headers: Headers };

function expectHeaders(r: Res, limit: number, remaining: number) {
  expect(r.headers.get('x-ratelimit-limit')).toBe(String(limit));
  expect(r.headers.get('x-ratelimit-remaining')).toBe(String(remaining));
  const reset = Number(r.headers.get('x-ratelimit-reset'));
  const now = Date.now() / 1000;
  // Unix seconds, within the one-minute window.
  expect(reset).toBeGreaterThanOrEqual(Math.floor(now));
  expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 61);
}

function expect429(r: Res, limit: number) {
  expect(r.status).toBe(429);
  const retry = Number(r.headers.get('retry-after'));
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(60);
  expect(r.body).toEqual({ error: `Rate limit exceeded. Try again in ${retry} seconds.`, retryAfter: retry });
  expectHeaders(r, limit, 0);
}

describe('rate limits (one gateway, memory store)', () => {
  let s: TestStack;
  beforeAll(async () => {
    s = await startTestStack();
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("limits API requests per tenant at the tenant's rate_limit_per_minute, with headers on success and on 429", async () => {
    const T = await s.createTenant({ rate_limit_per_minute: 5 });
    const U = await s.createTenant({ rate_limit_per_minute: 5 });
    for (let i = 0; i < 5; i++) {
      const r = await s.api('/api/usage', { key: i % 2 ? T.testKey : T.liveKey });
      expect(r.status).toBe(200);
      expectHeaders(r, 5, 4 - i);
    }
    expect429(await s.api('/api/usage', { key: T.liveKey }), 5);
    expect429(await s.api('/api/webhooks', { key: T.testKey }), 5); // any /api route, either key: one tenant budget
    // Another tenant has its own budget.
    const other = await s.api('/api/usage', { key: U.liveKey });
    expect(other.status).toBe(200);
    expectHeaders(other, 5, 4);
    // Errors produced after the limiter still carry the headers.
    const notFound = await s.api('/api/webhooks/123456', { key: U.liveKey });
    expect(notFound.status).toBe(404);
    expectHeaders(notFound, 5, 3);
  });

  it('applies a tenant PATCH of rate_limit_per_minute within seconds', async () => {
    const T = await s.createTenant({ rate_limit_per_minute: 2 });
    for (let i = 0; i < 2; i++) expect((await s.api('/api/usage', { key: T.liveKey })).status).toBe(200);
    expect((await s.api('/api/usage', { key: T.liveKey })).status).toBe(429);
    const p = await s.api(`/admin/tenants/${T.tenantId}`, { method: 'PATCH', admin: true, body: { rate_limit_per_minute: 1000 } });
    expect(p.status).toBe(200);
    const ok = await waitFor(
      async () => {
        const r = await s.api('/api/usage', { key: T.liveKey });
        return r.status === 200 && r;
      },
      { message: 'the new limit', timeout: 15_000, interval: 200 },
    );
    expect(ok.headers.get('x-ratelimit-limit')).toBe('1000');
  });

  it('limits generations to 30 and uploads to 20 per minute per tenant (counted before validation)', async () => {
    const T = await s.createTenant({ rate_limit_per_minute: 60 });
    for (let i = 0; i < 30; i++) {
      const r = await s.api('/api/images', { key: T.liveKey, body: {} }); // invalid body: no provider work
      expect(r.status).toBe(400);
      expectHeaders(r, 30, 29 - i);
    }
    expect429(await s.api('/api/images', { key: T.liveKey, body: {} }), 30);
    expect429(await s.api('/api/edit-image', { key: T.liveKey, body: {} }), 30);
    expect429(await s.api('/api/characters/1/generate', { key: T.liveKey, body: {} }), 30);
    expect429(await s.api('/api/products/1/generate', { key: T.liveKey, body: {} }), 30);
    for (let i = 0; i < 20; i++) {
      const r = await s.api('/api/upload-for-editing', { key: T.liveKey, body: {} });
      expect(r.status).toBe(400);
      expectHeaders(r, 20, 19 - i);
    }
    expect429(await s.api('/api/upload-for-editing', { key: T.liveKey, body: {} }), 20);
    // Other API calls of the tenant still go through: 56 of its 60 requests are used.
    const r = await s.api('/api/usage', { key: T.liveKey });
    expect(r.status).toBe(200);
    expectHeaders(r, 60, 4);
  });

  it('scales the generation and upload budgets for tenants configured above the default rate', async () => {
    const T = await s.createTenant({ rate_limit_per_minute: 600 });
    const g = await s.api('/api/images', { key: T.liveKey, body: {} });
    expectHeaders(g, 300, 299);
    const u = await s.api('/api/upload-for-editing', { key: T.liveKey, body: {} });
    expectHeaders(u, 200, 199);
    // Product creation is an ordinary API request.
    const p = await s.api('/api/products', { key: T.liveKey, body: {} });
    expectHeaders(p, 600, 597);
  });

  it('keys the admin API by cf-connecting-ip only (X-Forwarded-For ignored), stricter on login', async () => {
    const login = (ip: string, xff?: string) =>
      s.api('/admin/auth/login', {
        body: { email: `nobody-${randomBytes(3).toString('hex')}@example.com`, password: 'wrong password' },
        headers: { 'cf-connecting-ip': ip, ...(xff ? { 'x-forwarded-for': xff } : {}) },
      });
    for (let i = 0; i < 10; i++) {
      const r = await login('203.0.113.7', `198.51.100.${i}`);
      expect(r.status).not.toBe(429);
      expectHeaders(r, 10, 9 - i);
    }
    expect429(await login('203.0.113.7', '198.51.100.200'), 10);
    expect429(await login('203.0.113.7'), 10);
    // Another client address has its own budget.
    const other = await login('203.0.113.8');
    expect(other.status).not.toBe(429);
    expectHeaders(other, 10, 9);
    // Other admin routes: a larger budget per address.
    const stats = await s.api('/admin/tenants', { admin: true, headers: { 'cf-connecting-ip': '203.0.113.9' } });
    expect(stats.status).toBe(200);
    expectHeaders(stats, 300, 299);
  });

  it('counts admin requests refused by authentication, so admin credentials cannot be guessed without limit', async () => {
    const ip = '203.0.113.77';
    const guess = (i: number) =>
      s.api('/admin/tenants', { headers: { 'cf-connecting-ip': ip, 'x-admin-token': `guess-${i}` } }).then((r) => r as Res);
    const first = await guess(0);
    expect(first.status).toBe(401);
    expectHeaders(first, 300, 299);
    for (let i = 1; i < 300; i += 50) {
      const batch = await Promise.all(Array.from({ length: Math.min(50, 300 - i) }, (_, j) => guess(i + j)));
      for (const r of batch) expect(r.status).toBe(401);
    }
    expect429(await guess(300), 300);
    expect429(await s.api('/admin/tenants', { headers: { 'cf-connecting-ip': ip, authorization: 'Bearer adms_guess' } }), 300);
    // Even the right credentials wait for the window: the budget belongs to the client address.
    expect429(await s.api('/admin/tenants', { admin: true, headers: { 'cf-connecting-ip': ip } }), 300);
    expect((await s.api('/admin/tenants', { admin: true, headers: { 'cf-connecting-ip': '203.0.113.78' } })).status).toBe(200);
  });

  it('limits the OAuth token endpoint to 30 per minute per client IP', async () => {
    const token = (ip: string) =>
      fetch(`${s.baseUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'cf-connecting-ip': ip },
        body: 'grant_type=authorization_code&code=nope&client_id=nobody',
      }).then(async (r) => ({ status: r.status, headers: r.headers, body: await r.json().catch(() => undefined) }));
    for (let i = 0; i < 30; i++) {
      const r = await token('192.0.2.10');
      expect(r.status).not.toBe(429);
      expectHeaders(r, 30, 29 - i);
    }
    expect429(await token('192.0.2.10'), 30);
    // Another client address has its own budget.
    const other = await token('192.0.2.11');
    expect(other.status).not.toBe(429);
    expectHeaders(other, 30, 29);
  });
});

describe('rate limits shared by two gateways through Redis', () => {
  let s: TestStack;
  let second: RunningStack;
  let secondUrl: string;

  beforeAll(async () => {
    // A unique key prefix per test run: EVENTS_PREFIX (unique per stack) prefixes the Redis keys.
    s = await startTestStack({ env: { REDIS_URL } });
    // A second gateway process shape: only the gateway module, pointed at the first stack's services.
    const addr = (name: string) => s.stack.modules.find((m) => m.name === name)?.running;
    const port = await freePort();
    second = await startStack({
      target: 'gateway',
      logger: createLogger('gw2', 'silent'),
      env: {
        ...s.env,
        PORT: String(port),
        TARGET: 'gateway',
        TENANCY_ADDR: addr('tenancy')?.grpcAddress,
        LIBRARY_ADDR: addr('library')?.grpcAddress,
        GENERATION_ADDR: addr('generation')?.grpcAddress,
        USAGE_ADDR: addr('usage-metering')?.grpcAddress,
        WEBHOOKS_ADDR: addr('webhook-dispatcher')?.grpcAddress,
        OAUTH_URL: addr('oauth')?.httpUrl,
        MCP_URL: addr('mcp')?.httpUrl,
      },
    });
    secondUrl = second.baseUrl as string;
  });
  afterAll(async () => {
    await second?.stop();
    await s?.stop();
  });

  it('enforces one limit across both gateways', async () => {
    const T = await s.createTenant({ rate_limit_per_minute: 6 });
    const call = async (base: string): Promise<Res> => {
      const r = await fetch(`${base}/api/usage`, { headers: { 'x-api-key': T.liveKey } });
      return { status: r.status, headers: r.headers, body: await r.json() };
    };
    const bases = [s.baseUrl, secondUrl];
    for (let i = 0; i < 6; i++) {
      const r = await call(bases[i % 2] as string);
      expect(r.status, `request ${i + 1}`).toBe(200);
      expectHeaders(r, 6, 5 - i);
    }
    expect429(await call(s.baseUrl), 6);
    expect429(await call(secondUrl), 6);
  });
});
