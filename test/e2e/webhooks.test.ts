import { WEBHOOK_EVENT_TYPES } from '@imagegen/api-schemas/vocab';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver, verifyLegacy, verifyStandard } from '../../services/webhook-dispatcher/test/receiver.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { MIB, noisePng, startImageServer } from './usage-support.js';

let s: TestStack;
let rx: Receiver;
let A: TestTenant;
let B: TestTenant;
let images: Awaited<ReturnType<typeof startImageServer>>;

beforeAll(async () => {
  rx = await startReceiver();
  // The stack trusts the receiver's self-signed certificate; ALLOW_LOOPBACK_FETCH=1 is set by startTestStack.
  // Fast retries for this file (read by the webhook dispatcher at start): 20 ms, 80 ms, 320 ms, ...
  s = await startTestStack({ env: { WEBHOOK_CA_FILE: rx.caFile, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_POLL_MS: '10' } });
  [A, B] = await Promise.all([s.createTenant({ rate_limit_per_minute: 100_000 }), s.createTenant({ rate_limit_per_minute: 100_000 })]);
  images = await startImageServer();
});
afterAll(async () => {
  await images?.stop();
  await s?.stop();
  await rx?.stop();
});

const create = (key: string, body: unknown) => s.api('/api/webhooks', { key, body });

