/**
 * Per-tenant caps on open event streams and generations in flight (issue 15 item 5): a tenant at its cap gets
 * 429 `{error, details, retryAfter}` with Retry-After while another tenant is served; slots come back when the
 * requests end, when a stream's client disconnects, and (for a generation whose client disconnected) when the
 * generation the gateway still waits for ends. Shared by two gateways through Redis.
 *
 * The answers are read with plain fetch (the streams are held open, and aborted, by the test itself).
 */
import { createLogger } from '@imagegen/platform';
import { type RunningStack, startStack } from '@imagegen/stack/stack.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { lastSandboxId, receivedSince } from './generation-support.js';
import { callTool, mcpClient } from './mcp-support.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CAPS = { TENANT_MAX_STREAMS: '2', TENANT_MAX_GENERATIONS_IN_FLIGHT: '2', RATE_LIMIT_DISABLED: '1' };
const SLOW_MS = 2500;

interface Res {
  status: number;
  body: any;
  headers: Headers;
}

async function call(base: string, path: string, key: string, body?: unknown, signal?: AbortSignal): Promise<Res> {
  const r = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    // A stream that is not refused would never end: give up instead of hanging the test.
    signal: signal ?? AbortSignal.timeout(20_000),
  });
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: r.status, body: parsed, headers: r.headers };
}

/** An SSE response held open (headers received); `close()` disconnects the client. */
async function openStream(base: string, path: string, key: string): Promise<{ status: number; res: Response; close(): void }> {
  const ac = new AbortController();
  const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': key, accept: 'text/event-stream' }, signal: ac.signal });
  return {
    status: res.status,
    res,
    close: () => ac.abort(),
  };
}

function expectStreamCap(r: Res) {
  expect(r.status).toBe(429);
  expect(r.headers.get('retry-after')).toBe('5');
  expect(r.body).toEqual({
    error: 'Too many concurrent streams',
    details: [expect.stringContaining('at most 2 event streams per tenant')],
    retryAfter: 5,
  });
}

function expectGenerationCap(r: Res) {
  expect(r.status).toBe(429);
  expect(r.headers.get('retry-after')).toBe('5');
  expect(r.body).toEqual({
    error: 'Too many generations in progress',
    details: [expect.stringContaining('at most 2 generations per tenant')],
    retryAfter: 5,
  });
}

/** Waits until the sandbox upstream has received `n` requests after `since` (the generations are in their handler). */
const upstreamGot = (s: TestStack, since: number, n: number) =>
  waitFor(async () => (await receivedSince(s, since)).length >= n, { timeout: 15_000, interval: 100, message: `${n} upstream requests` });

/** Retries a generation while the tenant is at its cap (429) until one is accepted (200) once the slow ones ended. */
const generationAccepted = (s: TestStack, t: TestTenant, prompt: string) =>
  waitFor(
    async () => {
      const r = await call(s.baseUrl, '/api/images', t.liveKey, { prompt });
      if (r.status === 429) return false;
      expect(r.status).toBe(200);
      return true;
    },
    { timeout: SLOW_MS + 10_000, interval: 100, message: 'a free generation slot' },
  );

