import { WEBHOOK_EVENT_TYPES } from '@imagegen/api-schemas/vocab';
import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Received, type Receiver, startReceiver, verifyWebhook } from '../../services/webhook-dispatcher/test/receiver.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { callTool, mcpClient } from './mcp-support.js';
import { noisePng, startImageServer } from './usage-support.js';

/**
 * Issue 37: webhooks for every event a tenant cares about, end to end through the gateway. Each event type reaches a
 * local HTTPS receiver from real work (a generation that completes, one that fails, one cancelled, an image stored
 * and deleted, a quota crossed), verified as a Standard Webhooks receiver would (verifyWebhook) and checked against
 * the schema of its entry in the OpenAPI document's `webhooks` section (/docs/json); an endpoint's event filter, set
 * on create and update (REST and MCP); the delivery log and a replay.
 */

let s: TestStack;
let rx: Receiver;
let images: Awaited<ReturnType<typeof startImageServer>>;
/** The documented body schema of each event type (the OpenAPI `webhooks` entries, by their x-webhook-events). */
const documented = new Map<string, ValidateFunction>();

beforeAll(async () => {
  rx = await startReceiver();
  // The stack trusts the receiver's self-signed certificate; fast retries (read by the dispatcher at start).
  s = await startTestStack({ env: { WEBHOOK_CA_FILE: rx.caFile, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_POLL_MS: '10' } });
  images = await startImageServer();
  const doc = (await (await fetch(`${s.baseUrl}/docs/json`)).json()) as { webhooks: Record<string, { post: any }> };
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  for (const { post } of Object.values(doc.webhooks)) {
    const validate = ajv.compile(post.requestBody.content['application/json'].schema);
    for (const event of post['x-webhook-events'] as string[]) documented.set(event, validate);
  }
});
afterAll(async () => {
  await images?.stop();
  await s?.stop();
  await rx?.stop();
});

