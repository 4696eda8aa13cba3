import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  GenerationWebhookPayload,
  ImageDeletedWebhookPayload,
  ImageStoredWebhookPayload,
  QuotaWebhookPayload,
  TestWebhookPayload,
} from '@imagegen/api-schemas';
import { WEBHOOK_EVENT_TYPES } from '@imagegen/api-schemas/vocab';
import { ExecutionFinished, ImageDeleted, ImageStored, QuotaCrossed } from '@imagegen/contracts/events/v1/events';
import { type Webhook, WebhookServiceService } from '@imagegen/contracts/webhooks/v1/webhooks';
import {
  type Client,
  createClient,
  createDb,
  createInProcessTransport,
  createLogger,
  createResolver,
  createStorage,
  createTestDatabase,
  type EventTransport,
  loadConfig,
  metricsText,
  type Principal,
  type RunningService,
  type ServiceContext,
  type Sql,
  subjectFor,
} from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { DEFAULT_POLICY, retryDelayMs, startDispatcher } from '../src/dispatcher.js';
import { startWebhookDispatcher, type WebhookOptions } from '../src/service.js';
import { legacySignature, SecretBox, standardSignature } from '../src/signing.js';
import { type Received, type Receiver, startReceiver, verifyLegacy, verifyStandard, verifyWebhook } from './receiver.js';

const principal = (tenantId: string): Principal => ({ requestId: randomUUID(), tenantId, source: 'tenant_api' });

let db: { url: string; drop: () => Promise<void> };
let sql: Sql;
let rx: Receiver;
let events: EventTransport;
let ctx: ServiceContext;
let svc: RunningService;
let client: Client<typeof WebhookServiceService>;
const FAST: WebhookOptions = { policy: { baseMs: 20 }, pollMs: 10, timeoutMs: 3000 };

async function startSvc(opts: WebhookOptions = FAST) {
  svc = await startWebhookDispatcher(ctx, opts);
  client?.close();
  client = createClient(WebhookServiceService, svc.grpcAddress as string);
}

async function createWh(req: { url: string; events: string[]; description?: string }, p: Principal) {
  const r = await client.createWebhook(req, p);
  return { webhook: r.webhook as Webhook, secret: r.secret };
}

function publishQuota(tenantId: string, threshold: number, id = randomUUID(), currentUsageMb = threshold * 1.024) {
  const data = QuotaCrossed.encode(
    QuotaCrossed.fromPartial({
      tenantId,
      threshold,
      billingPeriod: '2026-11',
      currentUsageMb,
      quotaMb: 128,
      occurredAt: new Date().toISOString(),
    }),
  ).finish();
  return events.publish({ id, subject: subjectFor(ctx.config.eventsPrefix, 'usage.quota_crossed'), data, headers: {} });
}

/** Publishes a generation or library event as its owner's outbox relay would (the id is the event id). */
function publishEvent(
  name: 'generation.execution_finished' | 'library.image_stored' | 'library.image_deleted',
  data: Uint8Array,
  id = randomUUID(),
) {
  return events.publish({ id, subject: subjectFor(ctx.config.eventsPrefix, name), data, headers: {} }).then(() => id);
}
const now = () => new Date().toISOString();
const finished = (tenantId: string, p: Partial<ExecutionFinished>) =>
  ExecutionFinished.encode(
    ExecutionFinished.fromPartial({ tenantId, sessionId: 's-1', toolName: 'generate_image', durationMs: 1200, occurredAt: now(), ...p }),
  ).finish();
const stored = (tenantId: string, imageId: number, occurredAt = now()) =>
  ImageStored.encode(
    ImageStored.fromPartial({ tenantId, imageId, sessionId: 's-1', operation: 'generate', sizeBytes: 1000, occurredAt }),
  ).finish();
const deleted = (tenantId: string, imageId: number) =>
  ImageDeleted.encode(ImageDeleted.fromPartial({ tenantId, imageId, sizeBytes: 1000, occurredAt: now() })).finish();

/** Each event type's body schema (resources.ts: the OpenAPI `webhooks` section's source), closed to other fields. */
const PAYLOAD_SCHEMA = {
  'generation.completed': GenerationWebhookPayload,
  'generation.failed': GenerationWebhookPayload,
  'generation.cancelled': GenerationWebhookPayload,
  'image.stored': ImageStoredWebhookPayload,
  'image.deleted': ImageDeletedWebhookPayload,
  'quota.warning': QuotaWebhookPayload,
  'quota.exceeded': QuotaWebhookPayload,
  'webhook.test': TestWebhookPayload,
} as const;