describe('tenant concurrency caps (one gateway, memory)', () => {
  let s: TestStack;
  let T: TestTenant;
  let U: TestTenant;
  beforeAll(async () => {
    s = await startTestStack({ env: CAPS });
    [T, U] = await Promise.all([s.createTenant(), s.createTenant()]);
    // A session with one execution, for the session log streams.
    for (const t of [T, U])
      expect((await call(s.baseUrl, '/api/images', t.liveKey, { prompt: 'seed', session_id: 'cap-s' })).status).toBe(200);
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('generations in flight: the third of a tenant is 429 while another tenant is served; slots come back when they end', async () => {
    const since = await lastSandboxId(s);
    const slow = [1, 2].map((i) => call(s.baseUrl, '/api/images', T.liveKey, { prompt: `[[delay:${SLOW_MS}]] slow ${i}` }));
    await upstreamGot(s, since, 2);
    expectGenerationCap(await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'one too many' }));
    // The same answer through the contract-checked client: the document declares this 429 body and its headers.
    expect((await s.api('/api/images', { method: 'POST', key: T.liveKey, body: { prompt: 'checked' } })).status).toBe(429);
    // Every generating route counts against the same cap (refused before its handler runs).
    expectGenerationCap(await call(s.baseUrl, '/api/edit-image', T.liveKey, { image_id: 1, prompt: 'edit it' }));
    expectGenerationCap(await call(s.baseUrl, '/api/upload-for-editing', T.liveKey, { image_url: 'https://example.com/a.png' }));
    expectGenerationCap(
      await call(s.baseUrl, '/api/characters/generate-multi', T.liveKey, { character_ids: [1, 2], scene_prompt: 'two friends at a cafe' }),
    );
    expectGenerationCap(await call(s.baseUrl, '/api/characters/1/generate', T.liveKey, { scene_prompt: 'in the park' }));
    expectGenerationCap(await call(s.baseUrl, '/api/products/1/generate', T.liveKey, { scene_prompt: 'on a table' }));
    // Another tenant is not affected.
    expect((await call(s.baseUrl, '/api/images', U.liveKey, { prompt: 'other tenant' })).status).toBe(200);
    // Reads are not generations.
    expect((await call(s.baseUrl, '/api/images?limit=1', T.liveKey)).status).toBe(200);
    for (const r of await Promise.all(slow)) expect(r.status).toBe(200);
    // Both slots are back.
    const again = await Promise.all([1, 2].map((i) => call(s.baseUrl, '/api/images', T.liveKey, { prompt: `again ${i}` })));
    expect(again.map((r) => r.status)).toEqual([200, 200]);
  });

  it('a generation whose client disconnected keeps its slot until it ends, then gives it back', async () => {
    const since = await lastSandboxId(s);
    const ac = new AbortController();
    const gone = [1, 2].map((i) =>
      call(s.baseUrl, '/api/images', T.liveKey, { prompt: `[[delay:${SLOW_MS}]] abandoned ${i}` }, ac.signal).catch((e) => e),
    );
    await upstreamGot(s, since, 2);
    const abandonedAt = Date.now();
    ac.abort();
    await Promise.all(gone);
    // The gateway still waits for (and bills) both generations: the tenant is still at its cap.
    expectGenerationCap(await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'while they run' }));
    // ... until they end: then both slots are back.
    await generationAccepted(s, T, 'after they ended');
    expect(Date.now() - abandonedAt).toBeGreaterThan(SLOW_MS / 2);
    const both = await Promise.all([1, 2].map((i) => call(s.baseUrl, '/api/images', T.liveKey, { prompt: `both ${i}` })));
    expect(both.map((r) => r.status)).toEqual([200, 200]);
  });

  it('MCP generation tools hold the same slots: refused at the cap; an async one is a queued job that holds none', async () => {
    const client = await mcpClient(s.baseUrl, T.liveKey);
    try {
      // Two slow REST generations hold both slots: the MCP tools are refused, with the REST body.
      let since = await lastSandboxId(s);
      const slow = [1, 2].map((i) => call(s.baseUrl, '/api/images', T.liveKey, { prompt: `[[delay:${SLOW_MS}]] rest ${i}` }));
      await upstreamGot(s, since, 2);
      for (const [name, args] of [
        ['generate_image', { prompt: 'one too many' }],
        ['upload_image_for_editing', { image_url: 'https://example.com/a.png' }],
      ] as const) {
        const r = await callTool(client, name, args);
        expect(r.ok, name).toBe(false);
        expect(r.error, name).toEqual({
          status: 429,
          error: 'Too many generations in progress',
          details: [expect.stringContaining('at most 2 generations per tenant')],
          retryAfter: 5,
        });
      }
      for (const r of await Promise.all(slow)) expect(r.status).toBe(200);

      // Two async MCP generations are queued jobs (issue 37): they answer at once and hold no slot once submitted
      // (the job queue caps their running, JOBS_RUNNING_PER_TENANT), so a synchronous one is served while they run.
      since = await lastSandboxId(s);
      const started = await Promise.all(
        [1, 2].map((i) => callTool(client, 'generate_image', { prompt: `[[delay:${SLOW_MS}]] async ${i}`, async: true })),
      );
      for (const r of started) expect(r.json?.status, r.text).toBe('queued');
      await upstreamGot(s, since, 2);
      expect((await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'while the async jobs run' })).status).toBe(200);
    } finally {
      await client.close();
    }
  });

  it('event streams: the third of a tenant is 429 while another tenant streams; a disconnect gives the slot back', async () => {
    const path = '/api/sessions/cap-s/logs/stream?heartbeat=500';
    const a = await openStream(s.baseUrl, path, T.liveKey);
    const b = await openStream(s.baseUrl, path, T.testKey); // either key: one tenant
    expect([a.status, b.status]).toEqual([200, 200]);
    expectStreamCap(await call(s.baseUrl, path, T.liveKey));
    expectStreamCap(await call(s.baseUrl, '/api/executions/any-id/stream', T.liveKey));
    // Another tenant streams meanwhile.
    const u = await openStream(s.baseUrl, path, U.liveKey);
    expect(u.status).toBe(200);
    expect(u.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    u.close();
    // Generations are a separate cap.
    expect((await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'while streaming' })).status).toBe(200);

    a.close();
    const c = await waitFor(
      async () => {
        const o = await openStream(s.baseUrl, path, T.liveKey);
        if (o.status === 200) return o;
        await o.res.text();
        return false;
      },
      { timeout: 5000, interval: 100, message: 'a stream slot after a disconnect' },
    );
    expectStreamCap(await call(s.baseUrl, path, T.liveKey));
    b.close();
    c.close();
  });

  it('streams that end by themselves, and stream requests answered without a stream (404), give their slot back exactly once', async () => {
    const path = '/api/sessions/cap-s/logs/stream';
    await waitFor(
      async () => {
        const o = await openStream(s.baseUrl, path, T.liveKey);
        const ok = o.status === 200;
        o.close();
        return ok;
      },
      { timeout: 5000, interval: 100, message: 'free stream slots' },
    );
    const done = await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'finished execution' });
    const executionId = done.body.data.executionId as string;
    // The stream of a finished execution sends `complete` and ends: three in a row with a cap of 2.
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${s.baseUrl}/api/executions/${executionId}/stream`, { headers: { 'x-api-key': T.liveKey } });
      expect(r.status).toBe(200);
      expect(await r.text()).toContain('event: complete');
    }
    // Unknown ids answer 404, never 429.
    for (let i = 0; i < 3; i++) expect((await call(s.baseUrl, '/api/executions/no-such-execution/stream', T.liveKey)).status).toBe(404);
    for (let i = 0; i < 3; i++) expect((await call(s.baseUrl, '/api/sessions/no-such-session/logs/stream', T.liveKey)).status).toBe(404);
    // And two long streams still fit (once the closed ones' slots are back: a slot leaked never comes back).
    const [x, y] = await waitFor(
      async () => {
        const both = [await openStream(s.baseUrl, path, T.liveKey), await openStream(s.baseUrl, path, T.liveKey)];
        if (both.every((o) => o.status === 200)) return both;
        for (const o of both) o.close();
        return false;
      },
      { timeout: 5000, interval: 100, message: 'two streams open at once' },
    );
    // ... and fill the cap exactly: nothing leaked, nothing was given back twice.
    expectStreamCap(await call(s.baseUrl, path, T.liveKey));
    x.close();
    y.close();
  });
});

describe('tenant concurrency caps shared by two gateways through Redis', () => {
  let s: TestStack;
  let second: RunningStack;
  let secondUrl: string;
  let T: TestTenant;

  beforeAll(async () => {
    s = await startTestStack({ env: { ...CAPS, REDIS_URL } });
    const addr = (name: string) => s.stack.modules.find((m) => m.name === name)?.running;
    second = await startStack({
      target: 'gateway',
      logger: createLogger('gw2', 'silent'),
      env: {
        ...s.env,
        PORT: String(await freePort()),
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
    T = await s.createTenant();
    expect((await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'seed', session_id: 'cap-r' })).status).toBe(200);
  });
  afterAll(async () => {
    await second?.stop();
    await s?.stop();
  });

  it('one stream on each gateway fills the cap of 2 on both; closing one frees a slot for either', async () => {
    const path = '/api/sessions/cap-r/logs/stream';
    const a = await openStream(s.baseUrl, path, T.liveKey);
    const b = await openStream(secondUrl, path, T.liveKey);
    expect([a.status, b.status]).toEqual([200, 200]);
    expectStreamCap(await call(s.baseUrl, path, T.liveKey));
    expectStreamCap(await call(secondUrl, path, T.liveKey));
    b.close();
    const c = await waitFor(
      async () => {
        const o = await openStream(s.baseUrl, path, T.liveKey);
        if (o.status === 200) return o;
        await o.res.text();
        return false;
      },
      { timeout: 5000, interval: 100, message: 'a slot freed on the other gateway' },
    );
    expectStreamCap(await call(secondUrl, path, T.liveKey));
    a.close();
    c.close();
  });

  it('generations in flight are counted across both gateways', async () => {
    const since = await lastSandboxId(s);
    const slow = [s.baseUrl, secondUrl].map((base, i) => call(base, '/api/images', T.liveKey, { prompt: `[[delay:${SLOW_MS}]] r${i}` }));
    await upstreamGot(s, since, 2);
    expectGenerationCap(await call(s.baseUrl, '/api/images', T.liveKey, { prompt: 'third' }));
    expectGenerationCap(await call(secondUrl, '/api/images', T.liveKey, { prompt: 'third' }));
    for (const r of await Promise.all(slow)) expect(r.status).toBe(200);
    expect((await call(secondUrl, '/api/images', T.liveKey, { prompt: 'after' })).status).toBe(200);
  });
});
