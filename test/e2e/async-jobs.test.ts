/**
 * Issue 37: async jobs over REST. Every operation that calls a provider answers 202 with its queued job when sent
 * `Prefer: respond-async`; GET /api/executions/:executionId then carries the result in the synchronous answer's
 * form, and the execution's stream ends with `complete` holding it. Idempotency-Key makes a retried submit return
 * the same job. POST /api/executions/:executionId/cancel stops a queued job before it runs and a running one with
 * its provider call; nothing of a cancelled job is listed or billed. Every answer is checked against the document.
 */
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { type ImageServer, startImageServer } from './products-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let img: ImageServer;

const ASYNC = { prefer: 'respond-async' };

beforeAll(async () => {
  // One job of a tenant runs at a time, so a second one waits queued.
  [s, img] = await Promise.all([
    startTestStack({ env: { RATE_LIMIT_DISABLED: '1', JOBS_RUNNING_PER_TENANT: '1', JOB_POLL_MS: '100' } }),
    startImageServer(),
  ]);
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
});
afterAll(async () => {
  await img?.close();
  await s?.stop();
});

const post = (path: string, body: unknown, headers: Record<string, string> = ASYNC, key = t.liveKey) =>
  s.api(path, { method: 'POST', key, body, headers });
const get = (path: string, key = t.liveKey) => s.api(path, { key });

/** The execution once it has ended. */
async function ended(executionId: string, key = t.liveKey) {
  return waitFor(
    async () => {
      const r = await get(`/api/executions/${executionId}`, key);
      return ['completed', 'failed', 'cancelled'].includes(r.body.execution?.status) && r.body.execution;
    },
    { timeout: 30_000, message: `execution ${executionId} to end` },
  );
}

/** Upstream prompts the sandbox received. */
async function upstreamPrompts(): Promise<string[]> {
  const r = await (await fetch(`${s.sandboxUrl}/_sandbox/requests`)).json();
  return (r.requests as { prompt: string }[]).map((x) => x.prompt);
}

function accepted(r: Awaited<ReturnType<typeof post>>) {
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  const d = r.body.data;
  expect(d).toEqual({
    executionId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    status: 'queued',
    position: expect.any(Number),
    statusUrl: `/api/executions/${d.executionId}`,
    streamUrl: `/api/executions/${d.executionId}/stream`,
    cancelUrl: `/api/executions/${d.executionId}/cancel`,
  });
  expect(r.headers.get('location')).toBe(d.statusUrl);
  expect(r.headers.get('preference-applied')).toBe('respond-async');
  return d as { executionId: string; position: number; statusUrl: string; streamUrl: string; cancelUrl: string };
}