/** A received delivery, verified (Standard Webhooks), checked against its schema, its id the webhook-id: its body. */
function checked(secret: string, r: Received): Record<string, any> {
  const body = verifyWebhook(secret, r);
  PAYLOAD_SCHEMA[body.event as keyof typeof PAYLOAD_SCHEMA].strict().parse(body);
  expect(body.id).toBe(r.headers['webhook-id']);
  expect(verifyLegacy(secret, r)).toBe(true);
  return body;
}

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'webhooks');
  sql = createDb(db.url, { schema: 'webhooks', max: 2 });
  rx = await startReceiver();
  const config = loadConfig({
    DATABASE_URL: db.url,
    EVENTS_PREFIX: `wh${randomBytes(4).toString('hex')}`,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ALLOW_LOOPBACK_FETCH: '1',
    PUBLIC_BASE_URL: 'https://imagegen.test',
    WEBHOOK_CA_FILE: rx.caFile,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
  } as NodeJS.ProcessEnv);
  const logger = createLogger('webhooks-test', config.logLevel);
  // No duplicate window: the same event id published twice is delivered twice (duplicate delivery).
  events = createInProcessTransport({ logger, duplicateWindowMs: 0 });
  ctx = {
    config,
    logger,
    events,
    storage: createStorage({ dataDir: '/tmp/unused', publicBaseUrl: 'http://x' }),
    resolve: createResolver(config),
  };
  await startSvc();
});

afterAll(async () => {
  client?.close();
  await svc?.stop();
  await events?.close();
  await rx?.stop();
  await sql?.end();
  await db?.drop();
});

describe('webhook endpoints', () => {
  it('creates an endpoint with a whsec_ secret shown once, lists, gets, updates and deletes it', async () => {
    const p = principal('crud');
    const created = await createWh({ url: rx.url('/crud'), events: [], description: 'ops' }, p);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);
    expect(created.webhook).toMatchObject({
      url: rx.url('/crud'),
      description: 'ops',
      events: [...WEBHOOK_EVENT_TYPES],
      enabled: true,
      consecutiveFailures: 0,
      secretHint: `${created.secret.slice(0, 10)}...`,
    });
    expect(JSON.stringify(await client.listWebhooks({}, p))).not.toContain(created.secret);
    // Stored encrypted, not in clear.
    const [row] = await sql`SELECT secret FROM endpoints WHERE id = ${created.webhook.id}`;
    expect(row.secret).toMatch(/^enc:v1:/);
    expect(row.secret).not.toContain(created.secret.slice(6));

    const second = await createWh({ url: rx.url('/crud2'), events: ['quota.exceeded'] }, p);
    expect((await client.listWebhooks({}, p)).webhooks.map((w) => w.id)).toEqual([created.webhook.id, second.webhook.id]);
    expect((await client.getWebhook({ id: second.webhook.id }, p)).events).toEqual(['quota.exceeded']);

    const paused = await client.updateWebhook({ id: second.webhook.id, enabled: false }, p);
    expect(paused).toMatchObject({ enabled: false, disabledReason: 'user' });
    const resumed = await client.updateWebhook({ id: second.webhook.id, enabled: true, description: 'x' }, p);
    expect(resumed).toMatchObject({ enabled: true, description: 'x' });
    expect(resumed.disabledReason).toBeUndefined();

    // Another tenant sees none of it.
    const other = principal('someone-else');
    expect((await client.listWebhooks({}, other)).webhooks).toEqual([]);
    for (const call of [
      () => client.getWebhook({ id: second.webhook.id }, other),
      () => client.updateWebhook({ id: second.webhook.id, enabled: false }, other),
      () => client.deleteWebhook({ id: second.webhook.id }, other),
      () => client.listDeliveries({ webhookId: second.webhook.id }, other),
      () => client.testWebhook({ id: second.webhook.id }, other),
    ]) {
      await expect(call()).rejects.toMatchObject({ status: 404, body: { error: 'Webhook not found' } });
    }

    expect(await client.deleteWebhook({ id: second.webhook.id }, p)).toEqual({ deleted: true });
    await expect(client.getWebhook({ id: second.webhook.id }, p)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses non-HTTPS URLs and hosts resolving to private, link-local or reserved addresses', async () => {
    const p = principal('ssrf');
    const cases: [string, string][] = [
      ['http://example.com/hook', 'Webhook URL must use HTTPS'],
      ['not a url', 'Webhook URL must be a valid HTTPS URL'],
      ['https://user:pw@example.com/', 'Webhook URL must not contain credentials'],
      ['https://10.0.0.7/hook', 'Webhook URL must resolve to a public IP address'],
      ['https://192.168.1.1/hook', 'Webhook URL must resolve to a public IP address'],
      ['https://172.16.5.4/hook', 'Webhook URL must resolve to a public IP address'],
      ['https://169.254.169.254/latest/meta-data', 'Webhook URL must resolve to a public IP address'],
      ['https://100.64.0.1/', 'Webhook URL must resolve to a public IP address'],
      ['https://0.0.0.0/', 'Webhook URL must resolve to a public IP address'],
      ['https://[fd00::1]/', 'Webhook URL must resolve to a public IP address'],
      ['https://[fe80::1]/', 'Webhook URL must resolve to a public IP address'],
      ['https://[::ffff:10.0.0.1]/', 'Webhook URL must resolve to a public IP address'],
    ];
    for (const [url, error] of cases) {
      await expect(client.createWebhook({ url, events: [] }, p), url).rejects.toMatchObject({ status: 400, body: { error } });
    }
    await expect(client.createWebhook({ url: rx.url('/x'), events: ['quota.nope'] }, p)).rejects.toMatchObject({
      status: 400,
      body: { error: 'Invalid request payload' },
    });
    expect((await client.listWebhooks({}, p)).webhooks).toEqual([]);
  });

  it('refuses loopback names and addresses when loopback is not allowed (production)', async () => {
    const strict = await startWebhookDispatcher({ ...ctx, config: { ...ctx.config, allowLoopbackFetch: false } }, FAST);
    const c = createClient(WebhookServiceService, strict.grpcAddress as string);
    try {
      for (const url of [rx.url('/x'), `https://127.0.0.1:${rx.port}/x`, 'https://[::1]/x']) {
        await expect(c.createWebhook({ url, events: [] }, principal('strict')), url).rejects.toMatchObject({
          status: 400,
          body: { error: 'Webhook URL must resolve to a public IP address' },
        });
      }
    } finally {
      c.close();
      await strict.stop();
    }
  });

  it('allows at most 10 endpoints per tenant', async () => {
    const p = principal('many');
    for (let i = 0; i < 10; i++) await createWh({ url: rx.url(`/many${i}`), events: [] }, p);
    await expect(client.createWebhook({ url: rx.url('/many10'), events: [] }, p)).rejects.toMatchObject({ status: 400 });
  });
});

