import { createDb, loadConfig } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The gateway's own helpers (the test package does not depend on the gateway package; its source is read as is).
import { CSRF_REFUSED, consoleCookieName, consoleCsp, sessionCookie } from '../../services/gateway/src/console.js';
import { startConsoleStack } from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';

/**
 * The web console's backend-for-frontend (issue 38) over HTTP: /console served with its CSP and caching, sign-in
 * with an API key or an admin's password into an HttpOnly SameSite cookie, the cookie accepted on the public API
 * with the CSRF header on writes, refused across sites, ended by sign-out, expiry, key revocation and tenant
 * deactivation. No credential ever in a URL or a body the page can keep.
 */

let stack: TestStack;
let A: TestTenant;
let B: TestTenant;

beforeAll(async () => {
  // The sign-in counts in the admin sign-in bucket (10 a minute per address): this file signs in more often.
  stack = await startConsoleStack();
  [A, B] = await Promise.all([stack.createTenant(), stack.createTenant()]);
});
afterAll(async () => {
  await stack?.stop();
});

interface Signed {
  cookie: string;
  setCookie: string;
  csrf: string;
  body: any;
}

const COOKIE = 'imagegen_console';

async function post(path: string, body: unknown, headers: Record<string, string | undefined> = {}) {
  return fetch(`${stack.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(headers as Record<string, string>) },
    body: JSON.stringify(body),
  });
}

async function signIn(body: Record<string, string | undefined>): Promise<Signed> {
  const r = await post('/console/session', body);
  const json = (await r.json()) as any;
  expect(r.status, JSON.stringify(json)).toBe(200);
  const setCookie = r.headers.get('set-cookie') as string;
  const cookie = setCookie.split(';')[0];
  return { cookie, setCookie, csrf: json.data.csrfToken, body: json };
}

function call(
  path: string,
  s: { cookie: string; csrf?: string },
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { cookie: s.cookie, ...init.headers };
  if (s.csrf) headers['x-csrf-token'] = s.csrf;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${stack.baseUrl}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
}

describe('GET /console (the built app)', () => {
  it('serves index.html with a CSP that forbids inline scripts and framing, never cached; client routes fall back to it', async () => {
    for (const path of ['/console', '/console/', '/console/images/42?search=fox', '/console/admin/tenants']) {
      const r = await fetch(`${stack.baseUrl}${path}`);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = r.headers.get('content-security-policy') as string;
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(r.headers.get('x-frame-options')).toBe('DENY');
      expect(r.headers.get('cache-control')).toBe('no-cache');
      const html = await r.text();
      // Every script is a file of the build (no inline script for the CSP to refuse).
      const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
      expect(scripts.length).toBeGreaterThan(0);
      for (const [, attrs, inner] of scripts) {
        expect(attrs).toMatch(/src="\/console\/assets\//);
        expect(inner.trim()).toBe('');
      }
    }
  });

  it('serves hashed assets immutable (gzip when accepted, 304 on a matching ETag); unknown files are 404', async () => {
    const html = await (await fetch(`${stack.baseUrl}/console`)).text();
    const js = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1] as string;
    const r = await fetch(`${stack.baseUrl}${js}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(r.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(r.headers.get('content-encoding')).toBe('gzip');
    const etag = r.headers.get('etag') as string;
    const again = await fetch(`${stack.baseUrl}${js}`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    for (const missing of ['/console/assets/nope.js', '/console/nope.css']) {
      const m = await fetch(`${stack.baseUrl}${missing}`);
      expect(m.status, missing).toBe(404);
      expect(await m.json()).toEqual({ error: 'Route not found', details: ['no console file has this name'] });
    }
    // The saved assets pages share the build's folder name: opened directly (a reload, a link), each is the app.
    for (const page of ['/console/assets', '/console/assets/style-presets', '/console/assets/scenes?q=harbour']) {
      const r2 = await fetch(`${stack.baseUrl}${page}`);
      expect(r2.status, page).toBe(200);
      expect(r2.headers.get('content-type'), page).toMatch(/^text\/html/);
      expect(await r2.text(), page).toContain(js);
    }
  });

  it("allows images from the storage's public base (img-src), and the cookie is Secure and __Host- over https", () => {
    const config = loadConfig({
      ...stack.env,
      PUBLIC_BASE_URL: 'https://images.example.com',
      S3_ENDPOINT: 'https://s3.example.net',
      S3_PUBLIC_URL: 'https://cdn.example.org/bucket',
      S3_ACCESS_KEY: 'x',
      S3_SECRET_KEY: 'y',
    });
    const csp = consoleCsp(config);
    expect(csp).toMatch(
      /img-src 'self' data: blob: https:\/\/images\.example\.com https:\/\/cdn\.example\.org https:\/\/s3\.example\.net;/,
    );
    expect(consoleCookieName(config)).toBe('__Host-imagegen_console');
    expect(sessionCookie(config, 'cons_x', 60)).toBe(
      '__Host-imagegen_console=cons_x; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure',
    );
    expect(sessionCookie(loadConfig(stack.env), 'cons_x', 60)).toBe(
      'imagegen_console=cons_x; Path=/; HttpOnly; SameSite=Strict; Max-Age=60',
    );
  });
});

