import { fileURLToPath } from 'node:url';
import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import { createDb, createLogger, createTestDatabase, freePort, migrate, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drainPendingFailures, ExecutionTracker } from '../src/executions.js';
import { getExecution, listActiveExecutions, listSessionExecutions, TOTAL_CAP } from '../src/store.js';

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;
beforeAll(async () => {
  db = await createTestDatabase(undefined, 'genexec');
  sql = createDb(db.url, { schema: 'generation', max: 2 });
  await migrate(sql, 'generation', MIGRATIONS);
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

const logger = createLogger('test', 'silent');
const start = (executionId: string, sessionId = 's1') =>
  ExecutionTracker.start(
    sql,
    {
      executionId,
      tenantId: 'tE',
      sessionId,
      toolName: 'generate_image',
      toolSource: 'test',
      modelId: 'm',
      keyType: 'test',
      currentStep: 'validated',
      firstLog: 'first',
    },
    'genexec',
    logger,
  );

/** `n` executions of one session, inserted directly (half of them running). */
async function seed(tenantId: string, sessionId: string, n: number) {
  await sql`
    INSERT INTO executions (execution_id, tenant_id, session_id, tool_name, tool_source, status, completed_at)
    SELECT ${`${tenantId}-${sessionId}-`} || g, ${tenantId}, ${sessionId}, 'generate_image', 'test',
      CASE WHEN g % 2 = 0 THEN 'running' ELSE 'completed' END, CASE WHEN g % 2 = 0 THEN NULL ELSE now() END
    FROM generate_series(1, ${n}) g`;
}

describe('execution list totals', () => {
  it('are exact up to the cap and capped (totalIsExact false) above it', async () => {
    await seed('tC', 'small', 3);
    await seed('tC', 'big', TOTAL_CAP + 5);
    const small = await listSessionExecutions(sql, 'tC', 'small', { limit: 2, includeLogs: false });
    expect(small).toMatchObject({ total: 3, totalIsExact: true });
    expect(small.executions).toHaveLength(2);
    const big = await listSessionExecutions(sql, 'tC', 'big', { limit: 10, includeLogs: false });
    expect(big).toMatchObject({ total: TOTAL_CAP, totalIsExact: false });
    expect(big.executions).toHaveLength(10);
    // The stream's filter (running, or finished since an instant) is counted the same way.
    const since = await listSessionExecutions(sql, 'tC', 'big', {
      limit: 10,
      includeLogs: false,
      activeOrFinishedSince: new Date(Date.now() + 60_000).toISOString(),
    });
    expect(since).toMatchObject({ total: Math.floor((TOTAL_CAP + 5) / 2), totalIsExact: true });
    const active = await listActiveExecutions(sql, 'tC', 5);
    expect(active).toMatchObject({ total: Math.floor((TOTAL_CAP + 5) / 2) + 1, totalIsExact: true });
  });

  it('exactly at the cap the total is still exact', async () => {
    await seed('tX', 'edge', TOTAL_CAP);
    expect(await listSessionExecutions(sql, 'tX', 'edge', { limit: 1, includeLogs: false })).toMatchObject({
      total: TOTAL_CAP,
      totalIsExact: true,
    });
  });
});

describe('execution tracker', () => {
  it('writes the lines said just before the end with the final state, in order, and counts them', async () => {
    const exec = await start('e-quick');
    const said = [exec.step('calling_provider', 20, 'calling'), exec.step('storing', 80, 'storing')];
    await exec.complete('Completed: done', 'done', [1]);
    await Promise.all(said); // the lines' promises settle with the final write
    const [row] = await sql`SELECT status, progress_percent, current_step, log_count, duration_ms, completed_at, started_at
      FROM executions WHERE execution_id = 'e-quick'`;
    expect(row).toMatchObject({ status: 'completed', progress_percent: 100, current_step: 'completed', log_count: 4 });
    expect(Number(row.duration_ms)).toBe(row.completed_at.getTime() - row.started_at.getTime());
    const logs = await sql`SELECT message, level FROM execution_logs WHERE execution_id = 'e-quick' ORDER BY id`;
    expect(logs.map((l) => l.message)).toEqual(['first', 'calling', 'storing', 'Completed: done']);
    // The event repeats what the row says.
    const [out] = await sql`SELECT payload FROM outbox WHERE subject = 'genexec.generation.execution_finished'`;
    const event = ExecutionFinished.decode(out.payload);
    expect(event).toMatchObject({ executionId: 'e-quick', sessionId: 's1', toolName: 'generate_image', status: 'completed' });
    expect(event).toMatchObject({ keyType: 'test', images: 1, durationMs: Number(row.duration_ms) });
    expect(event.occurredAt).toBe(row.completed_at.toISOString());
  });

  it('writes lines on their own while the execution runs, and a failed end keeps the progress reached', async () => {
    const exec = await start('e-slow');
    await exec.step('calling_provider', 20, 'calling'); // resolves once stored
    const [running] = await sql`SELECT status, progress_percent, current_step, log_count FROM executions WHERE execution_id = 'e-slow'`;
    expect(running).toMatchObject({ status: 'running', progress_percent: 20, current_step: 'calling_provider', log_count: 2 });
    exec.step('storing', 80, 'storing');
    await exec.fail(new Error('boom'));
    const [row] = await sql`SELECT status, progress_percent, log_count, error FROM executions WHERE execution_id = 'e-slow'`;
    expect(row).toMatchObject({ status: 'failed', progress_percent: 80, log_count: 4, error: 'Internal error' });
    const logs = await sql`SELECT message, level FROM execution_logs WHERE execution_id = 'e-slow' ORDER BY id`;
    expect(logs.map((l) => [l.message, l.level])).toEqual([
      ['first', 'info'],
      ['calling', 'info'],
      ['storing', 'info'],
      ['Failed: Internal error', 'error'],
    ]);
  });

  it('a completed execution keeps the images it reported and how many were asked for (GetExecution only); a failed one none', async () => {
    const done = await start('e-images');
    await done.complete('Completed: 2 of 3', '2 of 3', [11, 12], 3);
    expect(await getExecution(sql, 'tE', 'e-images', false)).toMatchObject({ status: 'completed', imageIds: [11, 12], imagesRequested: 3 });
    // Without a count asked for (uploads): as many as reported.
    const upload = await start('e-upload');
    await upload.complete('Completed', 'uploaded', [13]);
    expect(await getExecution(sql, 'tE', 'e-upload', false)).toMatchObject({ imageIds: [13], imagesRequested: 1 });
    const failed = await start('e-no-images');
    await failed.fail(new Error('boom'));
    expect(await getExecution(sql, 'tE', 'e-no-images', false)).toMatchObject({ status: 'failed', imageIds: [], imagesRequested: 0 });
    // Lists do not carry them.
    const listed = await listSessionExecutions(sql, 'tE', 's1', { limit: 50, includeLogs: false });
    expect(listed.executions.find((e) => e.executionId === 'e-images')).toMatchObject({ imageIds: [], imagesRequested: 0 });
  });

  it('an execution that is no longer running is not finished again (no second event)', async () => {
    const exec = await start('e-reaped');
    await sql`UPDATE executions SET status = 'failed', completed_at = now() WHERE execution_id = 'e-reaped'`;
    await expect(exec.complete('Completed', 'done', [1])).rejects.toMatchObject({ status: 503 });
    const events = await sql`SELECT payload FROM outbox WHERE subject = 'genexec.generation.execution_finished'`;
    expect(events.map((e) => ExecutionFinished.decode(e.payload).executionId)).not.toContain('e-reaped');
  });

  it('a final write no try of which reached the server answers 503 at once: no wait for the outcome of a write that never went out', async () => {
    const exec = await start('e-refused');
    // Every statement now goes to a port nothing listens on (freePort closes it: ECONNREFUSED, nothing was sent).
    const refused = createDb(`postgres://postgres@127.0.0.1:${await freePort()}/x`, { schema: 'generation', max: 1 });
    const seen = watchStatements(refused);
    swapSql(exec, seen.sql);
    try {
      await expect(exec.complete('Completed', 'done', [1])).rejects.toMatchObject({ status: 503 });
      expect(seen.texts.some((t) => t.startsWith('SELECT status FROM executions'))).toBe(false);
      expect(seen.texts.some((t) => t.includes('WITH done AS'))).toBe(true);
    } finally {
      await drainPendingFailures(0); // the failed state's background retries stop
      await refused.end();
    }
    const [row] = await sql`SELECT status FROM executions WHERE execution_id = 'e-refused'`;
    expect(row.status).toBe('running'); // nothing landed; the orphan reaper of a live replica ends it
  });

  it('a final write that committed with its answer lost is read back: the caller gets its success, one event', async () => {
    const exec = await start('e-lost-answer');
    let lost = 0;
    const losing = new Proxy(sql, {
      apply(target, thisArg, args: [TemplateStringsArray, ...unknown[]]) {
        const q = Reflect.apply(target, thisArg, args);
        if (lost === 0 && args[0]?.[0]?.includes('WITH done AS')) {
          lost++;
          // The statement commits; its answer never arrives (what a connection lost at COMMIT looks like).
          return q.then(() => {
            throw Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' });
          });
        }
        return q;
      },
    });
    swapSql(exec, losing);
    await exec.complete('Completed', 'done', [7]);
    expect(lost).toBe(1);
    const [row] = await sql`SELECT status, image_ids FROM executions WHERE execution_id = 'e-lost-answer'`;
    expect(row.status).toBe('completed');
    expect(row.image_ids.map(Number)).toEqual([7]);
    const events = await sql`SELECT payload FROM outbox WHERE subject = 'genexec.generation.execution_finished'`;
    expect(events.filter((e) => ExecutionFinished.decode(e.payload).executionId === 'e-lost-answer')).toHaveLength(1);
  });
});

/** Points a tracker at another connection (the tracker keeps the one it started with). */
function swapSql(exec: ExecutionTracker, other: Sql): void {
  (exec as unknown as { sql: Sql }).sql = other;
}

/** `sql`, recording the text of each statement made through it. */
function watchStatements(target: Sql): { sql: Sql; texts: string[] } {
  const texts: string[] = [];
  const watched = new Proxy(target, {
    apply(t, thisArg, args: [TemplateStringsArray, ...unknown[]]) {
      if (Array.isArray(args[0])) texts.push(args[0].join('?').trim());
      return Reflect.apply(t, thisArg, args);
    },
  });
  return { sql: watched, texts };
}
