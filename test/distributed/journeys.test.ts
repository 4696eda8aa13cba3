import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../../services/webhook-dispatcher/test/receiver.js';
import { noisePng, startImageServer } from '../e2e/usage-support.js';
import { waitFor } from '../support/wait.js';
import { type Journey, metricValue, type PrivateNats, startJourney, startPrivateNats } from './harness.js';

/**
 * The distributed shape (issue 9): every service is its own OS process, talking gRPC over loopback,
 * events on a private JetStream server (so it can be restarted without touching the machine's NATS on
 * 4222), the machine's PostgreSQL (fresh database) and Redis, images in an in-test S3 server. The main
 * journeys run through the gateway; then usage-metering is killed while images are generated and NATS is
 * restarted, and no usage is lost.
 */

let nats: PrivateNats;
let rx: Receiver;
let images: Awaited<ReturnType<typeof startImageServer>>;
let j: Journey;

beforeAll(async () => {
  nats = await startPrivateNats();
  rx = await startReceiver();
  images = await startImageServer();
  j = await startJourney({
    natsUrl: nats.url,
    env: {
      WEBHOOK_CA_FILE: rx.caFile,
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_POLL_MS: '100',
      USAGE_TENANT_CACHE_MS: '500',
    },
  });
}, 240_000);

afterAll(async () => {
  await j?.stop();
  await images?.stop();
  await rx?.stop();
  await nats?.close();
}, 60_000);

const currentMonth = () => new Date().toISOString().slice(0, 7);

async function usageImages(key: string): Promise<number> {
  const r = await j.api('/api/usage', { key });
  if (r.status !== 200) return -1;
  const month = (r.body.data.months as { month: string; total_images: number }[]).find((m) => m.month === currentMonth());
  return month?.total_images ?? 0;
}

async function storedImages(key: string): Promise<number> {
  const r = await j.api('/api/images?limit=100', { key });
  expect(r.status).toBe(200);
  return r.body.pagination.total as number;
}