describe('webhook endpoints API', () => {
  it('creates (secret shown once), lists, gets, patches and deletes endpoints', async () => {
    const c = await create(A.liveKey, { url: rx.url('/crud'), description: 'ops pager' });
    expect(c.status).toBe(201);
    expect(c.body.data).toEqual({
      id: expect.any(Number),
      url: rx.url('/crud'),
      description: 'ops pager',
      events: [...WEBHOOK_EVENT_TYPES],
      enabled: true,
      disabledReason: null,
      consecutiveFailures: 0,
      lastDeliveryStatus: null,
      lastResponseStatus: null,
      lastDeliveryAt: null,
      secretHint: expect.stringMatching(/^whsec_.{4}\.\.\.$/),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/=]{44}$/),
    });
    const id = c.body.data.id;
    const second = await create(A.liveKey, { url: rx.url('/crud2'), events: ['quota.exceeded'] });
    expect(second.status).toBe(201);

    const list = await s.api('/api/webhooks', { key: A.liveKey });
    expect(list.status).toBe(200);
    expect(list.body.data.map((w: { id: number }) => w.id)).toEqual([id, second.body.data.id]);
    expect(JSON.stringify(list.body)).not.toContain(c.body.data.secret);
    expect(list.body.data[0]).not.toHaveProperty('secret');

    const one = await s.api(`/api/webhooks/${id}`, { key: A.liveKey });
    expect(one.body.data).toMatchObject({ id, url: rx.url('/crud'), enabled: true });
    expect(one.body.data).not.toHaveProperty('secret');

    const off = await s.api(`/api/webhooks/${id}`, { key: A.liveKey, method: 'PATCH', body: { enabled: false } });
    expect(off.status).toBe(200);
    expect(off.body.data).toMatchObject({ enabled: false, disabledReason: 'user' });
    const on = await s.api(`/api/webhooks/${id}`, { key: A.liveKey, method: 'PATCH', body: { enabled: true, description: null } });
    expect(on.body.data).toMatchObject({ enabled: true, disabledReason: null, description: null });

    const del = await s.api(`/api/webhooks/${second.body.data.id}`, { key: A.liveKey, method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ data: { deleted: true, id: second.body.data.id } });
    expect((await s.api(`/api/webhooks/${second.body.data.id}`, { key: A.liveKey })).status).toBe(404);
    expect((await s.api(`/api/webhooks/${id}/deliveries`, { key: A.liveKey })).body).toEqual({ data: [] });
  });

  it('deletes on /api/webhooks itself, by id or by url (query or body), within the tenant only', async () => {
    const a = (await create(A.liveKey, { url: rx.url('/del-a') })).body.data;
    const b = (await create(A.liveKey, { url: rx.url('/del-b') })).body.data;
    const c = (await create(A.liveKey, { url: rx.url('/del-c') })).body.data;
    const ids = async () => (await s.api('/api/webhooks', { key: A.liveKey })).body.data.map((w: { id: number }) => w.id);
    // Another tenant cannot delete them, by id or by url.
    expect((await s.api(`/api/webhooks?id=${a.id}`, { key: B.liveKey, method: 'DELETE' })).body).toEqual({ error: 'Webhook not found' });
    const foreign = await s.api('/api/webhooks', { key: B.liveKey, method: 'DELETE', body: { url: rx.url('/del-b') } });
    expect(foreign.status).toBe(404);
    expect(await ids()).toEqual(expect.arrayContaining([a.id, b.id, c.id]));

    // Clients that send Content-Type: application/json on every request, also on a bodyless DELETE.
    const byQuery = await s.api(`/api/webhooks?id=${a.id}`, {
      key: A.liveKey,
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
    });
    expect(byQuery.status).toBe(200);
    expect(byQuery.body).toEqual({ data: { deleted: true, id: a.id } });
    const byBody = await s.api('/api/webhooks', { key: A.liveKey, method: 'DELETE', body: { id: b.id } });
    expect(byBody.body).toEqual({ data: { deleted: true, id: b.id } });
    const byUrl = await s.api(`/api/webhooks?url=${encodeURIComponent(rx.url('/del-c'))}`, { key: A.liveKey, method: 'DELETE' });
    expect(byUrl.body).toEqual({ data: { deleted: true, ids: [c.id] } });
    const left = await ids();
    for (const gone of [a.id, b.id, c.id]) expect(left).not.toContain(gone);

    expect((await s.api(`/api/webhooks?id=${a.id}`, { key: A.liveKey, method: 'DELETE' })).status).toBe(404);
    const none = await s.api('/api/webhooks', { key: A.liveKey, method: 'DELETE' });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({ error: 'Invalid request payload', details: ['id or url is required'] });
    expect((await s.api('/api/webhooks?id=1', { method: 'DELETE' })).status).toBe(401);
  });

  it('validates bodies, ids and limits', async () => {
    const bad = [
      [{}, 'Invalid request payload'],
      [{ url: 42 }, 'Invalid request payload'],
      [{ url: rx.url('/v'), events: ['quota.sometimes'] }, 'Invalid request payload'],
      [{ url: rx.url('/v'), description: 'x'.repeat(201) }, 'Invalid request payload'],
      [{ url: 'http://example.com/hook' }, 'Webhook URL must use HTTPS'],
      [{ url: 'not a url' }, 'Webhook URL must be a valid HTTPS URL'],
    ] as const;
    for (const [body, error] of bad) {
      const r = await create(A.liveKey, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error, JSON.stringify(body)).toBe(error);
    }
    const [w] = (await s.api('/api/webhooks', { key: A.liveKey })).body.data;
    expect((await s.api(`/api/webhooks/${w.id}`, { key: A.liveKey, method: 'PATCH', body: {} })).status).toBe(400);
    expect((await s.api(`/api/webhooks/${w.id}`, { key: A.liveKey, method: 'PATCH', body: { enabled: 'yes' } })).status).toBe(400);
    expect((await s.api('/api/webhooks/abc', { key: A.liveKey })).body).toEqual({ error: 'Webhook not found' });
    expect((await s.api('/api/webhooks/999999', { key: A.liveKey })).status).toBe(404);
    for (const limit of ['0', '201', 'x']) {
      expect((await s.api(`/api/webhooks/${w.id}/deliveries?limit=${limit}`, { key: A.liveKey })).body).toEqual({ error: 'Invalid limit' });
    }
  });

  it('refuses URLs that resolve to private, link-local or reserved addresses', async () => {
    for (const url of [
      'https://10.1.2.3/hook',
      'https://192.168.0.1/hook',
      'https://172.31.255.1/hook',
      'https://169.254.169.254/latest/meta-data/',
      'https://100.100.100.100/',
      'https://[fc00::5]/hook',
      'https://[::ffff:192.168.0.1]/hook',
    ]) {
      const r = await create(A.liveKey, { url });
      expect(r.status, url).toBe(400);
      expect(r.body, url).toEqual({ error: 'Webhook URL must resolve to a public IP address' });
    }
  });

  it('needs a tenant key and keeps tenants apart', async () => {
    expect((await s.api('/api/webhooks')).status).toBe(401);
    expect((await s.api('/api/webhooks', { body: { url: rx.url('/x') } })).status).toBe(401);
    const [w] = (await s.api('/api/webhooks', { key: A.liveKey })).body.data;
    expect((await s.api('/api/webhooks', { key: B.liveKey })).body).toEqual({ data: [] });
    for (const [method, path, body] of [
      ['GET', `/api/webhooks/${w.id}`, undefined],
      ['PATCH', `/api/webhooks/${w.id}`, { enabled: false }],
      ['DELETE', `/api/webhooks/${w.id}`, undefined],
      ['GET', `/api/webhooks/${w.id}/deliveries`, undefined],
      ['POST', `/api/webhooks/${w.id}/test`, undefined],
    ] as const) {
      const r = await s.api(path, { key: B.liveKey, method, body });
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body).toEqual({ error: 'Webhook not found' });
    }
    expect((await s.api(`/api/webhooks/${w.id}`, { key: A.liveKey })).body.data.enabled).toBe(true);
  });
});

