import { createHmac } from 'node:crypto';
import { imagegenClient } from '@imagegen/client';
import { createDb, redisClient, type Sql } from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../services/gateway/src/app.js';
import { SIGNATURE_ERRORS } from '../../services/gateway/src/request-signature.js';
import { decryptSecret } from '../../services/tenancy/src/crypto.js';
import { type Api, createApi } from '../support/api.js';
import { checkAnswer } from '../support/contract.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Signed requests (SPEC 5.8; extension, issue 37): the admin operations (the secret shown once, stored encrypted,
 * rotation with a grace period, tenant isolation), every refusal of the gateway, good signatures (GET with a query,
 * POST with a body, DELETE), keys without the flag unaffected, the replay refused by a second gateway sharing Redis,
 * MCP refusing a signed key, and the typed client signing against the live gateway.
 */

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

let s: TestStack;
let a: TestTenant;
let b: TestTenant;
let second: FastifyInstance;
let api2: Api;
let sql: Sql;
/** Tenant a's live key and its id; it requires signatures from the first test on. */
let keyId = '';
let secret = '';

const admin = (path: string, body: unknown) => s.api(path, { admin: true, body });
const signingPath = (tenantId: string, keyRef: string) => `/admin/tenants/${tenantId}/api-keys/${encodeURIComponent(keyRef)}/signing`;

const sign = (key: string, timestamp: string, method: string, pathWithQuery: string, body = '') =>
  createHmac('sha256', key).update(`${timestamp}\n${method}\n${pathWithQuery}\n`).update(Buffer.from(body, 'utf8')).digest('hex');

interface Signed {
  method?: string;
  body?: string;
  /** Signs with this secret instead of the current one. */
  with?: string;
  timestamp?: string;
  headers?: Record<string, string>;
  via?: Api;
}

/** A fresh timestamp: now, and never one given before (two requests alike in the same ms would be a replay). */
let lastTimestamp = 0;
const now = () => {
  lastTimestamp = Math.max(Date.now(), lastTimestamp + 1);
  return String(lastTimestamp);
};

/** A request with tenant a's live key, signed as told (the body is sent and signed exactly as given). */
function signed(path: string, o: Signed = {}) {
  const method = o.method ?? (o.body === undefined ? 'GET' : 'POST');
  const timestamp = o.timestamp ?? now();
  const headers = { 'x-timestamp': timestamp, 'x-signature': sign(o.with ?? secret, timestamp, method, path, o.body), ...o.headers };
  return (o.via ?? s.api)(path, { method, key: a.liveKey, body: o.body, headers });
}

beforeAll(async () => {
  s = await startTestStack({ env: { REDIS_URL } });
  [a, b] = await Promise.all([s.createTenant({ rate_limit_per_minute: 5000 }), s.createTenant()]);
  // A second gateway of the same deployment (same Redis, same EVENTS_PREFIX), as a second replica would be.
  second = await buildApp(s.stack.ctx);
  await second.listen({ port: 0, host: '127.0.0.1' });
  api2 = createApi(`http://127.0.0.1:${(second.server.address() as { port: number }).port}`, s.adminToken);
  sql = createDb(s.env.DATABASE_URL, { schema: 'tenancy', max: 1 });
  const detail = await s.api(`/admin/tenants/${a.tenantId}`, { admin: true });
  keyId = detail.body.data.apiKeys.find((k: { type: string }) => k.type === 'live').keyId;
}, 120_000);

afterAll(async () => {
  await second?.close();
  await sql?.end();
  await s?.stop();
});