describe('journeys through the gateway, one process per service', () => {
  it('create tenant, generate, list, edit; files in S3; usage updated', async () => {
    const t = await j.createTenant();
    const gen = await j.api('/api/images', { key: t.liveKey, body: { prompt: 'a lighthouse at dusk', n: 2 } });
    expect(gen.status, JSON.stringify(gen.body)).toBe(200);
    expect(gen.body.data.metadata).toMatchObject({ requested: 2, generated: 2 });
    const [first] = gen.body.data.images;
    expect(first.full_url).toMatch(new RegExp(`^${j.env.S3_ENDPOINT}/`));
    const file = await fetch(first.full_url);
    expect(file.status).toBe(200);
    expect(
      Buffer.from(await file.arrayBuffer())
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');

    const list = await j.api('/api/images', { key: t.liveKey });
    expect(list.status).toBe(200);
    expect(list.body.pagination.total).toBe(2);
    expect(list.body.data.map((i: { id: number }) => i.id)).toContain(first.record_id);

    const edit = await j.api('/api/edit-image', {
      key: t.liveKey,
      body: { image_id: first.record_id, prompt: 'the same lighthouse at night' },
    });
    expect(edit.status, JSON.stringify(edit.body)).toBe(200);
    expect(edit.body.parentImageId).toBe(first.record_id);
    const detail = await j.api(`/api/images/${edit.body.recordId}`, { key: t.liveKey });
    expect(detail.body.data).toMatchObject({ operation: 'edit' });
    // Content Credentials: the library process signed both, the edit naming its parent (issue 39).
    expect(detail.body.data.contentCredentials).toEqual({ present: true, validationState: 'Trusted', issuer: 'imagegen development' });
    const credentials = await j.api(`/api/images/${edit.body.recordId}/credentials`, { key: t.liveKey });
    expect(credentials.body.data).toMatchObject({ present: true, validationState: 'Trusted' });
    expect(Object.keys(credentials.body.data.manifestStore.manifests)).toHaveLength(2);

    // Another tenant sees none of it.
    const other = await j.createTenant();
    expect((await j.api(`/api/images/${first.record_id}`, { key: other.liveKey })).status).toBe(404);

    // ImageStored -> outbox (library) -> JetStream -> usage-metering consumer.
    await waitFor(async () => (await usageImages(t.liveKey)) === 3, { message: 'usage to count 3 images', timeout: 30_000, interval: 200 });
    const usage = await j.api('/api/usage', { key: t.liveKey });
    expect(usage.body.data.quota.monthlyUsedMb).toBeGreaterThanOrEqual(0);
  });

  it('sends the quota webhook when an upload fills the quota', async () => {
    const q = await j.createTenant({ monthly_quota_mb: 1 });
    const hook = await j.api('/api/webhooks', {
      key: q.liveKey,
      body: { url: rx.url(`/quota-${q.tenantId}`), events: ['quota.warning', 'quota.exceeded'] },
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const up = await j.api('/api/upload-for-editing', { key: q.liveKey, body: { image_url: images.serve(noisePng(620, 620)) } });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    // ImageStored -> usage (QuotaCrossed, outbox) -> JetStream -> webhook-dispatcher -> HTTPS receiver.
    await waitFor(async () => rx.on(`/quota-${q.tenantId}`).length >= 2, { message: 'two quota webhooks', timeout: 45_000, interval: 200 });
    const got = rx
      .on(`/quota-${q.tenantId}`)
      .map((r) => ({ headers: r.headers, body: JSON.parse(r.body) }))
      .sort((a, b) => a.body.threshold - b.body.threshold);
    expect(got.map((g) => g.body.event)).toEqual(['quota.warning', 'quota.exceeded']);
    for (const g of got) {
      expect(g.body).toMatchObject({ tenant_id: q.tenantId, billing_period: currentMonth(), quota_mb: 1 });
      expect(g.headers['x-webhook-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    }
  });

  it('loses no usage when usage-metering is killed while images are generated', async () => {
    const t = await j.createTenant();
    // Requests in flight (the sandbox upstream takes a moment), the consumer busy with their events.
    const requests = Array.from({ length: 6 }, (_, i) =>
      j.api('/api/images', { key: t.liveKey, body: { prompt: `[[delay:${150 * (i + 1)}]] kill test ${i}` } }),
    );
    await Promise.race(requests);
    const killed = await j.kill('usage-metering', 'SIGKILL');
    expect(killed.signal).toBe('SIGKILL');
    const results = await Promise.all(requests);
    // Requests whose quota check fell into the outage fail cleanly (503); the others stored their image.
    for (const r of results) expect([200, 503], JSON.stringify(r.body)).toContain(r.status);
    const ok = results.filter((r) => r.status === 200).length;
    expect(ok).toBeGreaterThanOrEqual(1);

    await j.start('usage-metering');
    // Callers reconnect within their gRPC backoff (at most 2 s).
    await waitFor(async () => (await j.api('/api/images', { key: t.liveKey, body: { prompt: 'after the restart' } })).status === 200, {
      message: 'a generation after the restart',
      timeout: 20_000,
      interval: 500,
    });

    const stored = await storedImages(t.liveKey);
    expect(stored).toBeGreaterThanOrEqual(ok + 1);
    await waitFor(async () => (await usageImages(t.liveKey)) === stored, {
      message: `usage to count all ${stored} stored images`,
      timeout: 45_000,
      interval: 200,
    });
    // Exactly once: no double counting after redelivery. What the killed process had taken but not acked comes
    // back once its ack wait is over; once every event is acked nothing more can come.
    await waitFor(
      async () => {
        const c = await nats.consumer(j.env.EVENTS_PREFIX, 'usage-metering');
        return c !== undefined && c.ackPending === 0 && c.pending === 0;
      },
      { message: "usage-metering's consumer to have acked every event (redeliveries included)", timeout: 30_000, interval: 200 },
    );
    expect(await usageImages(t.liveKey)).toBe(stored);
    const m = await (await fetch(`${j.services.get('usage-metering')!.opsUrl}/metrics`)).text();
    expect(metricValue(m, 'imagegen_events_consumed_total', { outcome: 'ok' })).toBeGreaterThan(0);
  });

  it('loses nothing when NATS restarts: the outbox holds events until it is back', async () => {
    const t = await j.createTenant();
    // The TenantChanged event goes out before the outage: tenancy's outbox is empty.
    const tenancy = j.services.get('tenancy')!;
    await waitFor(
      async () => metricValue(await (await fetch(`${tenancy.opsUrl}/metrics`)).text(), 'imagegen_outbox_lag', { schema: 'tenancy' }) === 0,
      { message: 'tenancy outbox drained', timeout: 15_000, interval: 100 },
    );
    const library = j.services.get('library')!;
    const usage = j.services.get('usage-metering')!;
    await nats.stop();
    try {
      // The request path needs no bus: gateway -> generation -> usage (quota) -> library all answer.
      for (const i of [1, 2]) {
        const r = await j.api('/api/images', { key: t.liveKey, body: { prompt: `while the bus is down ${i}` } });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
      }
      const lag = await waitFor(
        async () => {
          const v = metricValue(await (await fetch(`${library.opsUrl}/metrics`)).text(), 'imagegen_outbox_lag', { schema: 'library' });
          return v !== undefined && v >= 2 ? v : undefined;
        },
        { message: 'library outbox lag', timeout: 15_000, interval: 200 },
      );
      expect(lag).toBeGreaterThanOrEqual(2);
      // usage-metering's gRPC answers from PostgreSQL: it stays ready (in its Service) while the bus is gone.
      expect((await fetch(`${usage.opsUrl}/readyz`)).status).toBe(200);
      expect(await usageImages(t.liveKey)).toBe(0);
    } finally {
      await nats.start();
    }
    await waitFor(async () => (await usageImages(t.liveKey)) === 2, {
      message: 'usage to count both images',
      timeout: 60_000,
      interval: 200,
    });
    await waitFor(
      async () => metricValue(await (await fetch(`${library.opsUrl}/metrics`)).text(), 'imagegen_outbox_lag', { schema: 'library' }) === 0,
      { message: 'library outbox drained', timeout: 30_000, interval: 200 },
    );
    await waitFor(async () => (await fetch(`${usage.opsUrl}/readyz`)).status === 200, {
      message: 'usage-metering ready again',
      timeout: 15_000,
      interval: 200,
    });
  });

  it('every process serves /livez, /readyz and /metrics; the gateway refuses /metrics through a proxy', async () => {
    for (const sp of j.services.values()) {
      expect((await fetch(`${sp.opsUrl}/livez`)).status, sp.name).toBe(200);
      await waitFor(async () => (await fetch(`${sp.opsUrl}/readyz`)).status === 200, {
        message: `${sp.name} ready`,
        timeout: 15_000,
        interval: 200,
      });
      const text = await (await fetch(`${sp.opsUrl}/metrics`)).text();
      expect(text, sp.name).toContain(`service="${sp.name}"`);
    }
    const gw = j.services.get('gateway')!;
    expect((await fetch(`${gw.opsUrl}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } })).status).toBe(404);
    const gen = await (await fetch(`${j.services.get('generation')!.opsUrl}/metrics`)).text();
    expect(
      metricValue(gen, 'imagegen_grpc_server_handled_total', {
        method: '/imagegen.generation.v1.GenerationService/GenerateImages',
        code: 'OK',
      }),
    ).toBeGreaterThan(0);
    const gwm = await (await fetch(`${gw.opsUrl}/metrics`)).text();
    expect(metricValue(gwm, 'imagegen_http_requests_total', { route: '/api/images', method: 'POST', status_code: '200' })).toBeGreaterThan(
      0,
    );
  });
});
