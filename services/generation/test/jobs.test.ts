import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { AppError, createClient, createDb, type Principal, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import type { RunningSandbox } from '../../sandbox-provider/src/service.js';
import { type FakeWorld, type GenerationHarness, startGenerationHarness } from './fake-world.js';

const RUNNING_PER_TENANT = 2;
const QUEUED_PER_TENANT = 520;

let sandbox: RunningSandbox;
let world: FakeWorld;
let sql: Sql;
let client: ReturnType<typeof createClient<typeof GenerationServiceService>>;

const principal = (tenantId: string): Principal => ({ requestId: `r-${Math.random()}`, tenantId, keyType: 'live', source: 'tenant_api' });
const submit = (tenantId: string, prompt: string, n = 1) =>
  client.submitJob({ generate: { prompt, n }, operation: 'POST /api/images', presentation: '{}' }, principal(tenantId));
const failure = async (p: Promise<unknown>): Promise<AppError> => {
  try {
    await p;
  } catch (err) {
    return err as AppError;
  }
  throw new Error('expected a failure');
};
const statusOf = async (id: string) =>
  (await sql`SELECT status FROM executions WHERE execution_id = ${id}`)[0]?.status as string | undefined;
const sandboxPrompts = async () =>
  ((await (await fetch(`${sandbox.httpUrl}/_sandbox/requests`)).json()).requests as { body?: string }[]).map((r) => JSON.stringify(r));

let h: GenerationHarness;
beforeAll(async () => {
  h = await startGenerationHarness('jobs', {
    env: {
      JOBS_RUNNING_PER_TENANT: String(RUNNING_PER_TENANT),
      JOBS_QUEUED_PER_TENANT: String(QUEUED_PER_TENANT),
      JOB_WORKERS: '2',
      JOB_POLL_MS: '100',
    },
  });
  ({ sandbox, world } = h);
  sql = createDb(h.db.url, { schema: 'generation', max: 2 });
  client = createClient(GenerationServiceService, h.gen.grpcAddress);
});

afterAll(async () => {
  client?.close();
  await sql?.end();
  await h?.stop();
});

const finished = () => h.finished.map((m) => ExecutionFinished.decode(m.data));

describe('async jobs', () => {
  it('a submitted job is queued with its position, runs once and completes with its images; the result is on the execution', async () => {
    const r = await submit('t-one', 'a lighthouse', 2);
    expect(r).toMatchObject({ status: 'queued', position: 1 });
    expect(r.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const e = await waitFor(async () => {
      const x = await client.getExecution({ executionId: r.executionId, includeLogs: true }, principal('t-one'));
      return x.status === 'completed' && x;
    });
    expect(e.imageIds).toHaveLength(2);
    expect(e.operation).toBe('POST /api/images');
    expect(e.sessionId).toBe(r.sessionId);
    expect(e.logEntries[0].message).toMatch(/^Queued: Generating 2 image/);
    expect(world.committed.filter((id) => id === r.executionId)).toHaveLength(1);
    expect(
      finished()
        .filter((f) => f.executionId === r.executionId)
        .map((f) => f.status),
    ).toEqual(['completed']);
    // Another tenant's id is not found.
    expect((await failure(client.getExecution({ executionId: r.executionId, includeLogs: false }, principal('t-two')))).status).toBe(404);
  });

  it('a bad request is refused at submit (400, nothing queued); an edit of a missing image fails as its job', async () => {
    const bad = await failure(
      client.submitJob({ generate: { n: 1 }, operation: 'POST /api/images', presentation: '' }, principal('t-bad')),
    );
    expect(bad.status).toBe(400);
    expect(bad.body.details).toContain('prompt is required');
    expect((await sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = 't-bad'`)[0].n).toBe(0);
    const noId = await failure(
      client.submitJob({ edit: { prompt: 'x' }, operation: 'POST /api/edit-image', presentation: '' }, principal('t-bad')),
    );
    expect(noId.body.details).toContain('image_id is required');
    const edit = await client.submitJob(
      { edit: { prompt: 'make it blue', imageId: 987654 }, operation: 'POST /api/edit-image', presentation: '{"imageId":987654}' },
      principal('t-bad'),
    );
    const e = await waitFor(async () => {
      const x = await client.getExecution({ executionId: edit.executionId, includeLogs: false }, principal('t-bad'));
      return x.status === 'failed' && x;
    });
    expect(e.error).toBe('Image not found');
  });

  it('500 queued jobs of one tenant: at most 2 run at once, a full queue is 429, another tenant is served next; cancels end them all', async () => {
    const seenBefore = (await sandboxPrompts()).length;
    // Tenant A: 500 slow jobs (4 s each upstream), positions in order.
    const a: string[] = [];
    for (let i = 0; i < 500; i++) {
      const r = await submit('t-a', `busy ${i} [[delay:4000]]`);
      expect(r.position).toBeGreaterThanOrEqual(1);
      a.push(r.executionId);
    }
    const positions = await Promise.all(
      a.slice(-3).map(async (id) => (await client.getExecution({ executionId: id, includeLogs: false }, principal('t-a'))).position),
    );
    expect(positions[1]).toBe(positions[0] + 1);
    expect(positions[2]).toBe(positions[1] + 1);
    // Never more than RUNNING_PER_TENANT of A's jobs running, sampled while the test goes on.
    let maxRunning = 0;
    let sampling = true;
    // Caught: when an assertion below fails first, the loop ends with the pool instead of as an unhandled rejection.
    const sampler = (async () => {
      while (sampling) {
        const [{ n }] = await sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = 't-a' AND status = 'running'`;
        maxRunning = Math.max(maxRunning, n as number);
        await new Promise((r) => setTimeout(r, 25));
      }
    })().catch(() => {});
    await waitFor(
      async () => (await sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = 't-a' AND status = 'running'`)[0].n === 2,
    );

    // The queue bound: submits beyond QUEUED_PER_TENANT waiting answer 429 with Retry-After.
    let full: AppError | undefined;
    for (let i = 0; i < QUEUED_PER_TENANT && !full; i++) {
      try {
        a.push((await submit('t-a', `more ${i} [[delay:4000]]`)).executionId);
      } catch (err) {
        full = err as AppError;
      }
    }
    expect(full?.status).toBe(429);
    expect(full?.body.error).toBe('Job queue is full');
    expect(full?.headers['retry-after']).toBeDefined();
    const [{ queued }] = await sql`SELECT count(*)::int AS queued FROM executions WHERE tenant_id = 't-a' AND status = 'queued'`;
    expect(queued).toBe(QUEUED_PER_TENANT);

    // Tenant B's first job: the next claim after it was queued is B's (both workers were busy with A).
    const b = await submit('t-b', 'just one');
    expect(b.position).toBe(1);
    await waitFor(async () => (await statusOf(b.executionId)) === 'completed', { timeout: 15_000 });
    const [bRow] = await sql`SELECT queued_at, started_at FROM executions WHERE execution_id = ${b.executionId}`;
    // Fair: once B's job waited, the next free worker took it. With 2 workers, two of A's jobs may end together
    // and both slots be claimed side by side (one for B, one for A): at most one of A's started between.
    const [{ n: aBefore }] = await sql`SELECT count(*)::int AS n FROM executions
      WHERE tenant_id = 't-a' AND started_at >= ${bRow.queued_at} AND started_at < ${bRow.started_at} AND status <> 'queued'`;
    expect(aBefore).toBeLessThanOrEqual(1);
    // At most one job's duration (4 s upstream) and a poll.
    const waitedMs = (bRow.started_at as Date).getTime() - (bRow.queued_at as Date).getTime();
    console.log(`tenant B's first job waited ${waitedMs} ms behind ${QUEUED_PER_TENANT} queued jobs of tenant A`);
    expect(waitedMs).toBeLessThan(4000 + 2000);

    // Cancel every job of A: the queued ones never run, the running ones stop with their provider call.
    const runningNow = (await sql`SELECT execution_id FROM executions WHERE tenant_id = 't-a' AND status = 'running'`).map(
      (r) => r.execution_id as string,
    );
    expect(runningNow.length).toBeGreaterThan(0);
    const cancelled = await Promise.all(a.map((id) => client.cancelExecution({ executionId: id }, principal('t-a')).catch((e) => e)));
    const refused = cancelled.filter((c) => c instanceof AppError) as AppError[];
    // Only jobs that ended before the cancel refuse it (409 'Execution already completed').
    for (const r of refused) expect([r.status, r.body.error]).toEqual([409, 'Execution already completed']);
    await waitFor(
      async () =>
        (await sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = 't-a' AND status IN ('queued', 'running')`)[0].n === 0,
      {
        timeout: 10_000,
      },
    );
    sampling = false;
    await sampler;
    expect(maxRunning).toBe(RUNNING_PER_TENANT);
    for (const id of runningNow) expect(await statusOf(id)).toBe('cancelled');
    const outcome = await sql`SELECT status, count(*)::int AS n FROM executions WHERE tenant_id = 't-a' GROUP BY status`;
    const byStatus = Object.fromEntries(outcome.map((r) => [r.status, r.n]));
    expect(byStatus.completed ?? 0).toBe(refused.length);
    expect(byStatus.cancelled).toBe(a.length - refused.length);
    // A job cancelled while queued (its cancel answered 'cancelled' at once) never reached the provider; the
    // provider saw only jobs that completed or were running when cancelled. Nothing of a cancelled one was committed.
    const prompts = (await sandboxPrompts()).slice(seenBefore);
    const reached = (i: number) => prompts.some((p) => p.includes(`"busy ${i} `) || p.includes(`"more ${i - 500} `));
    const cancelledQueued = a.map((_, i) => i).filter((i) => (cancelled[i] as { status?: string }).status === 'cancelled');
    expect(cancelledQueued.length).toBeGreaterThan(400);
    expect(cancelledQueued.filter(reached)).toEqual([]);
    const cancelledRunning = a.filter((_, i) => (cancelled[i] as { status?: string }).status === 'running').length;
    expect(prompts.filter((p) => p.includes('busy') || p.includes('more')).length).toBe((byStatus.completed ?? 0) + cancelledRunning);
    const cancelledIds = new Set(a.filter((id) => !refused.some((r) => r === cancelled[a.indexOf(id)])));
    expect(world.committed.filter((id) => cancelledIds.has(id))).toEqual([]);
    const events = finished().filter((f) => cancelledIds.has(f.executionId));
    expect(events.every((f) => f.status === 'cancelled')).toBe(true);
    expect(events).toHaveLength(cancelledIds.size);
  }, 120_000);

  it('cancel: 404 for an unknown or another tenant id, 409 once finished', async () => {
    const r = await submit('t-c', 'quick');
    await waitFor(async () => (await statusOf(r.executionId)) === 'completed');
    expect((await failure(client.cancelExecution({ executionId: r.executionId }, principal('t-other')))).status).toBe(404);
    expect((await failure(client.cancelExecution({ executionId: '00000000-0000-4000-8000-000000000000' }, principal('t-c')))).status).toBe(
      404,
    );
    const done = await failure(client.cancelExecution({ executionId: r.executionId }, principal('t-c')));
    expect([done.status, done.body.error]).toEqual([409, 'Execution already completed']);
  });

  it('a synchronous call cancelled while it runs answers 409 and ends cancelled, nothing committed', async () => {
    const executionId = crypto.randomUUID();
    const call = client.generateImages({ prompt: 'slow [[delay:3000]]', n: 1, executionId }, principal('t-s'), { timeoutMs: 20_000 });
    await waitFor(async () => (await statusOf(executionId)) === 'running');
    const e = await client.cancelExecution({ executionId }, principal('t-s'));
    expect(e.cancelRequested).toBe(true);
    const err = await failure(call);
    expect([err.status, err.body.error]).toEqual([409, 'Execution cancelled']);
    expect(await statusOf(executionId)).toBe('cancelled');
    expect(world.committed).not.toContain(executionId);
  });
});