describe('POST /console/session (sign-in)', () => {
  it('a tenant signs in with an API key: an HttpOnly SameSite=Strict cookie (not Secure over http), a CSRF token, no credential echoed', async () => {
    const s = await signIn({ apiKey: A.testKey });
    expect(s.setCookie).toMatch(new RegExp(`^${COOKIE}=cons_[A-Za-z0-9_-]+; Path=/; HttpOnly; SameSite=Strict; Max-Age=\\d+$`));
    expect(s.body).toEqual({
      data: { kind: 'tenant', tenantId: A.tenantId, expiresAt: expect.any(String), csrfToken: expect.any(String) },
    });
    const text = JSON.stringify(s.body);
    expect(text).not.toContain(A.testKey);
    expect(text).not.toContain(s.cookie.split('=')[1]);
    expect(s.cookie).not.toContain(A.testKey);
    // The page reads who it is (and the CSRF token again after a reload) with the cookie alone.
    const me = await call('/console/session', { cookie: s.cookie });
    expect(me.status).toBe(200);
    expect(me.headers.get('cache-control')).toBe('no-store');
    expect(((await me.json()) as any).data).toEqual(s.body.data);
  });

  it('an admin signs in with email and password (the admin login); the legacy admin token is no sign-in', async () => {
    const s = await signIn({ email: stack.adminEmail, password: stack.adminPassword });
    expect(s.setCookie).toMatch(new RegExp(`^${COOKIE}=adms_[A-Za-z0-9_-]+; Path=/; HttpOnly; SameSite=Strict`));
    expect(s.body.data).toMatchObject({
      kind: 'admin',
      admin: { email: stack.adminEmail, role: 'super_admin' },
      csrfToken: expect.any(String),
    });
    expect(JSON.stringify(s.body)).not.toContain(s.cookie.split('=')[1]);
    const asToken = await post('/console/session', { adminToken: stack.adminToken });
    expect(asToken.status).toBe(400);
    expect(await asToken.json()).toEqual({
      error: 'Invalid request payload',
      details: ['adminToken is not a known field', 'send apiKey, or email and password'],
    });
  });

  it('refuses bad bodies with the SPEC envelope, wrong keys and passwords with 401, and sets no cookie', async () => {
    const cases: [unknown, number, unknown][] = [
      [{}, 400, { error: 'Invalid request payload', details: ['send apiKey, or email and password'] }],
      [[], 400, { error: 'Invalid request payload', details: ['body must be a JSON object'] }],
      [
        { apiKey: A.testKey, email: 'a@b.c' },
        400,
        { error: 'Invalid request payload', details: ['send either apiKey, or email and password'] },
      ],
      [{ apiKey: 7 }, 400, { error: 'Invalid request payload', details: ['apiKey must be a non-empty string'] }],
      [{ email: 'root@example.com' }, 400, { error: 'Invalid request payload', details: ['password must be 1 to 1024 characters'] }],
      [{ apiKey: 'sk_test_nope' }, 401, { error: 'Invalid or missing API key' }],
      [{ apiKey: `sk_test_${'a'.repeat(40)}` }, 401, { error: 'Invalid or missing API key' }],
      [{ email: stack.adminEmail, password: 'wrong password' }, 401, { error: 'Invalid email or password' }],
    ];
    for (const [body, status, answer] of cases) {
      const r = await post('/console/session', body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(await r.json()).toEqual(answer);
      expect(r.headers.get('set-cookie')).toBeNull();
    }
  });

  it('refuses a sign-in sent from another site (login CSRF)', async () => {
    for (const headers of [{ 'sec-fetch-site': 'cross-site' }, { origin: 'https://evil.example' }]) {
      const r = await post('/console/session', { apiKey: A.testKey }, headers);
      expect(r.status).toBe(403);
      expect(await r.json()).toEqual({ error: CSRF_REFUSED });
      expect(r.headers.get('set-cookie')).toBeNull();
    }
  });
});

describe('the console cookie on the public API', () => {
  it("is the tenant's credential on /api: reads need no CSRF token, writes need the right one (403 with the envelope)", async () => {
    const s = await signIn({ apiKey: A.testKey });
    const profile = await call('/api/profile', { cookie: s.cookie });
    expect(profile.status).toBe(200);
    expect(((await profile.json()) as any).tenant.tenantId).toBe(A.tenantId);

    const preset = { presetName: 'foxes', filters: { search: 'fox' } };
    for (const csrf of [undefined, 'wrong', `${s.csrf}x`]) {
      const r = await call('/api/search-presets', { cookie: s.cookie, csrf }, { body: preset });
      expect(r.status, String(csrf)).toBe(403);
      expect(await r.json()).toEqual({ error: CSRF_REFUSED, details: ['send the X-CSRF-Token header that GET /console/session answers'] });
    }
    // Another session's token is no good either.
    const other = await signIn({ apiKey: A.testKey });
    const crossed = await call('/api/search-presets', { cookie: s.cookie, csrf: other.csrf }, { body: preset });
    expect(crossed.status).toBe(403);
    const ok = await call('/api/search-presets', s, { body: preset });
    expect(ok.status).toBe(200);
    const created = ((await ok.json()) as any).data;
    const list = await call('/api/search-presets', { cookie: s.cookie });
    expect(((await list.json()) as any).data.map((p: any) => p.id)).toContain(created.id);
  });

  it("sees only its own tenant's data (another tenant's ids are 404)", async () => {
    const b = await stack.api('/api/search-presets', { key: B.testKey, body: { presetName: 'theirs', filters: {} } });
    expect(b.status).toBe(200);
    const s = await signIn({ apiKey: A.testKey });
    const r = await call(`/api/search-presets/${b.body.data.id}`, s, { method: 'DELETE' });
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ error: 'Preset not found' });
  });

  it('is refused when sent from another site, and is no credential for the other area', async () => {
    const s = await signIn({ apiKey: A.testKey });
    const cross = await call('/api/profile', { cookie: s.cookie }, { headers: { 'sec-fetch-site': 'cross-site' } });
    expect(cross.status).toBe(403);
    expect(await cross.json()).toEqual({ error: CSRF_REFUSED });
    const asAdmin = await call('/admin/tenants', { cookie: s.cookie });
    expect(asAdmin.status).toBe(401);
    const admin = await signIn({ email: stack.adminEmail, password: stack.adminPassword });
    const asTenant = await call('/api/profile', { cookie: admin.cookie });
    expect(asTenant.status).toBe(401);
    expect(await asTenant.json()).toEqual({ error: 'Invalid or missing API key' });
    // An explicit credential wins over the cookie (another tenant's key is that tenant).
    const keyWins = await call('/api/profile', { cookie: s.cookie }, { headers: { 'x-api-key': B.testKey } });
    expect(((await keyWins.json()) as any).tenant.tenantId).toBe(B.tenantId);
  });

  it("is the admin's credential on /admin, with the CSRF token on writes", async () => {
    const s = await signIn({ email: stack.adminEmail, password: stack.adminPassword });
    const me = await call('/admin/me', { cookie: s.cookie });
    expect(me.status).toBe(200);
    expect(((await me.json()) as any).data).toMatchObject({ authMethod: 'session', role: 'super_admin' });
    const body = {
      tenant_id: `cons${Date.now().toString(36)}`,
      tenant_name: 'Console made',
      contact_email: 'c@example.com',
      provider_credentials: { provA: 'sandbox-key-a1' },
    };
    const refused = await call('/admin/tenants', { cookie: s.cookie }, { body });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as any).error).toBe(CSRF_REFUSED);
    const made = await call('/admin/tenants', s, { body });
    expect(made.status, await made.clone().text()).toBe(200);
  });
});

