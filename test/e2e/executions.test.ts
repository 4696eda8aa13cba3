/**
 * Executions (SPEC 4.8, 6 stream events) through the gateway, in the JetStream shape (NATS): session
 * logs, one execution, the active list, the SSE streams read by a real EventSource client (events log,
 * status, complete, error, heartbeat), legacy `success` envelopes, ExecutionFinished on the bus,
 * 401 without a key and 404 for other tenants' sessions and executions.
 */
import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import type { Subscription } from '@imagegen/platform';
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { librarySeeder } from './images-seed.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let sub: Subscription;
const finished: ExecutionFinished[] = [];

beforeAll(async () => {
  s = await startTestStack({ nats: true, env: { RATE_LIMIT_DISABLED: '1' } });
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
  sub = await s.stack.ctx.events.subscribe({
    durable: 'executions-e2e',
    subjects: [`${s.env.EVENTS_PREFIX}.generation.execution_finished`],
    handler: async (m) => {
      finished.push(ExecutionFinished.decode(m.data));
    },
  });
});
afterAll(async () => {
  await sub?.stop();
  await s?.stop();
});

const api = (path: string, key = t.liveKey) => s.api(path, { key });
const generate = (body: Record<string, unknown>, key = t.liveKey) => s.api('/api/images', { key, body });

interface Received {
  type: string;
  data: any;
}

/** A real EventSource client with the API key header; collects named events. */
function listen(path: string, key = t.liveKey) {
  const events: Received[] = [];
  const es = new EventSource(`${s.baseUrl}${path}`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), 'x-api-key': key } }),
  });
  for (const type of ['log', 'status', 'complete', 'error', 'heartbeat']) {
    es.addEventListener(type, (e: Event) => {
      const data = (e as MessageEvent).data;
      if (type === 'error' && data === undefined) return; // connection-level error, not the named event
      events.push({ type, data: JSON.parse(data) });
    });
  }
  return {
    events,
    close: () => es.close(),
    until: (pred: (e: Received) => boolean, ms = 15_000) =>
      waitFor(() => events.find(pred), { timeout: ms, message: `an event of ${path} matching ${pred}` }),
  };
}

/** Starts a slow generation (the sandbox waits) and returns its execution id once it is running. */
async function startSlow(sessionId: string, prompt: string, delayMs = 2500) {
  const done = generate({ prompt: `${prompt} [[delay:${delayMs}]]`, session_id: sessionId });
  const id = await waitFor(
    async () => {
      const a = await api('/api/executions/active');
      return a.body.executions.find((e: any) => e.sessionId === sessionId)?.executionId as string | undefined;
    },
    { timeout: 15_000, message: `the execution of session ${sessionId} running` },
  );
  return { id, done };
}