describe('quota webhooks end to end', () => {
  it('sends quota.warning and quota.exceeded once when a real upload fills the quota, signed both ways', async () => {
    const T = await s.createTenant({ monthly_quota_mb: 1, rate_limit_per_minute: 100_000 });
    const w = await create(T.liveKey, { url: rx.url('/quota'), events: ['quota.warning', 'quota.exceeded'] });
    expect(w.status).toBe(201);
    const secret = w.body.data.secret as string;

    const up = await s.api('/api/upload-for-editing', { key: T.liveKey, body: { image_url: images.serve(noisePng(620, 620)) } });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    await waitFor(() => rx.on('/quota').length >= 2, { message: 'two quota webhooks', timeout: 20_000 });

    const got = rx
      .on('/quota')
      .map((r) => ({ r, body: JSON.parse(r.body) }))
      .sort((a, b) => a.body.threshold - b.body.threshold);
    const usageMb = Math.round((up.body.size_bytes / MIB) * 100) / 100;
    const period = new Date().toISOString().slice(0, 7);
    expect(got.map((g) => g.body)).toEqual([
      {
        id: got[0]?.r.headers['webhook-id'],
        event: 'quota.warning',
        threshold: 80,
        tenant_id: T.tenantId,
        billing_period: period,
        current_usage_mb: usageMb,
        quota_mb: 1,
        timestamp: expect.any(String),
      },
      {
        id: got[1]?.r.headers['webhook-id'],
        event: 'quota.exceeded',
        threshold: 100,
        tenant_id: T.tenantId,
        billing_period: period,
        current_usage_mb: usageMb,
        quota_mb: 1,
        timestamp: expect.any(String),
      },
    ]);
    for (const { r } of got) {
      expect(r.headers['x-webhook-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(verifyLegacy(secret, r)).toBe(true);
      expect(verifyStandard(secret, r)).toBe(true);
    }

    // Over quota now: the next store is refused and no further alert is sent this month.
    await waitFor(async () => (await s.api('/api/usage', { key: T.liveKey })).body.data.quota.monthlyRemainingMb === 0, {
      message: 'usage',
      timeout: 20_000,
    });
    expect((await s.api('/api/images', { key: T.liveKey, body: { prompt: 'more' } })).status).toBe(402);

    const log = await s.api(`/api/webhooks/${w.body.data.id}/deliveries`, { key: T.liveKey });
    expect(log.status).toBe(200);
    expect(log.body.data).toHaveLength(2);
    for (const d of log.body.data) {
      expect(d).toMatchObject({ status: 'succeeded', attemptCount: 1, lastResponseStatus: 200, lastError: null, nextAttemptAt: null });
      expect(d.attempts).toEqual([
        { attempt: 1, responseStatus: 200, error: null, durationMs: expect.any(Number), attemptedAt: expect.any(String) },
      ]);
      expect(d.payload.tenant_id).toBe(T.tenantId);
    }
    expect(rx.on('/quota')).toHaveLength(2);
  });

  it('retries, disables the endpoint after 5 consecutive failures, and resumes after re-enable', async () => {
    const w = await create(A.liveKey, { url: rx.url('/flaky') });
    const id = w.body.data.id;
    rx.respond('/flaky', 500);
    const t = await s.api(`/api/webhooks/${id}/test`, { key: A.liveKey, method: 'POST' });
    expect(t.status).toBe(202);
    expect(t.body.data).toMatchObject({ event: 'webhook.test', status: 'pending', attemptCount: 0, attempts: [] });

    const off = await waitFor(
      async () => {
        const r = await s.api(`/api/webhooks/${id}`, { key: A.liveKey });
        return r.body.data.enabled === false && r.body.data;
      },
      { message: 'auto-disable', timeout: 20_000 },
    );
    expect(off).toMatchObject({
      enabled: false,
      disabledReason: 'consecutive_failures',
      consecutiveFailures: 5,
      lastDeliveryStatus: 'failed',
      lastResponseStatus: 500,
    });
    expect(rx.on('/flaky')).toHaveLength(5);
    const [d] = (await s.api(`/api/webhooks/${id}/deliveries`, { key: A.liveKey })).body.data;
    expect(d).toMatchObject({ status: 'pending', attemptCount: 5, lastResponseStatus: 500, lastError: 'HTTP 500' });
    expect(d.attempts.map((a: { responseStatus: number }) => a.responseStatus)).toEqual([500, 500, 500, 500, 500]);
    expect(d.payload).toMatchObject({ event: 'webhook.test', tenant_id: A.tenantId, webhook_id: id });

    rx.respond('/flaky', 200);
    const on = await s.api(`/api/webhooks/${id}`, { key: A.liveKey, method: 'PATCH', body: { enabled: true } });
    expect(on.body.data).toMatchObject({ enabled: true, consecutiveFailures: 0, disabledReason: null });
    await waitFor(() => rx.on('/flaky').length === 6, { message: 'delivery after re-enable', timeout: 20_000 });
    const done = await waitFor(
      async () => {
        const [x] = (await s.api(`/api/webhooks/${id}/deliveries`, { key: A.liveKey })).body.data;
        return x.status === 'succeeded' && x;
      },
      { timeout: 20_000 },
    );
    expect(done).toMatchObject({ attemptCount: 6, lastResponseStatus: 200 });
    expect((await s.api(`/api/webhooks/${id}`, { key: A.liveKey })).body.data).toMatchObject({
      enabled: true,
      lastDeliveryStatus: 'success',
      consecutiveFailures: 0,
    });
  });
});