describe('the end of a session', () => {
  it('sign-out ends it server-side (the old cookie is refused) and clears the cookie; sign-out needs the CSRF token', async () => {
    for (const body of [{ apiKey: A.testKey }, { email: stack.adminEmail, password: stack.adminPassword }]) {
      const s = await signIn(body);
      const noCsrf = await call('/console/session', { cookie: s.cookie }, { method: 'DELETE' });
      expect(noCsrf.status).toBe(403);
      const out = await call('/console/session', s, { method: 'DELETE' });
      expect(out.status).toBe(200);
      expect(await out.json()).toEqual({ data: { success: true } });
      expect(out.headers.get('set-cookie')).toBe(`${COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
      const after = await call('/console/session', { cookie: s.cookie });
      expect(after.status).toBe(401);
      expect(after.headers.get('set-cookie')).toMatch(/Max-Age=0/);
      const api = await call('apiKey' in body ? '/api/profile' : '/admin/me', { cookie: s.cookie });
      expect(api.status).toBe(401);
    }
  });

  it('an expired session is 401 (and the page gets "Not signed in" without a cookie)', async () => {
    const s = await signIn({ apiKey: A.testKey });
    const sql = createDb(stack.env.DATABASE_URL, { schema: 'tenancy', max: 1 });
    try {
      await sql`UPDATE console_sessions SET expires_at = now() - interval '1 second' WHERE tenant_id = ${A.tenantId} AND ended_at IS NULL`;
    } finally {
      await sql.end();
    }
    const r = await call('/api/profile', { cookie: s.cookie });
    expect(r.status).toBe(401);
    const who = await call('/console/session', { cookie: s.cookie });
    expect(who.status).toBe(401);
    expect(await who.json()).toEqual({ error: 'Console session expired or ended: sign in again' });
    const none = await fetch(`${stack.baseUrl}/console/session`);
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: 'Not signed in to the console' });
  });

  it('revoking the key, or deactivating the tenant, ends the session', async () => {
    const t = await stack.createTenant();
    const s = await signIn({ apiKey: t.testKey });
    expect((await call('/api/profile', { cookie: s.cookie })).status).toBe(200);
    const testKey = t.body.data.apiKeys.find((k: any) => k.type === 'test');
    expect((await stack.api(`/admin/tenants/${t.tenantId}/api-keys/${testKey.keyId}`, { admin: true, method: 'DELETE' })).status).toBe(200);
    expect((await call('/api/profile', { cookie: s.cookie })).status).toBe(401);
    expect((await call('/console/session', { cookie: s.cookie })).status).toBe(401);

    const live = await signIn({ apiKey: t.liveKey });
    expect((await call('/api/profile', { cookie: live.cookie })).status).toBe(200);
    const off = await stack.api(`/admin/tenants/${t.tenantId}`, { admin: true, method: 'PATCH', body: { is_active: false } });
    expect(off.status).toBe(200);
    expect((await call('/console/session', { cookie: live.cookie })).status).toBe(401);
    expect((await post('/console/session', { apiKey: t.liveKey })).status).toBe(403);
  });
});