describe('Prefer: respond-async', () => {
  it('each generating operation: 202 at once, then the result in its synchronous form on the execution', async () => {
    const source = await post('/api/images', { prompt: 'a source to edit' }, {});
    expect(source.status).toBe(200);
    const sourceId = source.body.data.images[0].record_id ?? source.body.data.images[0].id;
    const created = await Promise.all(
      ['Async Knight', 'Async Squire'].map((character_name) =>
        post('/api/characters', { character_name, base_prompt: 'a knight in silver armour' }, {}),
      ),
    );
    for (const c of created) expect(c.status, JSON.stringify(c.body)).toBe(200);
    const [char, char2] = created.map((c) => c.body.data);
    const product = await post('/api/products', { product_name: 'Async Mug', product_url: `${img.url}/red.png` }, {});
    expect(product.status, JSON.stringify(product.body)).toBe(200);

    const cases: [string, Record<string, unknown>, (sync: any) => unknown][] = [
      ['/api/images', { prompt: 'an async lighthouse', n: 2 }, (b) => Object.keys(b.data).sort()],
      ['/api/edit-image', { image_id: sourceId, prompt: 'make it night' }, (b) => Object.keys(b).sort()],
      [`/api/characters/${char.id}/generate`, { scene_prompt: 'riding at dawn' }, (b) => Object.keys(b.data).sort()],
      [
        '/api/characters/generate-multi',
        { character_ids: [char.id, char2.id], scene_prompt: 'a joust at noon' },
        (b) => Object.keys(b.data).sort(),
      ],
      [
        `/api/products/${product.body.data.id}/generate`,
        { scene_prompt: 'on a kitchen table', number_of_images: 1 },
        (b) => Object.keys(b.data).sort(),
      ],
    ];
    for (const [path, body, shape] of cases) {
      const job = accepted(await post(path, body));
      const e = await ended(job.executionId);
      expect(e.status, `${path}: ${e.error}`).toBe('completed');
      const sync = await post(path, body, {});
      expect(sync.status, `${path} sync`).toBe(200);
      // The same form as the synchronous answer (every field; the values are of another execution).
      expect(shape(e.result), path).toEqual(shape(sync.body));
      expect(JSON.stringify(e.result)).toContain(e.sessionId);
    }
    // The async images are in the gallery like any others.
    const list = await get('/api/images?limit=100');
    expect(list.body.pagination.total).toBeGreaterThanOrEqual(12);
  }, 120_000);

  it('the stream follows a queued job to `complete`, which holds the result', async () => {
    const job = accepted(await post('/api/images', { prompt: 'a streamed comet [[delay:300]]' }));
    const events: { type: string; data: any }[] = [];
    const es = new EventSource(`${s.baseUrl}${job.streamUrl}?interval=100`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), 'x-api-key': t.liveKey } }),
    });
    for (const type of ['status', 'complete', 'error'])
      es.addEventListener(type, (ev: Event) => {
        const data = (ev as MessageEvent).data;
        if (data !== undefined) events.push({ type, data: JSON.parse(data) });
      });
    try {
      const complete = await waitFor(() => events.find((x) => x.type === 'complete'), { timeout: 20_000 });
      expect(complete.data.executionId).toBe(job.executionId);
      expect(complete.data.result.data.images).toHaveLength(1);
      expect(complete.data.result.data.executionId).toBe(job.executionId);
      expect(events.filter((x) => x.type === 'status').map((x) => x.data.status)).toContain('completed');
    } finally {
      es.close();
    }
  });

  it('Idempotency-Key: a retried submit answers the same job and starts no second one', async () => {
    const key = `async-${Date.now()}`;
    const body = { prompt: `an idempotent owl ${key}` };
    const first = accepted(await post('/api/images', body, { ...ASYNC, 'idempotency-key': key }));
    const again = await post('/api/images', body, { ...ASYNC, 'idempotency-key': key });
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.data.executionId).toBe(first.executionId);
    await ended(first.executionId);
    expect((await upstreamPrompts()).filter((p) => p.includes(key))).toHaveLength(1);
  });

  it('a bad body is refused at once (400, nothing queued); another tenant cannot see or cancel the job; no key is 401', async () => {
    const bad = await post('/api/images', { prompt: 'x', n: 9 });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('Invalid request payload');
    const job = accepted(await post('/api/images', { prompt: 'a private job' }));
    expect((await get(job.statusUrl, other.liveKey)).status).toBe(404);
    expect((await post(job.cancelUrl, undefined, {}, other.liveKey)).status).toBe(404);
    expect((await s.api(job.cancelUrl, { method: 'POST' })).status).toBe(401);
    expect((await post('/api/executions/not-a-uuid/cancel', undefined, {})).status).toBe(404);
    await ended(job.executionId);
  });
});

describe('POST /api/executions/:executionId/cancel', () => {
  it('a queued job never runs, a running one stops; both end cancelled with nothing listed or billed; a finished one is 409', async () => {
    const tenant = await s.createTenant();
    const mark = `cancel-${Date.now()}`;
    const running = accepted(await post('/api/images', { prompt: `${mark} running [[delay:5000]]` }, ASYNC, tenant.liveKey));
    const queued = accepted(await post('/api/images', { prompt: `${mark} queued` }, ASYNC, tenant.liveKey));
    await waitFor(async () => (await get(running.statusUrl, tenant.liveKey)).body.execution.status === 'running');
    const q = await get(queued.statusUrl, tenant.liveKey);
    expect([q.body.execution.status, q.body.execution.position]).toEqual(['queued', 1]);

    const c1 = await post(queued.cancelUrl, undefined, {}, tenant.liveKey);
    expect(c1.status).toBe(200);
    expect(c1.body.execution.status).toBe('cancelled');
    const c2 = await post(running.cancelUrl, undefined, {}, tenant.liveKey);
    expect(c2.status).toBe(200);
    expect(c2.body.execution.cancelRequested).toBe(true);
    const e = await ended(running.executionId, tenant.liveKey);
    expect([e.status, e.error]).toEqual(['cancelled', 'Execution cancelled']);
    expect((await ended(queued.executionId, tenant.liveKey)).status).toBe('cancelled');

    // The queued one never reached the provider; nothing is listed or billed.
    const prompts = (await upstreamPrompts()).filter((p) => p.includes(mark));
    expect(prompts).toHaveLength(1);
    expect(prompts[0]).toContain('running');
    expect((await get('/api/images', tenant.liveKey)).body.pagination.total).toBe(0);
    // Billing: a marker generation after the cancels is the only operation and image counted once it shows.
    expect((await post('/api/images', { prompt: `${mark} marker` }, {}, tenant.liveKey)).status).toBe(200);
    const month = await waitFor(async () => {
      const u = await get('/api/usage', tenant.liveKey);
      return u.body.data.months[0]?.total_images === 1 && u.body.data.months[0];
    });
    expect([month.total_operations, month.total_images]).toEqual([1, 1]);

    const again = await post(running.cancelUrl, undefined, {}, tenant.liveKey);
    expect([again.status, again.body.error]).toEqual([409, 'Execution already cancelled']);
  }, 60_000);
});