const tenant = (body: Record<string, unknown> = {}) => s.createTenant({ rate_limit_per_minute: 100_000, ...body });
const createHook = async (t: TestTenant, path: string, events?: string[]) => {
  const r = await s.api('/api/webhooks', { key: t.liveKey, body: { url: rx.url(path), ...(events ? { events } : {}) } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.data as { id: number; secret: string; events: string[] };
};

/** A delivery as a receiver sees it: verified (signature, timestamp), its body as documented, its id the webhook-id. */
function verified(secret: string, r: Received): Record<string, any> {
  const body = verifyWebhook(secret, r);
  const validate = documented.get(body.event as string);
  expect(validate, `a documented webhook for ${body.event}`).toBeDefined();
  expect(validate?.(body), `${body.event}: ${JSON.stringify(validate?.errors)}`).toBe(true);
  expect(body.id).toBe(r.headers['webhook-id']);
  return body;
}

const bodies = (path: string) => rx.on(path).map((r) => JSON.parse(r.body) as Record<string, any>);
const receivedWhere = (path: string, f: (b: Record<string, any>) => boolean) => bodies(path).some(f);
const generate = async (t: TestTenant, prompt: string, headers: Record<string, string> = {}) =>
  s.api('/api/images', { key: t.liveKey, body: { prompt, n: 1 }, headers });

describe('webhooks for every event type', () => {
  it('delivers generation.completed, .failed, .cancelled, image.stored and image.deleted, signed and as documented', async () => {
    const T = await tenant();
    const hook = await createHook(T, '/every');
    expect(hook.events).toEqual([...WEBHOOK_EVENT_TYPES]);

    const ok = await generate(T, 'a lighthouse at dusk');
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const executionId = ok.body.data.executionId as string;
    const imageId = ok.body.data.images[0].record_id as number;
    const failed = await generate(T, 'refused [[fail:400]]');
    expect(failed.status).toBe(400);
    // A queued job cancelled before it ran (it would wait out a 30 s upstream delay otherwise).
    const job = await generate(T, 'slow [[delay:30000]]', { prefer: 'respond-async' });
    expect(job.status, JSON.stringify(job.body)).toBe(202);
    const jobId = job.body.data.executionId as string;
    const cancel = await s.api(`/api/executions/${jobId}/cancel`, { key: T.liveKey, method: 'POST' });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
    expect((await s.api(`/api/images/${imageId}`, { key: T.liveKey, method: 'DELETE' })).status).toBe(204);

    await waitFor(
      () =>
        receivedWhere('/every', (b) => b.event === 'generation.completed') &&
        receivedWhere('/every', (b) => b.event === 'image.stored') &&
        receivedWhere('/every', (b) => b.event === 'image.deleted' && b.image_id === imageId) &&
        receivedWhere('/every', (b) => b.event === 'generation.failed') &&
        receivedWhere('/every', (b) => b.event === 'generation.cancelled' && b.execution_id === jobId),
      { message: 'five event types at /every', timeout: 20_000 },
    );
    const got = rx.on('/every').map((r) => verified(hook.secret, r));
    const byEvent = (event: string) => got.filter((b) => b.event === event);
    const base = { tenant_id: T.tenantId, timestamp: expect.any(String), id: expect.any(String) };

    expect(byEvent('generation.completed')).toEqual([
      {
        ...base,
        event: 'generation.completed',
        execution_id: executionId,
        session_id: ok.body.data.metadata.session_id,
        tool_name: expect.any(String),
        status: 'completed',
        duration_ms: expect.any(Number),
        image_ids: [imageId],
        execution_url: `${s.baseUrl}/api/executions/${executionId}`,
        image_urls: [`${s.baseUrl}/api/images/${imageId}`],
        error: null,
      },
    ]);
    expect(byEvent('image.stored')).toEqual([
      {
        ...base,
        event: 'image.stored',
        image_id: imageId,
        session_id: ok.body.data.metadata.session_id,
        operation: 'generate',
        image_url: `${s.baseUrl}/api/images/${imageId}`,
      },
    ]);
    expect(byEvent('generation.failed')).toEqual([
      expect.objectContaining({ event: 'generation.failed', status: 'failed', image_ids: [], image_urls: [] }),
    ]);
    expect(byEvent('generation.cancelled')).toEqual([
      expect.objectContaining({ event: 'generation.cancelled', status: 'cancelled', execution_id: jobId, image_ids: [] }),
    ]);
    expect(byEvent('image.deleted')).toEqual([
      { ...base, event: 'image.deleted', image_id: imageId, image_url: `${s.baseUrl}/api/images/${imageId}` },
    ]);
    // The links work with the tenant's key: the execution's (the image is gone now).
    const execution = await s.api(new URL(byEvent('generation.completed')[0].execution_url).pathname, { key: T.liveKey });
    expect(execution.status).toBe(200);
    // Every event once: five types, five deliveries, each with its own event id.
    expect(got).toHaveLength(5);
    expect(new Set(got.map((b) => b.id)).size).toBe(5);
  });

  it('delivers quota.warning and quota.exceeded as documented', async () => {
    const Q = await tenant({ monthly_quota_mb: 1 });
    const hook = await createHook(Q, '/quota-docs', ['quota.warning', 'quota.exceeded']);
    const up = await s.api('/api/upload-for-editing', { key: Q.liveKey, body: { image_url: images.serve(noisePng(620, 620)) } });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    await waitFor(() => rx.on('/quota-docs').length >= 2, { message: 'two quota webhooks', timeout: 20_000 });
    const got = rx.on('/quota-docs').map((r) => verified(hook.secret, r));
    expect(got.map((b) => b.event).sort()).toEqual(['quota.exceeded', 'quota.warning']);
  });

  it('an endpoint subscribed to image.deleted gets nothing else; filters are set on create and update', async () => {
    const F = await tenant();
    const all = await createHook(F, '/filter-all');
    const del = await createHook(F, '/filter-del', ['image.deleted']);
    expect(del.events).toEqual(['image.deleted']);

    const ok = await generate(F, 'a red kite');
    expect(ok.status).toBe(200);
    const imageId = ok.body.data.images[0].record_id as number;
    expect((await generate(F, 'refused [[fail:400]]')).status).toBe(400);
    // Consumed (the other endpoint has them): a delivery of these to /filter-del would be queued by now, ahead of
    // the deletion below, and deliveries to an endpoint go out oldest first.
    await waitFor(
      () =>
        receivedWhere('/filter-all', (b) => b.event === 'generation.completed' && b.image_ids[0] === imageId) &&
        receivedWhere('/filter-all', (b) => b.event === 'image.stored' && b.image_id === imageId) &&
        receivedWhere('/filter-all', (b) => b.event === 'generation.failed'),
      { message: 'the other events at /filter-all', timeout: 20_000 },
    );
    expect((await s.api(`/api/images/${imageId}`, { key: F.liveKey, method: 'DELETE' })).status).toBe(204);
    // The positive marker: the deletion arrives; nothing came before it.
    await waitFor(() => rx.on('/filter-del').length > 0, { message: 'image.deleted at /filter-del', timeout: 20_000 });
    expect(rx.on('/filter-del').map((r) => verified(del.secret, r))).toEqual([
      expect.objectContaining({ event: 'image.deleted', image_id: imageId }),
    ]);
    const log = await s.api(`/api/webhooks/${del.id}/deliveries`, { key: F.liveKey });
    expect(log.body.data.map((d: { event: string }) => d.event)).toEqual(['image.deleted']);
    expect(all.events).toEqual([...WEBHOOK_EVENT_TYPES]);

    // Update: the new set; an unknown type is refused in the spec's envelope, on create and update alike.
    const patched = await s.api(`/api/webhooks/${del.id}`, {
      key: F.liveKey,
      method: 'PATCH',
      body: { events: ['image.deleted', 'generation.completed'] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data.events).toEqual(['image.deleted', 'generation.completed']);
    for (const [path, method] of [
      [`/api/webhooks/${del.id}`, 'PATCH'],
      ['/api/webhooks', 'POST'],
    ] as const) {
      const r = await s.api(path, { key: F.liveKey, method, body: { url: rx.url('/x'), events: ['image.stored', 'image.exploded'] } });
      expect(r.status, method).toBe(400);
      expect(r.body, method).toEqual({ error: 'Invalid request payload', details: [expect.stringContaining('events')] });
    }
    expect((await s.api(`/api/webhooks/${del.id}`, { key: F.liveKey })).body.data.events).toEqual([
      'image.deleted',
      'generation.completed',
    ]);
  });

  it('lists deliveries with their attempts and replays one: a new delivery of the same event id and body', async () => {
    const P = await tenant();
    const other = await tenant();
    const hook = await createHook(P, '/replay', ['image.stored']);
    rx.respond('/replay', [500, 200]);
    const ok = await generate(P, 'a lantern');
    expect(ok.status).toBe(200);
    const [original] = await waitFor(
      async () => {
        const l = (await s.api(`/api/webhooks/${hook.id}/deliveries`, { key: P.liveKey })).body.data;
        return l[0]?.status === 'succeeded' && l;
      },
      { message: 'the image.stored delivery, after one retry', timeout: 20_000 },
    );
    expect(original).toMatchObject({
      event: 'image.stored',
      attemptCount: 2,
      replayOf: null,
      eventId: rx.on('/replay')[0].headers['webhook-id'],
    });
    expect(original.attempts.map((a: { responseStatus: number }) => a.responseStatus)).toEqual([500, 200]);

    const replayUrl = `/api/webhooks/${hook.id}/deliveries/${original.id}/replay`;
    const replay = await s.api(replayUrl, { key: P.liveKey, method: 'POST', headers: { 'idempotency-key': 'replay-1' } });
    expect(replay.status, JSON.stringify(replay.body)).toBe(202);
    expect(replay.body.data).toMatchObject({
      eventId: original.eventId,
      replayOf: original.id,
      event: 'image.stored',
      status: 'pending',
      attemptCount: 0,
      payload: original.payload,
    });
    // A retried request with the same Idempotency-Key is the same replay.
    const again = await s.api(replayUrl, { key: P.liveKey, method: 'POST', headers: { 'idempotency-key': 'replay-1' } });
    expect(again.body.data.id).toBe(replay.body.data.id);
    await waitFor(() => rx.on('/replay').length === 3, { message: 'the replay received' });
    const [, first, replayed] = rx.on('/replay');
    expect(replayed.headers['webhook-id']).toBe(original.eventId);
    expect(replayed.body).toBe(first.body);
    expect(verified(hook.secret, replayed)).toEqual(verified(hook.secret, first));
    const log = await waitFor(async () => {
      const l = (await s.api(`/api/webhooks/${hook.id}/deliveries`, { key: P.liveKey })).body.data;
      return l.length === 2 && l[0].status === 'succeeded' && l;
    });
    expect(log.map((d: { id: string; replayOf: string | null }) => [d.id, d.replayOf])).toEqual([
      [replay.body.data.id, original.id],
      [original.id, null],
    ]);

    expect((await s.api(replayUrl, { method: 'POST' })).status).toBe(401);
    const foreign = await s.api(replayUrl, { key: other.liveKey, method: 'POST' });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'Webhook not found' });
    const unknown = await s.api(`/api/webhooks/${hook.id}/deliveries/nope/replay`, { key: P.liveKey, method: 'POST' });
    expect(unknown.body).toEqual({ error: 'Delivery not found' });
  });

  it('MCP: create_webhook and update_webhook set the event types', async () => {
    const M = await tenant();
    const mcp = await mcpClient(s.baseUrl, M.liveKey);
    try {
      const created = await callTool(mcp, 'create_webhook', { url: rx.url('/mcp'), events: ['generation.completed'] });
      expect(created.ok, created.text).toBe(true);
      expect(created.json.data.events).toEqual(['generation.completed']);
      const id = created.json.data.id;
      const updated = await callTool(mcp, 'update_webhook', { id, events: ['image.stored', 'image.deleted'], description: 'gallery sync' });
      expect(updated.ok, updated.text).toBe(true);
      expect(updated.json.data).toMatchObject({ id, events: ['image.stored', 'image.deleted'], description: 'gallery sync' });
      const rest = await s.api(`/api/webhooks/${id}`, { key: M.liveKey });
      expect(updated.json).toEqual(rest.body);
      const bad = await callTool(mcp, 'update_webhook', { id, events: ['image.exploded'] });
      expect(bad.ok).toBe(false);
      expect(bad.error).toMatchObject({ status: 400, error: 'Invalid request payload' });
      expect((await callTool(mcp, 'update_webhook', { id })).error).toMatchObject({
        status: 400,
        details: ['enabled, description or events is required'],
      });
      expect((await callTool(mcp, 'create_webhook', { url: rx.url('/mcp2'), events: ['quota.sometimes'] })).ok).toBe(false);
    } finally {
      await mcp.close();
    }
  });
});
