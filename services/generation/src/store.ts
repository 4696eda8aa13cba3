import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import type { Execution, LogEntry } from '@imagegen/contracts/generation/v1/generation';
import { type AppError, conflict, type Sql, subjectFor, type TransactionSql, writeOutbox } from '@imagegen/platform';

/** SQL of the generation schema: executions and their log lines. Every query filters by tenant. */

export type ExecutionStatus = 'running' | 'completed' | 'failed';

export interface NewExecution {
  executionId: string;
  tenantId: string;
  sessionId: string;
  toolName: string;
  toolSource: string;
  modelId: string;
  keyType: string;
  currentStep: string;
  firstLog: string;
  /** The generation process running it (its heartbeat tells whether it is still alive). */
  instanceId?: string;
}

interface Row {
  execution_id: string;
  session_id: string;
  tool_name: string;
  tool_source: string;
  status: string;
  progress_percent: number;
  current_step: string;
  model_id: string;
  started_at: Date;
  completed_at: Date | null;
  duration_ms: number | null;
  result_summary: string | null;
  error: string | null;
  log_count: number;
}

const COLUMNS = `execution_id, session_id, tool_name, tool_source, status, progress_percent, current_step, model_id,
  started_at, completed_at, duration_ms, result_summary, error, log_count`;

function toExecution(r: Row, logs: LogEntry[] = []): Execution {
  return {
    executionId: r.execution_id,
    sessionId: r.session_id,
    toolName: r.tool_name,
    toolSource: r.tool_source,
    status: r.status,
    progressPercent: r.progress_percent,
    currentStep: r.current_step,
    startedAt: r.started_at.toISOString(),
    completedAt: r.completed_at ? r.completed_at.toISOString() : undefined,
    durationMs: r.duration_ms ?? undefined,
    resultSummary: r.result_summary ?? undefined,
    logEntries: logs,
    error: r.error ?? undefined,
    modelId: r.model_id,
    logCount: r.log_count,
  };
}

export const executionExists = (executionId: string): AppError => conflict(`Execution ${executionId} already exists`);

/**
 * True when an execution has this id. Ids are unique across tenants (caller-chosen ones too), so this looks
 * at every tenant; callers answer the same 409 whoever owns it and never show another tenant's execution.
 */
export async function executionIdTaken(sql: Sql, executionId: string): Promise<boolean> {
  const [r] = await sql`SELECT 1 FROM executions WHERE execution_id = ${executionId}`;
  return !!r;
}

/**
 * The execution row and its first log line, in one statement (hence one transaction). An id that is taken
 * (a caller-chosen execution_id used twice) is 409 'Execution <id> already exists'.
 */
export async function createExecution(sql: Sql, e: NewExecution): Promise<void> {
  try {
    await sql`
      WITH x AS (
        INSERT INTO executions (execution_id, tenant_id, session_id, tool_name, tool_source, status, current_step, model_id, key_type, log_count, instance_id)
        VALUES (${e.executionId}, ${e.tenantId}, ${e.sessionId}, ${e.toolName}, ${e.toolSource}, 'running', ${e.currentStep}, ${e.modelId}, ${e.keyType}, 1, ${e.instanceId ?? null})
        RETURNING execution_id, tenant_id
      )
      INSERT INTO execution_logs (execution_id, tenant_id, message) SELECT execution_id, tenant_id, ${e.firstLog} FROM x`;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw executionExists(e.executionId);
    throw err;
  }
}

/** Appends a log line and, when given, moves progress and the current step (one round trip). */
/** One execution log line as the tracker collects it; `at` is when it was said, not when it was written. */
export interface LogLine {
  message: string;
  at: Date;
  level?: string;
  step?: string;
  progress?: number;
  modelId?: string;
}

/**
 * Appends log lines (in the given order) to a running execution in one statement, and moves its
 * log_count, current step (the last line's step), progress (never backwards) and model id along.
 * Lines of an execution that already finished are dropped: the final line is always the last.
 */
