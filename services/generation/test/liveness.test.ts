import { fileURLToPath } from 'node:url';
import { AppError, createDb, createLogger, createTestDatabase, migrate, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Collaborators } from '../src/deps.js';
import { withQuotaFallback } from '../src/quota-fallback.js';
import { createExecution, failOrphanedExecutions, heartbeat, removeInstance } from '../src/store.js';

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;
beforeAll(async () => {
  db = await createTestDatabase(undefined, 'genlive');
  sql = createDb(db.url, { schema: 'generation', max: 2 });
  await migrate(sql, 'generation', MIGRATIONS);
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

const newExec = (executionId: string, instanceId?: string) =>
  createExecution(sql, {
    executionId,
    tenantId: 'tL',
    sessionId: 's',
    toolName: 'generate_image',
    toolSource: 'test',
    modelId: 'm',
    keyType: 'live',
    currentStep: 'validated',
    firstLog: 'go',
    instanceId,
  });
const statusOf = async (id: string) => (await sql`SELECT status, error FROM executions WHERE execution_id = ${id}`)[0];
const opts = { deadAfterMs: 30_000, staleMs: 15 * 60_000, eventsPrefix: 'genlive' };

describe('orphaned executions', () => {
  it('fails the running executions of a process whose heartbeat stopped, not those of a live one', async () => {
    await heartbeat(sql, 'alive');
    await heartbeat(sql, 'dead');
    await newExec('e-alive', 'alive');
    await newExec('e-dead', 'dead');
    await newExec('e-young', 'dead');
    // 'dead' missed its heartbeats for 40 s; its e-young started only just now (a process that starts
    // an execution is alive when it does, so a fresh one is left alone until it is older than the limit).
    await sql`UPDATE instances SET heartbeat_at = now() - interval '40 seconds' WHERE instance_id = 'dead'`;
    await sql`UPDATE executions SET started_at = now() - interval '40 seconds' WHERE execution_id IN ('e-alive', 'e-dead')`;
    expect(await failOrphanedExecutions(sql, opts)).toBe(1);
    expect(await statusOf('e-dead')).toEqual({ status: 'failed', error: 'Execution abandoned: the worker stopped' });
    expect((await statusOf('e-alive')).status).toBe('running');
    expect((await statusOf('e-young')).status).toBe('running');
    // The ExecutionFinished event is in the outbox with it (usage counts a failed operation; library discards).
    expect(await sql`SELECT 1 FROM outbox WHERE subject = 'genlive.generation.execution_finished'`).toHaveLength(1);
    // A second reaper (another replica) finds nothing more to do.
    expect(await failOrphanedExecutions(sql, opts)).toBe(0);
  });

  it('a cleanly stopped process (liveness row removed) leaves no execution running', async () => {
    await heartbeat(sql, 'gone');
    await newExec('e-gone', 'gone');
    await sql`UPDATE executions SET started_at = now() - interval '40 seconds' WHERE execution_id = 'e-gone'`;
    await removeInstance(sql, 'gone');
    expect(await failOrphanedExecutions(sql, opts)).toBe(1);
    expect((await statusOf('e-gone')).status).toBe('failed');
  });

  it('executions without an instance keep the stale-progress rule', async () => {
    await newExec('e-legacy');
    await sql`UPDATE executions SET started_at = now() - interval '1 hour', updated_at = now() - interval '10 minutes' WHERE execution_id = 'e-legacy'`;
    expect(await failOrphanedExecutions(sql, opts)).toBe(0);
    await sql`UPDATE executions SET updated_at = now() - interval '20 minutes' WHERE execution_id = 'e-legacy'`;
    expect(await failOrphanedExecutions(sql, opts)).toBe(1);
  });
});

describe('quota fallback while usage-metering is away', () => {
  const logger = createLogger('quota-test', 'silent');
  function fakeUsage() {
    const state = { down: false, used: 0, quota: 1000 };
    const c = {
      checkQuota: async (_p: unknown, _t: string, _incoming: number) => {
        if (state.down) throw new AppError(503, { error: 'Service temporarily unavailable' });
        return { allowed: state.used < state.quota, usedBytes: state.used, quotaBytes: state.quota };
      },
      close() {},
    } as unknown as Collaborators;
    return { state, c };
  }
  const p = { requestId: 'r', tenantId: 't' };

  it('answers from the last known usage plus what it admitted since, then refuses at the quota', async () => {
    const { state, c } = fakeUsage();
    let t = 0;
    const q = withQuotaFallback(c, { logger, maxStaleMs: 60_000, now: () => t });
    state.used = 600;
    expect((await q.checkQuota(p, 't', 100)).allowed).toBe(true);
    state.down = true;
    t = 10_000;
    expect((await q.checkQuota(p, 't', 300)).allowed).toBe(true); // 600 known + 0 admitted < 1000
    expect((await q.checkQuota(p, 't', 300)).allowed).toBe(true); // 600 + 300 < 1000 (crosses it: allowed, as usage does)
    expect((await q.checkQuota(p, 't', 300)).allowed).toBe(false); // 600 + 600 >= 1000
    expect(q.fallbackAnswers()).toBe(3);
  });

  it('refuses (503) once the last known figure is older than the bound, and for tenants never seen', async () => {
    const { state, c } = fakeUsage();
    let t = 0;
    const q = withQuotaFallback(c, { logger, maxStaleMs: 60_000, now: () => t });
    await q.checkQuota(p, 't', 1);
    state.down = true;
    t = 61_000;
    await expect(q.checkQuota(p, 't', 1)).rejects.toMatchObject({ status: 503 });
    await expect(q.checkQuota(p, 'other', 1)).rejects.toMatchObject({ status: 503 });
  });

  it('never hides a refusal that is not an outage', async () => {
    const { c } = fakeUsage();
    const q = withQuotaFallback(
      { ...c, checkQuota: async () => Promise.reject(new AppError(404, { error: 'Tenant not found' })) },
      { logger },
    );
    await expect(q.checkQuota(p, 't', 1)).rejects.toMatchObject({ status: 404 });
  });
});
