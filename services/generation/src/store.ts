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
        INSERT INTO executions (execution_id, tenant_id, session_id, tool_name, tool_source, status, current_step, model_id, key_type, log_count)
        VALUES (${e.executionId}, ${e.tenantId}, ${e.sessionId}, ${e.toolName}, ${e.toolSource}, 'running', ${e.currentStep}, ${e.modelId}, ${e.keyType}, 1)
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
 * outbox, all in one transaction. A no-op when the execution is already finished.
 */
export async function finishExecution(sql: Sql, f: Finish): Promise<void> {
  await sql.begin(async (tx: TransactionSql) => {
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
    if (!row) return;
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

/**
 * Executions still 'running' long after any provider timeout belong to a process that died: mark
 * them failed (with their ExecutionFinished event) so they leave the active lists.
 */
export async function failStaleExecutions(sql: Sql, olderThanMs: number, eventsPrefix: string): Promise<number> {
  const stale = await sql`SELECT execution_id, tenant_id FROM executions
    WHERE status = 'running' AND updated_at < now() - ${`${olderThanMs} milliseconds`}::interval LIMIT 500`;
  for (const s of stale) {
    await finishExecution(sql, {
      tenantId: s.tenant_id as string,
      executionId: s.execution_id as string,
      status: 'failed',
      message: 'Execution abandoned: no progress was recorded (the worker stopped)',
      error: 'Execution abandoned',
      images: 0,
      eventsPrefix,
    });
  }
  return stale.length;
}