export async function appendLogs(sql: Sql, tenantId: string, executionId: string, lines: LogLine[]): Promise<void> {
  if (lines.length === 0) return;
  const lastOf = (pick: (l: LogLine) => string | undefined) =>
    lines
      .map(pick)
      .filter((v) => v !== undefined)
      .at(-1) ?? null;
  const progress = lines.reduce<number | null>((m, l) => (l.progress === undefined ? m : Math.max(m ?? 0, l.progress)), null);
  await sql`
    WITH running AS (
      SELECT execution_id FROM executions
      WHERE execution_id = ${executionId} AND tenant_id = ${tenantId} AND status = 'running'
      FOR UPDATE
    ), l AS (
      INSERT INTO execution_logs (execution_id, tenant_id, logged_at, level, message)
      SELECT running.execution_id, ${tenantId}, x.at, x.level, x.message
      FROM running, unnest(${lines.map((l) => l.at.toISOString())}::timestamptz[], ${lines.map((l) => l.level ?? 'info')}::text[],
        ${lines.map((l) => l.message)}::text[]) WITH ORDINALITY AS x(at, level, message, n)
      ORDER BY x.n
      RETURNING 1
    )
    UPDATE executions SET
      log_count = log_count + (SELECT count(*) FROM l),
      updated_at = clock_timestamp(),
      current_step = COALESCE(${lastOf((l) => l.step)}, current_step),
      progress_percent = GREATEST(progress_percent, COALESCE(${progress}::int, progress_percent)),
      model_id = COALESCE(${lastOf((l) => l.modelId)}, model_id)
    WHERE execution_id = (SELECT execution_id FROM running)`;
}

export interface Finish {
  tenantId: string;
  executionId: string;
  status: 'completed' | 'failed';
  message: string;
  resultSummary?: string;
  error?: string;
  images: number;
  eventsPrefix: string;
}

/**
 * Marks the execution finished, appends the last log line and writes ExecutionFinished to the
 * outbox, all in one transaction. A no-op when the execution is already finished: the answer then is
 * false (e.g. a reaper marked it failed while its process could not reach the database).
 */
export async function finishExecution(sql: Sql, f: Finish): Promise<boolean> {
  return sql.begin(async (tx: TransactionSql) => {
    const [row] = await tx`
      UPDATE executions SET
        status = ${f.status},
        progress_percent = CASE WHEN ${f.status} = 'completed' THEN 100 ELSE progress_percent END,
        current_step = ${f.status === 'completed' ? 'completed' : 'failed'},
        completed_at = clock_timestamp(),
        updated_at = clock_timestamp(),
        duration_ms = GREATEST(0, round(EXTRACT(EPOCH FROM (clock_timestamp() - started_at)) * 1000))::bigint,
        result_summary = ${f.resultSummary ?? null},
        error = ${f.error ?? null},
        images = ${f.images},
        log_count = log_count + 1
      WHERE execution_id = ${f.executionId} AND tenant_id = ${f.tenantId} AND status = 'running'
      RETURNING session_id, tool_name, duration_ms, key_type, completed_at`;
    if (!row) return false;
    await tx`INSERT INTO execution_logs (execution_id, tenant_id, level, message)
      VALUES (${f.executionId}, ${f.tenantId}, ${f.status === 'failed' ? 'error' : 'info'}, ${f.message})`;
    await writeOutbox(tx, {
      subject: subjectFor(f.eventsPrefix, 'generation.execution_finished'),
      data: ExecutionFinished.encode({
        tenantId: f.tenantId,
        executionId: f.executionId,
        sessionId: row.session_id as string,
        toolName: row.tool_name as string,
        status: f.status,
        durationMs: Number(row.duration_ms),
        occurredAt: (row.completed_at as Date).toISOString(),
        keyType: row.key_type as string,
        images: f.images,
      }).finish(),
    });
    return true;
  });
}

async function logsFor(sql: Sql, tenantId: string, ids: string[]): Promise<Map<string, LogEntry[]>> {
  const out = new Map<string, LogEntry[]>();
  if (ids.length === 0) return out;
  const rows = await sql`
    SELECT execution_id, logged_at, level, message FROM execution_logs
    WHERE tenant_id = ${tenantId} AND execution_id = ANY(${ids}::text[]) ORDER BY id`;
  for (const r of rows) {
    const list = out.get(r.execution_id as string) ?? [];
    list.push({ timestamp: (r.logged_at as Date).toISOString(), message: r.message as string, level: r.level as string });
    out.set(r.execution_id as string, list);
  }
  return out;
}

export async function getExecution(sql: Sql, tenantId: string, executionId: string, includeLogs: boolean): Promise<Execution | undefined> {
  const [row] = (await sql`SELECT ${sql.unsafe(COLUMNS)} FROM executions
    WHERE tenant_id = ${tenantId} AND execution_id = ${executionId}`) as unknown as Row[];
  if (!row) return undefined;
  const logs = includeLogs ? ((await logsFor(sql, tenantId, [executionId])).get(executionId) ?? []) : [];
  return toExecution(row, logs);
}