describe('executions', () => {
  it('GET /api/sessions/:sessionId/logs lists the executions with timed log entries', async () => {
    const sid = `logs-${Date.now()}`;
    const g1 = await generate({ prompt: 'first', session_id: sid });
    const g2 = await generate({ prompt: 'second [[safety]]', session_id: sid });
    expect([g1.status, g2.status]).toEqual([200, 400]);
    const r = await api(`/api/sessions/${sid}/logs`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, sessionId: sid, total: 2 });
    const [failed, completed] = r.body.executions;
    expect(completed).toMatchObject({
      executionId: g1.body.data.executionId,
      sessionId: sid,
      toolName: 'generate_image',
      toolSource: 'tenant_api',
      status: 'completed',
      progressPercent: 100,
      currentStep: 'completed',
      startedAt: expect.any(String),
      completedAt: expect.any(String),
      durationMs: expect.any(Number),
      resultSummary: expect.stringMatching(/^Generated 1 of 1 image\(s\) with provA-flash-lite-image/),
    });
    expect(completed.logEntries.length).toBeGreaterThanOrEqual(4);
    for (const l of completed.logEntries) expect(l.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(failed).toMatchObject({ status: 'failed', error: 'Content blocked by provider safety filters: SAFETY' });
    const limited = await api(`/api/sessions/${sid}/logs?limit=1`);
    expect(limited.body.executions).toHaveLength(1);
    expect(limited.body.total).toBe(2);
    expect((await api(`/api/sessions/${sid}/logs?limit=0`)).status).toBe(400);
    // isolation and unknown sessions
    const foreign = await api(`/api/sessions/${sid}/logs`, other.liveKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toBe('Session not found');
    expect((await api('/api/sessions/no-such-session/logs')).status).toBe(404);
    // A session that holds images but no execution (stored through the library alone): 200 with none.
    const seeder = librarySeeder(s);
    await seeder.store(t.tenantId, { sessionId: 'images-only' });
    seeder.close();
    const bare = await api('/api/sessions/images-only/logs');
    expect(bare.status).toBe(200);
    expect(bare.body).toMatchObject({ success: true, sessionId: 'images-only', executions: [], total: 0 });
    expect((await api('/api/sessions/images-only/logs', other.liveKey)).status).toBe(404);
    // ExecutionFinished went out through the outbox and JetStream
    const ev = await waitFor(() => finished.find((e) => e.executionId === g1.body.data.executionId), { timeout: 15_000 });
    expect(ev).toMatchObject({
      tenantId: t.tenantId,
      sessionId: sid,
      toolName: 'generate_image',
      status: 'completed',
      images: 1,
      keyType: 'live',
    });
    await waitFor(() => finished.find((e) => e.executionId === failed.executionId && e.status === 'failed'), { timeout: 15_000 });
  });

  it('GET /api/executions/:executionId answers {success, execution} with logEntries; 404 for other tenants', async () => {
    const g = await generate({ prompt: 'detail please', n: 2 });
    const id = g.body.data.executionId;
    const r = await api(`/api/executions/${id}`);
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(true);
    expect(r.body.execution).toMatchObject({ executionId: id, status: 'completed', progressPercent: 100 });
    const messages = r.body.execution.logEntries.map((l: any) => l.message);
    expect(messages[0]).toBe('Generating 2 image(s) with provA-flash-lite-image');
    expect(messages.at(-1)).toMatch(/^Completed: Generated 2 of 2 image\(s\)/);
    const foreign = await api(`/api/executions/${id}`, other.liveKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toBe('Execution not found');
    expect((await api('/api/executions/00000000-0000-0000-0000-000000000000')).status).toBe(404);
  });

  it('GET /api/executions/active lists running executions of the tenant only', async () => {
    const sid = `active-${Date.now()}`;
    const { id, done } = await startSlow(sid, 'slow active', 2000);
    const a = await api('/api/executions/active');
    expect(a.body.success).toBe(true);
    const mine = a.body.executions.find((e: any) => e.executionId === id);
    expect(mine).toMatchObject({ status: 'running', sessionId: sid, completedAt: null });
    expect(mine.progressPercent).toBeLessThan(100);
    expect(a.body.total).toBeGreaterThanOrEqual(1);
    const theirs = await api('/api/executions/active', other.liveKey);
    expect(theirs.body).toEqual({ success: true, executions: [], total: 0, totalIsExact: true });
    expect((await done).status).toBe(200);
    const after = await api('/api/executions/active');
    expect(after.body.executions.find((e: any) => e.executionId === id)).toBeUndefined();
  });

  it('needs an API key', async () => {
    for (const p of [
      '/api/executions/active',
      '/api/executions/x',
      '/api/executions/x/stream',
      '/api/sessions/x/logs',
      '/api/sessions/x/logs/stream',
    ]) {
      expect((await s.api(p)).status, p).toBe(401);
    }
  });
});

describe('SSE streams (EventSource)', () => {
  it('/api/executions/:id/stream sends log, status and complete, with heartbeats, then ends', async () => {
    const sid = `stream-${Date.now()}`;
    const { id, done } = await startSlow(sid, 'streamed picture', 2500);
    const es = listen(`/api/executions/${id}/stream?interval=150&heartbeat=300`);
    try {
      const complete = await es.until((e) => e.type === 'complete');
      expect(complete.data).toMatchObject({ executionId: id, execution: { executionId: id, status: 'completed', progressPercent: 100 } });
      const types = es.events.map((e) => e.type);
      expect(types).toContain('heartbeat');
      expect(types.indexOf('status')).toBeLessThan(types.indexOf('complete'));
      const statuses = es.events.filter((e) => e.type === 'status').map((e) => e.data);
      expect(statuses[0]).toMatchObject({ executionId: id, status: 'running' });
      expect(statuses.at(-1)).toMatchObject({ status: 'completed', progressPercent: 100 });
      const logs = es.events.filter((e) => e.type === 'log').map((e) => e.data);
      expect(logs[0]).toMatchObject({
        executionId: id,
        message: 'Generating 1 image(s) with provA-flash-lite-image',
        timestamp: expect.any(String),
      });
      expect(logs.at(-1).message).toMatch(/^Completed:/);
      // each log line once, in order
      const detail = await api(`/api/executions/${id}`);
      expect(logs.map((l) => l.message)).toEqual(detail.body.execution.logEntries.map((l: any) => l.message));
      expect((await done).status).toBe(200);
      // a reconnect after the final event (Last-Event-ID: final) gets 204, which stops an EventSource
      const again = await fetch(`${s.baseUrl}/api/executions/${id}/stream`, {
        headers: { 'x-api-key': t.liveKey, 'last-event-id': 'final' },
      });
      expect(again.status).toBe(204);
    } finally {
      es.close();
    }
  });

  it('a failed execution ends its stream with an error event', async () => {
    const sid = `failed-${Date.now()}`;
    expect((await generate({ prompt: 'blocked [[safety]]', session_id: sid })).status).toBe(400);
    const ex = (await api(`/api/sessions/${sid}/logs`)).body.executions[0];
    const es = listen(`/api/executions/${ex.executionId}/stream?interval=150`);
    try {
      const err = await es.until((e) => e.type === 'error');
      expect(err.data).toMatchObject({
        executionId: ex.executionId,
        error: 'Content blocked by provider safety filters: SAFETY',
        execution: { status: 'failed' },
      });
      expect(es.events.some((e) => e.type === 'log')).toBe(true);
    } finally {
      es.close();
    }
  });

  it('/api/sessions/:sessionId/logs/stream follows new executions of the session', async () => {
    const sid = `session-stream-${Date.now()}`;
    expect((await generate({ prompt: 'opens the session', session_id: sid })).status).toBe(200);
    const es = listen(`/api/sessions/${sid}/logs/stream?interval=150&heartbeat=300`);
    try {
      await es.until((e) => e.type === 'heartbeat');
      const done = generate({ prompt: 'followed [[delay:1200]]', session_id: sid });
      const running = await es.until((e) => e.type === 'status' && e.data.status === 'running');
      const id = running.data.executionId;
      const complete = await es.until((e) => e.type === 'complete' && e.data.executionId === id);
      expect(complete.data.execution).toMatchObject({ status: 'completed', sessionId: sid });
      const logs = es.events.filter((e) => e.type === 'log' && e.data.executionId === id);
      expect(logs[0].data.message).toBe('Generating 1 image(s) with provA-flash-lite-image');
      expect(logs.every((l) => l.data.sessionId === sid)).toBe(true);
      // a second one in the same stream
      const failedGen = await generate({ prompt: 'bad [[safety]] [[delay:400]]', session_id: sid });
      expect(failedGen.status).toBe(400);
      await es.until((e) => e.type === 'error' && e.data.error === 'Content blocked by provider safety filters: SAFETY');
      expect((await done).status).toBe(200);
    } finally {
      es.close();
    }
  });

  it('streams answer 404 for other tenants before streaming', async () => {
    const sid = `private-stream-${Date.now()}`;
    const g = await generate({ prompt: 'mine', session_id: sid });
    const foreign = await s.api(`/api/executions/${g.body.data.executionId}/stream`, { key: other.liveKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toBe('Execution not found');
    const foreignSession = await s.api(`/api/sessions/${sid}/logs/stream`, { key: other.liveKey });
    expect(foreignSession.status).toBe(404);
    expect(foreignSession.body.error).toBe('Session not found');
    expect((await s.api(`/api/sessions/${sid}/logs/stream?interval=5`, { key: t.liveKey })).status).toBe(400);
  });
});