describe('turning signed requests on', () => {
  it('answers the signing secret once, stores it encrypted, and shows the flag on the key record', async () => {
    const on = await admin(signingPath(a.tenantId, keyId), { signature_required: true });
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(on.body.data).toMatchObject({ keyId, signatureRequired: true, previousSecretExpiresAt: null });
    expect(on.body.data.signingSecret).toMatch(/^sigsec_[\w-]{43}$/);
    secret = on.body.data.signingSecret;

    // Never again: turning it on once more answers the state without the secret.
    const again = await admin(signingPath(a.tenantId, keyId), { signature_required: true });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ keyId, signatureRequired: true, signingSecret: null });
    expect(again.body.data.secretCreatedAt).toBe(on.body.data.secretCreatedAt);

    const detail = await s.api(`/admin/tenants/${a.tenantId}`, { admin: true });
    const flags = Object.fromEntries(
      detail.body.data.apiKeys.map((k: { type: string; signatureRequired: boolean }) => [k.type, k.signatureRequired]),
    );
    expect(flags).toEqual({ live: true, test: false });
    expect(JSON.stringify(detail.body)).not.toContain(secret);

    // The row holds AES-256-GCM of the secret under CREDENTIALS_KEY, bound to the key: never the secret itself.
    const [row] = await sql<{ signing_secret: Buffer; signature_required: boolean }[]>`
      SELECT signing_secret, signature_required FROM api_keys WHERE key_id = ${keyId}`;
    expect(row.signature_required).toBe(true);
    expect(row.signing_secret.includes(Buffer.from(secret))).toBe(false);
    expect(row.signing_secret.includes(Buffer.from(secret.slice(7)))).toBe(false);
    const credentialsKey = Buffer.from(s.env.CREDENTIALS_KEY, 'base64');
    expect(decryptSecret(credentialsKey, row.signing_secret, `${a.tenantId}:${keyId}:signing`)).toBe(secret);
    expect(() => decryptSecret(credentialsKey, row.signing_secret, `${b.tenantId}:${keyId}:signing`)).toThrow();
  });

  it('refuses another tenant key, an unknown key or tenant (404), a bad body (400), a rotation of an unsigned key (409)', async () => {
    const bKey = (await s.api(`/admin/tenants/${b.tenantId}`, { admin: true })).body.data.apiKeys[0].keyId;
    const cross = await admin(signingPath(a.tenantId, bKey), { signature_required: true });
    expect(cross.status).toBe(404);
    expect(cross.body.error).toBe('API key not found');
    expect((await admin(`${signingPath(a.tenantId, bKey)}/rotate`, {})).status).toBe(404);
    expect((await admin(signingPath(a.tenantId, 'key_nope'), { signature_required: true })).status).toBe(404);
    const noTenant = await admin(signingPath('no-such-tenant', keyId), { signature_required: true });
    expect(noTenant.body).toEqual({ error: 'Tenant not found' });
    // b's key was not touched.
    expect((await s.api('/api/images?limit=1', { key: b.liveKey })).status).toBe(200);

    const missing = await admin(signingPath(a.tenantId, keyId), {});
    expect(missing.status).toBe(400);
    expect(missing.body.details).toContain('signature_required is required');
    const typed = await admin(signingPath(a.tenantId, keyId), { signature_required: 'yes' });
    expect(typed.body.details).toContain('signature_required must be a boolean');
    const grace = await admin(`${signingPath(a.tenantId, keyId)}/rotate`, { grace_period_seconds: -1 });
    expect(grace.status).toBe(400);
    expect(grace.body.details).toContain('grace_period_seconds must be >= 0');

    const unsigned = await admin(`${signingPath(a.tenantId, 'Default test key')}/rotate`, {});
    expect(unsigned.status).toBe(409);
    expect(unsigned.body.error).toBe('Signed requests are not enabled for this API key');
  });
});