export async function listSessionExecutions(
  sql: Sql,
  tenantId: string,
  sessionId: string,
  opts: { limit: number; includeLogs: boolean; activeOrFinishedSince?: string },
): Promise<{ executions: Execution[]; total: number }> {
  const since = opts.activeOrFinishedSince ? new Date(opts.activeOrFinishedSince) : undefined;
  const filter = since ? sql`AND (status = 'running' OR completed_at >= ${since})` : sql``;
  const rows = (await sql`SELECT ${sql.unsafe(COLUMNS)} FROM executions
    WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} ${filter}
    ORDER BY started_at DESC LIMIT ${opts.limit}`) as unknown as Row[];
  const [{ n }] =
    await sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} ${filter}`;
  const logs = opts.includeLogs
    ? await logsFor(
        sql,
        tenantId,
        rows.map((r) => r.execution_id),
      )
    : new Map();
  return { executions: rows.map((r) => toExecution(r, logs.get(r.execution_id) ?? [])), total: n as number };
}

export async function listActiveExecutions(sql: Sql, tenantId: string, limit: number): Promise<{ executions: Execution[]; total: number }> {
  const rows = (await sql`SELECT ${sql.unsafe(COLUMNS)} FROM executions
    WHERE tenant_id = ${tenantId} AND status = 'running' ORDER BY started_at DESC LIMIT ${limit}`) as unknown as Row[];
  const [{ n }] = await sql`SELECT count(*)::int AS n FROM executions WHERE tenant_id = ${tenantId} AND status = 'running'`;
  return { executions: rows.map((r) => toExecution(r)), total: n as number };
}

/** The execution's status, or undefined when there is none. */
export async function executionStatus(sql: Sql, tenantId: string, executionId: string): Promise<ExecutionStatus | undefined> {
  const [r] = await sql`SELECT status FROM executions WHERE tenant_id = ${tenantId} AND execution_id = ${executionId}`;
  return r?.status as ExecutionStatus | undefined;
}

/** Records that this generation process is alive (see failOrphanedExecutions). */
export async function heartbeat(sql: Sql, instanceId: string): Promise<void> {
  await sql`INSERT INTO instances (instance_id) VALUES (${instanceId})
    ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = now()`;
}

/** Removes this process's liveness row on a clean stop (its executions have finished by then). */
export async function removeInstance(sql: Sql, instanceId: string): Promise<void> {
  await sql`DELETE FROM instances WHERE instance_id = ${instanceId}`;
}

/**
 * Marks failed (with their ExecutionFinished event) the running executions whose process is gone: its
 * heartbeat is older than `deadAfterMs`, or its liveness row was removed. Executions from before instance
 * ids (instance_id NULL) are failed when they made no progress for `staleMs`. Run by every replica:
 * finishExecution only moves a row that is still running, so two reapers never finish one twice.
 */
export async function failOrphanedExecutions(
  sql: Sql,
  opts: { deadAfterMs: number; staleMs: number; eventsPrefix: string },
): Promise<number> {
  const orphans = await sql`
    SELECT e.execution_id, e.tenant_id FROM executions e
    LEFT JOIN instances i ON i.instance_id = e.instance_id
    WHERE e.status = 'running' AND (
      (e.instance_id IS NOT NULL AND (i.instance_id IS NULL OR i.heartbeat_at < now() - ${`${opts.deadAfterMs} milliseconds`}::interval)
        AND e.started_at < now() - ${`${opts.deadAfterMs} milliseconds`}::interval)
      OR (e.instance_id IS NULL AND e.updated_at < now() - ${`${opts.staleMs} milliseconds`}::interval))
    LIMIT 500`;
  let n = 0;
  for (const o of orphans) {
    const moved = await finishExecution(sql, {
      tenantId: o.tenant_id as string,
      executionId: o.execution_id as string,
      status: 'failed',
      message: 'Failed: the worker running this execution stopped',
      resultSummary: 'Failed: the worker running this execution stopped',
      error: 'Execution abandoned: the worker stopped',
      images: 0,
      eventsPrefix: opts.eventsPrefix,
    });
    if (moved) n++;
  }
  // Liveness rows of processes long gone (their executions are all finished by now).
  await sql`DELETE FROM instances i WHERE heartbeat_at < now() - interval '1 day'
    AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.instance_id = i.instance_id AND e.status = 'running')`;
  return n;
}