describe('delivery', () => {
  it('delivers quota.warning and quota.exceeded over HTTPS with both signature schemes, once per event', async () => {
    const tenant = 'deliver';
    const p = principal(tenant);
    const a = await createWh({ url: rx.url('/a'), events: [] }, p);
    const b = await createWh({ url: rx.url('/b'), events: ['quota.exceeded'] }, p);
    await client.createWebhook({ url: rx.url('/other-tenant'), events: [] }, principal('not-me'));
    const warnId = randomUUID();
    await publishQuota(tenant, 80, warnId);
    await publishQuota(tenant, 80, warnId); // duplicate delivery of the same event
    await publishQuota(tenant, 100);
    // A marker event after them (told apart by its usage): consumed in order and delivered one at a time per
    // endpoint, oldest first, so a duplicate delivery would reach the endpoints before it.
    await publishQuota(tenant, 100, randomUUID(), 999);
    const isMarker = (r: { body: string }) => JSON.parse(r.body).current_usage_mb === 999;
    await waitFor(() => rx.on('/a').some(isMarker) && rx.on('/b').some(isMarker), { message: 'the marker event at /a and /b' });
    const markerEvent = rx.on('/a').find(isMarker)?.headers['webhook-id'];
    const on = (path: string) => rx.on(path).filter((r) => !isMarker(r));
    expect(on('/a')).toHaveLength(2);
    expect(on('/b')).toHaveLength(1);
    expect(rx.on('/other-tenant')).toHaveLength(0);

    const bodies = on('/a')
      .map((r) => JSON.parse(r.body))
      .sort((x, y) => x.threshold - y.threshold);
    expect(bodies[0]).toEqual({
      id: warnId,
      event: 'quota.warning',
      threshold: 80,
      tenant_id: tenant,
      billing_period: '2026-11',
      current_usage_mb: 81.92,
      quota_mb: 128,
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(bodies[1]).toMatchObject({ event: 'quota.exceeded', threshold: 100 });

    for (const r of on('/a')) {
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['x-webhook-timestamp']).toBe(r.headers['webhook-timestamp']);
      expect(verifyLegacy(a.secret, r)).toBe(true);
      expect(verifyStandard(a.secret, r)).toBe(true);
      // The other endpoint's secret does not verify.
      expect(verifyLegacy(b.secret, r)).toBe(false);
      expect(verifyStandard(b.secret, r)).toBe(false);
    }
    expect(verifyStandard(b.secret, on('/b')[0])).toBe(true);
    // The event's id is the webhook-id on every endpoint that receives it (and the body's id).
    const exceeded = on('/a').find((r) => JSON.parse(r.body).threshold === 100);
    expect(on('/b')[0].headers['webhook-id']).toBe(exceeded?.headers['webhook-id']);
    expect(JSON.parse(on('/b')[0].body).id).toBe(on('/b')[0].headers['webhook-id']);
    // Tampered body fails both.
    const t = { ...on('/a')[0], body: on('/a')[0].body.replace('80', '81') };
    expect(verifyLegacy(a.secret, t)).toBe(false);
    expect(verifyStandard(a.secret, t)).toBe(false);

    const log = (await client.listDeliveries({ webhookId: a.webhook.id }, p)).deliveries.filter((d) => d.eventId !== markerEvent);
    expect(log).toHaveLength(2);
    expect(log.map((d) => d.status)).toEqual(['succeeded', 'succeeded']);
    expect(log[0].attempts, JSON.stringify(log)).toHaveLength(1);
    expect(log[0].attempts[0]).toMatchObject({ attempt: 1, responseStatus: 200 });
    expect(
      on('/a')
        .map((r) => r.headers['webhook-id'])
        .sort(),
    ).toEqual(log.map((d) => d.eventId).sort());
    expect(log.find((d) => d.event === 'quota.warning')?.eventId).toBe(warnId);
    const wh = await client.getWebhook({ id: a.webhook.id }, p);
    expect(wh).toMatchObject({ lastDeliveryStatus: 'success', lastResponseStatus: 200, consecutiveFailures: 0 });
    expect(wh.lastDeliveryAt).toBeTruthy();
  });

  it('retries with backoff, disables the endpoint after 5 consecutive failures, and resumes on re-enable', async () => {
    const attempts = async () => {
      const text = (await metricsText()).body;
      const n = (o: string) =>
        Number(new RegExp(`^imagegen_webhook_delivery_attempts_total\\{outcome="${o}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
      return { retrying: n('retrying'), disabled: n('disabled'), succeeded: n('succeeded') };
    };
    const before = await attempts();
    const p = principal('flaky');
    const w = await createWh({ url: rx.url('/down'), events: [] }, p);
    rx.respond('/down', 503);
    const d = await client.testWebhook({ id: w.webhook.id }, p);
    expect(d).toMatchObject({ event: 'webhook.test', status: 'pending', attemptCount: 0 });
    const disabled = await waitFor(
      async () => {
        const x = await client.getWebhook({ id: w.webhook.id }, p);
        return !x.enabled && x;
      },
      { timeout: 15_000, message: 'auto-disable' },
    );
    expect(disabled).toMatchObject({
      enabled: false,
      disabledReason: 'consecutive_failures',
      consecutiveFailures: 5,
      lastDeliveryStatus: 'failed',
      lastResponseStatus: 503,
    });
    expect(rx.on('/down')).toHaveLength(5);
    // Backoff: the gaps grow (20 ms base, x4 each, +-25% jitter).
    const at = rx.on('/down').map((r) => r.at);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    expect(gaps[3]).toBeGreaterThan(gaps[0]);
    // Same delivery id on every attempt, fresh timestamps, valid signatures each time.
    expect(new Set(rx.on('/down').map((r) => r.headers['webhook-id']))).toEqual(new Set([d.id]));
    for (const r of rx.on('/down')) expect(verifyStandard(w.secret, r) && verifyLegacy(w.secret, r)).toBe(true);

    let [log] = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
    expect(log).toMatchObject({ status: 'pending', attemptCount: 5, lastResponseStatus: 503, lastError: 'HTTP 503' });
    expect(log.attempts.map((x) => x.responseStatus)).toEqual([503, 503, 503, 503, 503]);

    // Disabled: nothing is sent, even once its next retry is due. The retry made due now, a later delivery to
    // another endpoint goes out: the round that claimed it (due deliveries, oldest first) did not take this one.
    await sql`UPDATE deliveries SET next_attempt_at = now() WHERE id = ${d.id}`;
    const mp = principal('flaky-marker');
    const marker = await createWh({ url: rx.url('/down-marker'), events: [] }, mp);
    await client.testWebhook({ id: marker.webhook.id }, mp);
    await waitFor(async () => (await client.listDeliveries({ webhookId: marker.webhook.id }, mp)).deliveries[0]?.status === 'succeeded', {
      message: 'the later delivery to another endpoint',
    });
    const [row] = await sql`SELECT attempt_count, locked_until FROM deliveries WHERE id = ${d.id}`;
    expect(row).toEqual({ attempt_count: 5, locked_until: null }); // not attempted, not leased
    expect(rx.on('/down')).toHaveLength(5);

    // The receiver is fixed and the owner re-enables: the pending delivery goes out at once.
    rx.respond('/down', 204);
    const re = await client.updateWebhook({ id: w.webhook.id, enabled: true }, p);
    expect(re).toMatchObject({ enabled: true, consecutiveFailures: 0 });
    await waitFor(() => rx.on('/down').length === 6, { timeout: 10_000, message: 'resumed delivery' });
    log = await waitFor(async () => {
      const [x] = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
      return x.status === 'succeeded' && x;
    });
    expect(log).toMatchObject({ attemptCount: 6, lastResponseStatus: 204 });
    // /metrics counts the attempts by outcome (at least these: other tests deliver in the same process).
    const after = await attempts();
    expect(after.retrying - before.retrying).toBeGreaterThanOrEqual(4);
    expect(after.disabled - before.disabled).toBeGreaterThanOrEqual(1);
    expect(after.succeeded - before.succeeded).toBeGreaterThanOrEqual(1);
    expect(await client.getWebhook({ id: w.webhook.id }, p)).toMatchObject({
      enabled: true,
      consecutiveFailures: 0,
      lastDeliveryStatus: 'success',
    });
  });

  it('a success resets the failure streak; timeouts and redirects count as failures', async () => {
    const p = principal('mixed');
    const w = await createWh({ url: rx.url('/mixed'), events: [] }, p);
    rx.respond('/mixed', [500, 'hang', 302, 200]);
    await client.testWebhook({ id: w.webhook.id }, p);
    const [log] = await waitFor(
      async () => {
        const l = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
        return l[0]?.status === 'succeeded' && l;
      },
      { timeout: 15_000, message: 'success after 3 failures' },
    );
    expect(log.attempts.map((a) => a.responseStatus ?? a.error)).toEqual([
      500,
      'timed out after 3000 ms',
      'redirects are not followed',
      200,
    ]);
    expect(await client.getWebhook({ id: w.webhook.id }, p)).toMatchObject({ enabled: true, consecutiveFailures: 0 });
  });

  it('keeps pending retries across a restart of the dispatcher', async () => {
    const p = principal('restart');
    const w = await createWh({ url: rx.url('/restart'), events: [] }, p);
    // Slow retries for this instance: the first attempt fails, the retry is due ~1.5 s later.
    await svc.stop();
    await startSvc({ policy: { baseMs: 1500, jitter: 0 }, pollMs: 50, timeoutMs: 3000 });
    rx.respond('/restart', [500, 200]);
    await client.testWebhook({ id: w.webhook.id }, p);
    await waitFor(() => rx.on('/restart').length === 1, { timeout: 10_000, message: 'first attempt' });
    await svc.stop();
    const [row] = await sql`SELECT status, attempt_count, next_attempt_at FROM deliveries WHERE endpoint_id = ${w.webhook.id}`;
    expect(row).toMatchObject({ status: 'pending', attempt_count: 1 });
    // A new process picks the persisted retry up when it is due.
    await startSvc();
    await waitFor(() => rx.on('/restart').length === 2, { timeout: 10_000, message: 'retry after restart' });
    const [log] = await waitFor(async () => {
      const l = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
      return l[0]?.status === 'succeeded' && l;
    });
    expect(log.attemptCount).toBe(2);
    expect(rx.on('/restart')[1].at - rx.on('/restart')[0].at).toBeGreaterThanOrEqual(1400);
  });

  it('sends one delivery at a time per endpoint, also with two dispatcher replicas, each exactly once', async () => {
    const p = principal('serial');
    const w = await createWh({ url: rx.url('/serial'), events: [] }, p);
    rx.respond('/serial', { status: 200, delayMs: 400 });
    // A second replica on the same schema, polling often.
    const sql2 = createDb(db.url, { schema: 'webhooks', max: 2 });
    const replica = startDispatcher({
      sql: sql2,
      logger: ctx.logger,
      secrets: new SecretBox(ctx.config.credentialsKey),
      policy: { ...DEFAULT_POLICY, baseMs: 20 },
      timeoutMs: 3000,
      pollMs: 10,
      allowLoopback: true,
      ca: readFileSync(rx.caFile, 'utf8'),
    });
    try {
      for (let i = 0; i < 4; i++) {
        await client.testWebhook({ id: w.webhook.id }, p);
        await new Promise((r) => setTimeout(r, 50));
      }
      const log = await waitFor(
        async () => {
          const l = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
          return l.length === 4 && l.every((d) => d.status === 'succeeded') && l;
        },
        { timeout: 15_000, message: 'four deliveries' },
      );
      expect(rx.peakConcurrency('/serial')).toBe(1);
      expect(rx.on('/serial')).toHaveLength(4);
      expect(log.map((d) => d.attemptCount)).toEqual([1, 1, 1, 1]);
    } finally {
      await replica.stop();
      await sql2.end();
    }
  });

  it('a hanging endpoint does not hold back the deliveries of the others', async () => {
    const p = principal('hang');
    // A long timeout: the hanging attempt is still under way while the other endpoint gets its three.
    await svc.stop();
    await startSvc({ ...FAST, timeoutMs: 10_000 });
    try {
      const slow = await createWh({ url: rx.url('/stuck'), events: [] }, p);
      const quick = await createWh({ url: rx.url('/quick'), events: [] }, p);
      rx.respond('/stuck', { status: 200, delayMs: 5000 });
      rx.respond('/quick', 200);
      await client.testWebhook({ id: slow.webhook.id }, p);
      await waitFor(() => rx.on('/stuck').length === 1, { timeout: 10_000, message: 'the slow endpoint called' });
      for (let i = 0; i < 3; i++) await client.testWebhook({ id: quick.webhook.id }, p);
      await waitFor(() => rx.on('/quick').length === 3, { timeout: 10_000, message: 'three deliveries to the quick endpoint' });
      // ...while the slow endpoint's one attempt has not been answered yet
      const [pending] = await sql`SELECT status, attempt_count FROM deliveries WHERE endpoint_id = ${slow.webhook.id}`;
      expect(pending).toMatchObject({ status: 'pending', attempt_count: 0 });
      await waitFor(async () => (await client.listDeliveries({ webhookId: slow.webhook.id }, p)).deliveries[0]?.status === 'succeeded', {
        timeout: 15_000,
        message: 'the slow delivery recorded',
      });
    } finally {
      await svc.stop();
      await startSvc();
    }
  });

  it('listDeliveries validates its limit', async () => {
    const p = principal('limits');
    const w = await createWh({ url: rx.url('/l'), events: [] }, p);
    for (const limit of [0, 201]) {
      await expect(client.listDeliveries({ webhookId: w.webhook.id, limit }, p)).rejects.toMatchObject({
        status: 400,
        body: { error: 'Invalid limit' },
      });
    }
    expect((await client.listDeliveries({ webhookId: w.webhook.id, limit: 200 }, p)).deliveries).toEqual([]);
  });
});

describe('every event type (issue 37)', () => {
  it('delivers generation.* and image.* events with small signed payloads; a filtered endpoint gets only its types', async () => {
    const tenant = 'types';
    const p = principal(tenant);
    const all = await createWh({ url: rx.url('/types-all'), events: [] }, p);
    const del = await createWh({ url: rx.url('/types-del'), events: ['image.deleted'] }, p);
    const ends = await createWh({ url: rx.url('/types-ends'), events: ['generation.failed', 'generation.cancelled'] }, p);
    await createWh({ url: rx.url('/types-other'), events: [] }, principal('types-other'));
    expect(all.webhook.events).toEqual([...WEBHOOK_EVENT_TYPES]);

    const completed = await publishEvent(
      'generation.execution_finished',
      finished(tenant, { executionId: 'e-1', status: 'completed', imageIds: [11, 12], images: 2 }),
    );
    await publishEvent(
      'generation.execution_finished',
      finished(tenant, { executionId: 'e-1', status: 'completed', imageIds: [11, 12] }),
      completed,
    ); // a duplicate
    const storedId = await publishEvent('library.image_stored', stored(tenant, 11));
    // An event from before the endpoints existed (a consumer catching up): nobody gets it.
    await publishEvent('library.image_stored', stored(tenant, 10, new Date(Date.now() - 3_600_000).toISOString()));
    const failed = await publishEvent(
      'generation.execution_finished',
      finished(tenant, { executionId: 'e-2', status: 'failed', error: 'Upstream provider error' }),
    );
    const cancelled = await publishEvent(
      'generation.execution_finished',
      finished(tenant, { executionId: 'e-3', status: 'cancelled', toolName: 'edit_image' }),
    );
    await publishEvent('library.image_stored', stored('types-nobody', 13)); // a tenant without endpoints
    const deletedId = await publishEvent('library.image_deleted', deleted(tenant, 11));
    // The marker, last: consumed in order and delivered oldest first per endpoint, so anything sent wrongly to an
    // endpoint before it would have reached it first.
    const marker = await publishEvent('library.image_deleted', deleted(tenant, 99));
    const got = (path: string) => rx.on(path).map((r) => r.headers['webhook-id']);
    await waitFor(() => got('/types-all').includes(marker) && got('/types-del').includes(marker), {
      message: 'the marker at both endpoints',
    });
    await waitFor(() => got('/types-ends').includes(cancelled), { message: 'generation.cancelled at the filtered endpoint' });

    expect(got('/types-all')).toEqual([completed, storedId, failed, cancelled, deletedId, marker]);
    expect(got('/types-del')).toEqual([deletedId, marker]);
    expect(got('/types-ends')).toEqual([failed, cancelled]);
    expect(rx.on('/types-other')).toEqual([]);

    const bodies = rx.on('/types-all').map((r) => checked(all.secret, r));
    const base = { tenant_id: tenant, timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) };
    expect(bodies).toEqual([
      {
        id: completed,
        event: 'generation.completed',
        ...base,
        execution_id: 'e-1',
        session_id: 's-1',
        tool_name: 'generate_image',
        status: 'completed',
        duration_ms: 1200,
        image_ids: [11, 12],
        execution_url: 'https://imagegen.test/api/executions/e-1',
        image_urls: ['https://imagegen.test/api/images/11', 'https://imagegen.test/api/images/12'],
        error: null,
      },
      {
        id: storedId,
        event: 'image.stored',
        ...base,
        image_id: 11,
        session_id: 's-1',
        operation: 'generate',
        image_url: 'https://imagegen.test/api/images/11',
      },
      expect.objectContaining({
        id: failed,
        event: 'generation.failed',
        status: 'failed',
        image_ids: [],
        image_urls: [],
        error: 'Upstream provider error',
      }),
      expect.objectContaining({ id: cancelled, event: 'generation.cancelled', status: 'cancelled', tool_name: 'edit_image', error: null }),
      { id: deletedId, event: 'image.deleted', ...base, image_id: 11, image_url: 'https://imagegen.test/api/images/11' },
      expect.objectContaining({ id: marker, event: 'image.deleted', image_id: 99 }),
    ]);
    for (const r of rx.on('/types-del')) checked(del.secret, r);
    for (const r of rx.on('/types-ends')) checked(ends.secret, r);
    // The same event reaches each endpoint with the same id and body (signed with each endpoint's own secret).
    expect(rx.on('/types-ends')[0].body).toBe(rx.on('/types-all')[2].body);
    expect(verifyStandard(all.secret, rx.on('/types-ends')[0])).toBe(false);

    const log = await waitFor(async () => {
      const l = (await client.listDeliveries({ webhookId: all.webhook.id }, p)).deliveries;
      return l.every((d) => d.status === 'succeeded') && l;
    });
    expect(log.map((d) => d.eventId).sort()).toEqual([completed, storedId, failed, cancelled, deletedId, marker].sort());
    for (const d of log) expect(d).toMatchObject({ attemptCount: 1, replayOf: undefined });
  });

  it("changes an endpoint's event types on update, and refuses unknown ones", async () => {
    const p = principal('filters');
    const w = await createWh({ url: rx.url('/filters'), events: ['image.deleted', 'image.deleted'] }, p);
    expect(w.webhook.events).toEqual(['image.deleted']);
    const bad = {
      status: 400,
      body: { error: 'Invalid request payload', details: [`events must contain only ${WEBHOOK_EVENT_TYPES.join(', ')}`] },
    };
    await expect(client.createWebhook({ url: rx.url('/filters-x'), events: ['generation.done'] }, p)).rejects.toMatchObject(bad);
    await expect(client.updateWebhook({ id: w.webhook.id, events: { events: ['image.stored', 'nope'] } }, p)).rejects.toMatchObject(bad);
    expect((await client.getWebhook({ id: w.webhook.id }, p)).events).toEqual(['image.deleted']);

    const u = await client.updateWebhook({ id: w.webhook.id, events: { events: ['generation.completed'] } }, p);
    expect(u.events).toEqual(['generation.completed']);
    // Only the new subscription applies: the deletion is not sent, the completion after it is.
    await publishEvent('library.image_deleted', deleted('filters', 5));
    const done = await publishEvent(
      'generation.execution_finished',
      finished('filters', { executionId: 'e-f', status: 'completed', imageIds: [6] }),
    );
    await waitFor(() => rx.on('/filters').length > 0, { message: 'the completion' });
    expect(rx.on('/filters').map((r) => r.headers['webhook-id'])).toEqual([done]);
    // Other fields are left alone; an empty list means every type.
    const again = await client.updateWebhook({ id: w.webhook.id, description: 'x', events: { events: [] } }, p);
    expect(again).toMatchObject({ description: 'x', events: [...WEBHOOK_EVENT_TYPES] });
    expect((await client.updateWebhook({ id: w.webhook.id, enabled: false }, p)).events).toEqual([...WEBHOOK_EVENT_TYPES]);
    await expect(client.updateWebhook({ id: w.webhook.id, events: { events: [] } }, principal('filters-other'))).rejects.toMatchObject({
      status: 404,
    });
  });

  it('replays a delivery as a new delivery of the same event id and body, freshly signed', async () => {
    const p = principal('replay');
    const w = await createWh({ url: rx.url('/replay'), events: ['image.stored'] }, p);
    const ev = await publishEvent('library.image_stored', stored('replay', 21));
    const [original] = await waitFor(async () => {
      const l = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
      return l[0]?.status === 'succeeded' && l;
    });
    expect(original).toMatchObject({ eventId: ev, event: 'image.stored', attemptCount: 1 });

    const replay = await client.replayDelivery({ webhookId: w.webhook.id, deliveryId: original.id }, p);
    expect(replay).toMatchObject({
      eventId: ev,
      replayOf: original.id,
      event: 'image.stored',
      status: 'pending',
      attemptCount: 0,
      payload: original.payload,
    });
    expect(replay.id).not.toBe(original.id);
    await waitFor(() => rx.on('/replay').length === 2, { message: 'the replay received' });
    const [first, second] = rx.on('/replay');
    expect(second.headers['webhook-id']).toBe(ev);
    expect(second.body).toBe(first.body);
    expect(checked(w.secret, second)).toEqual(checked(w.secret, first));
    const log = await waitFor(async () => {
      const l = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
      return l.every((d) => d.status === 'succeeded') && l;
    });
    expect(log.map((d) => [d.id, d.replayOf])).toEqual([
      [replay.id, original.id],
      [original.id, undefined],
    ]);

    // Not found: a malformed id, another endpoint's delivery, another tenant's endpoint. A pending one: 409.
    const other = await createWh({ url: rx.url('/replay-other'), events: [] }, p);
    for (const [webhookId, deliveryId] of [
      [w.webhook.id, 'not-a-uuid'],
      [w.webhook.id, randomUUID()],
      [other.webhook.id, original.id],
    ] as const) {
      await expect(client.replayDelivery({ webhookId, deliveryId }, p)).rejects.toMatchObject({
        status: 404,
        body: { error: 'Delivery not found' },
      });
    }
    await expect(client.replayDelivery({ webhookId: w.webhook.id, deliveryId: original.id }, principal('replay-x'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Webhook not found' },
    });
    await client.updateWebhook({ id: other.webhook.id, enabled: false }, p);
    const held = await client.testWebhook({ id: other.webhook.id }, p);
    await expect(client.replayDelivery({ webhookId: other.webhook.id, deliveryId: held.id }, p)).rejects.toMatchObject({
      status: 409,
      body: { error: 'Delivery is still pending' },
    });
  });

  it('a delivery queued before event ids existed keeps its own id as webhook-id', async () => {
    const p = principal('legacy');
    const w = await createWh({ url: rx.url('/legacy'), events: [] }, p);
    const id = randomUUID();
    const body = JSON.stringify({ event: 'quota.warning', threshold: 80, tenant_id: 'legacy' });
    await sql`
      INSERT INTO deliveries (id, endpoint_id, tenant_id, event, source_event_id, payload, next_attempt_at)
      VALUES (${id}, ${w.webhook.id}, 'legacy', 'quota.warning', ${randomUUID()}, ${body}, now())`;
    await client.updateWebhook({ id: w.webhook.id, enabled: true }, p); // wakes the loop
    await waitFor(() => rx.on('/legacy').length === 1, { message: 'the legacy delivery' });
    expect(rx.on('/legacy')[0].headers['webhook-id']).toBe(id);
    expect(verifyStandard(w.secret, rx.on('/legacy')[0])).toBe(true);
    const [d] = (await client.listDeliveries({ webhookId: w.webhook.id }, p)).deliveries;
    expect(d).toMatchObject({ id, eventId: id });
  });
});

describe('signing and schedule', () => {
  it('signs with both schemes from one whsec_ secret (Standard Webhooks test vector)', () => {
    // From the Standard Webhooks specification's reference tests.
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
    const ts = 1614265330;
    const body = '{"test": 2432232314}';
    expect(standardSignature(secret, id, ts, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
    // RFC-style known answer: HMAC-SHA256(key 'key', 'The quick brown fox jumps over the lazy dog').
    expect(legacySignature('key', 'The quick brown fox jumps over the lazy dog')).toBe(
      'sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    );
  });

  it('seals secrets with the credentials key', () => {
    const box = new SecretBox(randomBytes(32).toString('base64'));
    const sealed = box.seal('whsec_abc');
    expect(sealed.startsWith('enc:v1:')).toBe(true);
    expect(box.open(sealed)).toBe('whsec_abc');
    expect(new SecretBox().open(new SecretBox().seal('whsec_abc'))).toBe('whsec_abc');
    expect(() => new SecretBox(randomBytes(32).toString('base64')).open(sealed)).toThrow();
  });

  it('documented retry schedule: 30 s base, x4, capped at 6 h, +-25% jitter', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(n, DEFAULT_POLICY, mid))).toEqual([
      30_000, 120_000, 480_000, 1_920_000, 7_680_000, 21_600_000, 21_600_000,
    ]);
    expect(retryDelayMs(1, DEFAULT_POLICY, () => 0)).toBe(22_500);
    expect(retryDelayMs(1, DEFAULT_POLICY, () => 1)).toBe(37_500);
    // The cap bounds the jittered delay too: never longer than 6 h (WEBHOOK_RETRY_MAX_MS, "longest delay").
    for (const n of [6, 7, 10]) expect(retryDelayMs(n, DEFAULT_POLICY, () => 1)).toBe(21_600_000);
    expect(retryDelayMs(7, DEFAULT_POLICY, () => 0)).toBe(16_200_000);
  });
});