describe('a key that requires signed requests', () => {
  it('is refused without a signature, with a wrong one, a malformed or far timestamp, and a replay, each with its own 401', async () => {
    const path = '/api/images?limit=2';
    const expect401 = async (r: Promise<{ status: number; body: { error: string } }>, error: string) => {
      const got = await r;
      expect(got.status, JSON.stringify(got.body)).toBe(401);
      expect(got.body.error).toBe(error);
    };
    await expect401(s.api(path, { key: a.liveKey }), SIGNATURE_ERRORS.missing);
    await expect401(s.api(path, { key: a.liveKey, headers: { 'x-timestamp': String(Date.now()) } }), SIGNATURE_ERRORS.missing);
    await expect401(s.api(path, { key: a.liveKey, headers: { 'x-signature': 'ab'.repeat(32) } }), SIGNATURE_ERRORS.missing);
    await expect401(signed(path, { with: 'sigsec_not-the-secret' }), SIGNATURE_ERRORS.invalid);
    await expect401(signed(path, { headers: { 'x-signature': 'not hex' } }), SIGNATURE_ERRORS.invalid);
    // Signed for another path, method or body than sent.
    const ts = now();
    await expect401(
      s.api(path, { key: a.liveKey, headers: { 'x-timestamp': ts, 'x-signature': sign(secret, ts, 'GET', '/api/images?limit=3') } }),
      SIGNATURE_ERRORS.invalid,
    );
    await expect401(
      s.api('/api/style-presets', {
        key: a.liveKey,
        body: '{"name":"tampered"}',
        headers: { 'x-timestamp': ts, 'x-signature': sign(secret, ts, 'POST', '/api/style-presets', '{"name":"signed"}') },
      }),
      SIGNATURE_ERRORS.invalid,
    );
    await expect401(signed(path, { timestamp: 'yesterday' }), SIGNATURE_ERRORS.timestamp);
    await expect401(signed(path, { timestamp: String(Date.now() - 6 * 60_000) }), SIGNATURE_ERRORS.stale);
    await expect401(signed(path, { timestamp: String(Date.now() + 6 * 60_000) }), SIGNATURE_ERRORS.stale);
    // Within the window either way: accepted.
    expect((await signed(path, { timestamp: String(Date.now() - 4 * 60_000) })).status).toBe(200);
    expect((await signed(path, { timestamp: String(Date.now() + 4 * 60_000) })).status).toBe(200);

    const timestamp = now();
    expect((await signed(path, { timestamp })).status).toBe(200);
    await expect401(signed(path, { timestamp }), SIGNATURE_ERRORS.replayed);
  });

  it('accepts good signatures: GET with a query, POST with a (non-ASCII) body, PATCH and DELETE', async () => {
    const list = await signed('/api/images?limit=5&offset=0');
    expect(list.status).toBe(200);
    expect(list.body.pagination).toMatchObject({ limit: 5, offset: 0 });

    const body = JSON.stringify({ name: 'Café ☕ signé', prompt: 'watercolour, soft light,' });
    const created = await signed('/api/style-presets', { body });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.data.name).toBe('Café ☕ signé');
    const id = created.body.data.id;
    const patched = await signed(`/api/style-presets/${id}`, { method: 'PATCH', body: '{"prompt":"ink,"}' });
    expect(patched.status).toBe(200);
    expect(patched.body.data.prompt).toBe('ink,');
    expect((await signed(`/api/style-presets/${id}`, { method: 'DELETE' })).status).toBe(200);
  });

  it('is refused by a second gateway when the signature was used at the first (the replay store is Redis, shared)', async () => {
    const timestamp = now();
    expect((await signed('/api/images?limit=1', { timestamp })).status).toBe(200);
    const replay = await signed('/api/images?limit=1', { timestamp, via: api2 });
    expect(replay.status).toBe(401);
    expect(replay.body.error).toBe(SIGNATURE_ERRORS.replayed);
    // And the other way round, for a signature first seen by the second gateway.
    const t2 = now();
    expect((await signed('/api/images?limit=1', { timestamp: t2, via: api2 })).status).toBe(200);
    expect((await signed('/api/images?limit=1', { timestamp: t2 })).body.error).toBe(SIGNATURE_ERRORS.replayed);

    const redis = redisClient(REDIS_URL, 'signed-requests-test');
    try {
      const claimed = `${s.env.EVENTS_PREFIX}:sig:${keyId}:${sign(secret, timestamp, 'GET', '/api/images?limit=1')}`;
      expect(await redis.exists(claimed)).toBe(1);
      const ttl = await redis.pttl(claimed);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(6 * 60_000);
    } finally {
      await redis.quit();
    }
  });

  it('is refused on MCP, which cannot verify signatures (an unflagged key of the tenant still works there)', async () => {
    const rpc = (key: string) =>
      fetch(`${s.baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-api-key': key },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
    const refused = await rpc(a.liveKey);
    expect(refused.status).toBe(401);
    await refused.body?.cancel();
    const ok = await rpc(a.testKey);
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
  });

  it('keeps the previous secret for the grace period after a rotation, then refuses it', async () => {
    const old = secret;
    const rotated = await admin(`${signingPath(a.tenantId, keyId)}/rotate`, {});
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    const data = rotated.body.data;
    expect(data.signingSecret).toMatch(/^sigsec_/);
    expect(data.signingSecret).not.toBe(old);
    // The default grace period (SIGNING_SECRET_GRACE_MS, 24 h).
    const grace = Date.parse(data.previousSecretExpiresAt) - Date.parse(data.secretCreatedAt);
    expect(grace).toBeGreaterThan(23 * 3_600_000);
    expect(grace).toBeLessThanOrEqual(24 * 3_600_000 + 1000);
    secret = data.signingSecret;
    await waitFor(async () => (await signed('/api/images?limit=1')).status === 200, { message: 'the new secret accepted' });
    expect((await signed('/api/images?limit=1', { with: old })).status).toBe(200);

    // A rotation with a grace period of 1 s: the secret it replaces is refused once that has passed.
    const quick = await admin(`${signingPath(a.tenantId, keyId)}/rotate`, { grace_period_seconds: 1 });
    expect(quick.status).toBe(200);
    const previous = secret;
    secret = quick.body.data.signingSecret;
    await waitFor(async () => (await signed('/api/images?limit=1')).status === 200, { message: 'the newest secret accepted' });
    const refused = await waitFor(
      async () => {
        const r = await signed('/api/images?limit=1', { with: previous });
        return r.status === 401 && r;
      },
      { message: 'the previous secret refused after its grace period' },
    );
    expect(refused.body.error).toBe(SIGNATURE_ERRORS.invalid);
    // Only one previous secret is kept: the first one went with the second rotation.
    expect((await signed('/api/images?limit=1', { with: old })).body.error).toBe(SIGNATURE_ERRORS.invalid);
    const [row] = await sql<
      { previous_signing_secret: Buffer | null }[]
    >`SELECT previous_signing_secret FROM api_keys WHERE key_id = ${keyId}`;
    expect(row.previous_signing_secret?.includes(Buffer.from(previous))).toBe(false);
  });

  it('is signed by the typed client given the secret (GET with a query, POST with a body)', async () => {
    const client = imagegenClient({
      baseUrl: s.baseUrl,
      apiKey: a.liveKey,
      signingSecret: secret,
      middleware: [
        {
          async onResponse({ request, response }) {
            const text = await response.clone().text();
            const url = new URL(request.url);
            await checkAnswer(s.baseUrl, {
              method: request.method,
              path: url.pathname + url.search,
              status: response.status,
              headers: response.headers,
              body: text ? JSON.parse(text) : undefined,
            });
            return undefined;
          },
        },
      ],
    });
    const list = await client.GET('/api/images', { params: { query: { limit: 3, search: 'fox & hound' } } });
    expect(list.response.status, JSON.stringify(list.error)).toBe(200);
    const created = await client.POST('/api/style-presets', { body: { name: 'Client ünïcode', prompt: 'charcoal,' } });
    expect(created.response.status, JSON.stringify(created.error)).toBe(200);
    expect(created.data?.data.name).toBe('Client ünïcode');
    const gone = await client.DELETE('/api/style-presets/{id}', { params: { path: { id: String(created.data?.data.id) } } });
    expect(gone.response.status).toBe(200);

    const unsigned = await imagegenClient({ baseUrl: s.baseUrl, apiKey: a.liveKey }).GET('/api/images', {});
    expect(unsigned.response.status).toBe(401);
    expect(unsigned.error?.error).toBe(SIGNATURE_ERRORS.missing);
  });
});

describe('keys without the flag', () => {
  it('behave as before: no headers needed, signature headers ignored', async () => {
    expect((await s.api('/api/images?limit=1', { key: a.testKey })).status).toBe(200);
    expect((await s.api('/api/images?limit=1', { key: b.liveKey })).status).toBe(200);
    const ignored = await s.api('/api/images?limit=1', {
      key: b.liveKey,
      headers: { 'x-signature': 'not a signature', 'x-timestamp': 'not a time' },
    });
    expect(ignored.status).toBe(200);
    expect((await api2('/api/images?limit=1', { key: a.testKey })).status).toBe(200);
  });

  it('include a key whose flag was turned off again: its secrets are forgotten', async () => {
    const off = await admin(signingPath(a.tenantId, keyId), { signature_required: false });
    expect(off.status).toBe(200);
    expect(off.body.data).toEqual({
      keyId,
      keyName: expect.any(String),
      signatureRequired: false,
      signingSecret: null,
      secretCreatedAt: null,
      previousSecretExpiresAt: null,
    });
    await waitFor(async () => (await s.api('/api/images?limit=1', { key: a.liveKey })).status === 200, {
      message: 'the key accepted without a signature',
    });
    const [row] = await sql<{ signing_secret: Buffer | null; previous_signing_secret: Buffer | null }[]>`
      SELECT signing_secret, previous_signing_secret FROM api_keys WHERE key_id = ${keyId}`;
    expect(row).toEqual({ signing_secret: null, previous_signing_secret: null });
    expect((await admin(`${signingPath(a.tenantId, keyId)}/rotate`, {})).status).toBe(409);
  });
});
