import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import type { Execution, LogEntry } from '@imagegen/contracts/generation/v1/generation';
import { type AppError, conflict, type DirectPublisher, NO_FLUSH_CTE, outboxInsert, type Sql, subjectFor } from '@imagegen/platform';

/** SQL of the generation schema: executions and their log lines. Every query filters by tenant. */

export type ExecutionStatus = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';

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
  /** When it started (default: now). The duration is measured on this process's clock from here (see finishExecution). */
  startedAt?: Date;
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
  /** Read by getExecution only (lists leave them out). */
  image_ids?: (string | number)[] | null;
  images_requested?: number | null;
  operation: string;
  presentation: string;
  cancel_requested: boolean;
  /** Queued jobs: their place in the tenant's queue (read by getExecution only). */
  position?: number | null;
}

const COLUMNS = `execution_id, session_id, tool_name, tool_source, status, progress_percent, current_step, model_id,
  started_at, completed_at, duration_ms, result_summary, error, log_count, operation, presentation, cancel_requested`;

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
    imageIds: (r.image_ids ?? []).map(Number),
    imagesRequested: r.images_requested ?? 0,
    position: r.position ?? 0,
    operation: r.operation,
    presentation: r.presentation,
    cancelRequested: r.cancel_requested,
  };
}

export const executionExists = (executionId: string): AppError => conflict(`Execution ${executionId} already exists`);

/**
 * The execution row and its first log line, in one statement (hence one transaction). An id that is taken
 * (a caller-chosen execution_id used twice) is 409 'Execution <id> already exists'.
 */
export async function createExecution(sql: Sql, e: NewExecution): Promise<void> {
  const startedAt = e.startedAt ?? new Date();
  try {
    // No flush wait: the final state (completed or failed) commits with one, after this (see NO_FLUSH_CTE).
    await sql`
      WITH ${sql.unsafe(NO_FLUSH_CTE)}, x AS (
        INSERT INTO executions (execution_id, tenant_id, session_id, tool_name, tool_source, status, current_step, model_id, key_type,
          log_count, instance_id, started_at, updated_at)
        VALUES (${e.executionId}, ${e.tenantId}, ${e.sessionId}, ${e.toolName}, ${e.toolSource}, 'running', ${e.currentStep}, ${e.modelId},
          ${e.keyType}, 1, ${e.instanceId ?? null}, ${startedAt}, ${startedAt})
        RETURNING execution_id, tenant_id
      )
      INSERT INTO execution_logs (execution_id, tenant_id, logged_at, message)
      SELECT execution_id, tenant_id, ${startedAt}, ${e.firstLog} FROM x, no_flush`;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw executionExists(e.executionId);
    throw err;
  }
}

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
  // Progress lines: no flush wait (see NO_FLUSH_CTE); the final line commits with the final state, flushed.
  await sql`
    WITH ${sql.unsafe(NO_FLUSH_CTE)}, running AS (
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
    WHERE execution_id = (SELECT execution_id FROM running) AND (SELECT off FROM no_flush) IS NOT NULL`;
}

/** What the ExecutionFinished event says of the execution besides its outcome (known to whoever started or reaps it). */
export interface ExecutionFacts {
  sessionId: string;
  toolName: string;
  keyType: string;
  startedAt: Date;
}

export interface Finish {
  tenantId: string;
  executionId: string;
  status: 'completed' | 'failed' | 'cancelled';
  message: string;
  resultSummary?: string;
  error?: string;
  /** The images reported to the caller (completed executions; none for a failed one). */
  imageIds: number[];
  /** How many images the call asked for (completed executions; kept with imageIds, see GetExecution). */
  requested?: number;
  eventsPrefix: string;
  /** Publishes ExecutionFinished right after this statement committed (the relay's direct publishing). */
  outbox?: DirectPublisher;
  execution: ExecutionFacts;
  /** Log lines said before the end and not written yet: stored before the final line, in order. */
  earlier?: LogLine[];
}

/**
 * Marks the execution finished, appends its last log lines and writes ExecutionFinished to the outbox, in one
 * statement (atomic on its own: no transaction, one round trip). A no-op when the execution is already
 * finished: the answer then is false and no event is written (e.g. a reaper marked it failed while its process
 * could not reach the database). The event is built beforehand, so the end time and duration are taken on this
 * process's clock (started_at is written from it too).
 */
export async function finishExecution(sql: Sql, f: Finish): Promise<boolean> {
  const completedAt = new Date(Math.max(Date.now(), f.execution.startedAt.getTime()));
  const durationMs = completedAt.getTime() - f.execution.startedAt.getTime();
  const earlier = f.earlier ?? [];
  const lines: LogLine[] = [...earlier, { message: f.message, at: completedAt, level: f.status === 'failed' ? 'error' : 'info' }];
  const progress = earlier.reduce<number | null>((m, l) => (l.progress === undefined ? m : Math.max(m ?? 0, l.progress)), null);
  const modelId =
    earlier
      .map((l) => l.modelId)
      .filter((v) => v !== undefined)
      .at(-1) ?? null;
  const direct = f.outbox?.ready() ?? false;
  const event = outboxInsert(
    sql,
    {
      subject: subjectFor(f.eventsPrefix, 'generation.execution_finished'),
      data: ExecutionFinished.encode({
        tenantId: f.tenantId,
        executionId: f.executionId,
        sessionId: f.execution.sessionId,
        toolName: f.execution.toolName,
        status: f.status,
        durationMs,
        occurredAt: completedAt.toISOString(),
        keyType: f.execution.keyType,
        images: f.imageIds.length,
        imageIds: f.imageIds,
        // What a failed (or cancelled) execution's caller is told (the generation.failed webhook shows it).
        error: f.status === 'completed' ? undefined : f.error,
      }).finish(),
    },
    'done',
    { direct },
  );
  const [row] = await sql`
    WITH done AS (
      UPDATE executions SET
        status = ${f.status},
        progress_percent = CASE WHEN ${f.status} = 'completed' THEN 100
          ELSE GREATEST(progress_percent, COALESCE(${progress}::int, progress_percent)) END,
        current_step = ${f.status},
        completed_at = ${completedAt},
        updated_at = clock_timestamp(),
        duration_ms = ${durationMs},
        result_summary = ${f.resultSummary ?? null},
        error = ${f.error ?? null},
        images = ${f.imageIds.length},
        image_ids = ${f.status === 'completed' ? f.imageIds : null}::bigint[],
        images_requested = ${f.status === 'completed' ? (f.requested ?? f.imageIds.length) : null}::int,
        model_id = COALESCE(${modelId}, model_id),
        log_count = log_count + ${lines.length}
      -- A queued job ends here only when cancelled; a cancel asked for stops a completion (the job ends cancelled).
      WHERE execution_id = ${f.executionId} AND tenant_id = ${f.tenantId}
        AND status IN ('running', ${f.status === 'cancelled' ? 'queued' : 'running'})
        AND (${f.status !== 'completed'} OR NOT cancel_requested)
      RETURNING execution_id, tenant_id
    ), line AS (
      INSERT INTO execution_logs (execution_id, tenant_id, logged_at, level, message)
      SELECT done.execution_id, done.tenant_id, x.at, x.level, x.message
      FROM done, unnest(${lines.map((l) => l.at.toISOString())}::timestamptz[], ${lines.map((l) => l.level ?? 'info')}::text[],
        ${lines.map((l) => l.message)}::text[]) WITH ORDINALITY AS x(at, level, message, n)
      ORDER BY x.n
    ), ev AS (${event.insert})
    SELECT execution_id, ${event.notify} FROM done`;
  if (row && direct) f.outbox?.publish([event.event]);
  return !!row;
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
  // A queued job's position: the tenant's queued jobs ahead of it, plus one (at most JOBS_QUEUED_PER_TENANT rows).
  const [row] = (await sql`SELECT ${sql.unsafe(COLUMNS)}, image_ids, images_requested,
      CASE WHEN e.status = 'queued' THEN (SELECT count(*)::int + 1 FROM executions q WHERE q.tenant_id = e.tenant_id
        AND q.status = 'queued' AND (q.queued_at, q.execution_id) < (e.queued_at, e.execution_id)) END AS position
    FROM executions e WHERE tenant_id = ${tenantId} AND execution_id = ${executionId}`) as unknown as Row[];
  if (!row) return undefined;
  const logs = includeLogs ? ((await logsFor(sql, tenantId, [executionId])).get(executionId) ?? []) : [];
  return toExecution(row, logs);
}

/** Totals of execution lists are counted up to this many rows (as the image lists): above it, `totalIsExact` is false. */
export const TOTAL_CAP = 1000;

/** A bounded count: at most TOTAL_CAP + 1 rows of `from` are read (through its index). */
async function cappedTotal(sql: Sql, from: ReturnType<Sql>): Promise<{ total: number; totalIsExact: boolean }> {
  const [{ n }] = await sql`SELECT count(*)::int AS n FROM (SELECT 1 ${from} LIMIT ${TOTAL_CAP + 1}) capped`;
  return { total: Math.min(n as number, TOTAL_CAP), totalIsExact: (n as number) <= TOTAL_CAP };
}

export interface ExecutionList {
  executions: Execution[];
  total: number;
  totalIsExact: boolean;
}

export async function listSessionExecutions(
  sql: Sql,
  tenantId: string,
  sessionId: string,
  opts: { limit: number; includeLogs: boolean; activeOrFinishedSince?: string },
): Promise<ExecutionList> {
  const since = opts.activeOrFinishedSince ? new Date(opts.activeOrFinishedSince) : undefined;
  const filter = since ? sql`AND (status = 'running' OR completed_at >= ${since})` : sql``;
  const [rows, total] = await Promise.all([
    sql`SELECT ${sql.unsafe(COLUMNS)} FROM executions
      WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} ${filter}
      ORDER BY started_at DESC LIMIT ${opts.limit}` as unknown as Promise<Row[]>,
    cappedTotal(sql, sql`FROM executions WHERE tenant_id = ${tenantId} AND session_id = ${sessionId} ${filter}`),
  ]);
  const logs = opts.includeLogs
    ? await logsFor(
        sql,
        tenantId,
        rows.map((r) => r.execution_id),
      )
    : new Map();
  return { executions: rows.map((r) => toExecution(r, logs.get(r.execution_id) ?? [])), ...total };
}

/**
 * The tenant's running and queued executions, newest first. Two index scans (executions_running, executions_queued),
 * each bounded by the page, merged: one `status IN (...)` scan would read the tenant's whole history.
 */
export async function listActiveExecutions(sql: Sql, tenantId: string, limit: number): Promise<ExecutionList> {
  const [rows, running, queued] = await Promise.all([
    sql`SELECT * FROM (
        (SELECT ${sql.unsafe(COLUMNS)} FROM executions WHERE tenant_id = ${tenantId} AND status = 'running'
          ORDER BY started_at DESC LIMIT ${limit})
        UNION ALL
        (SELECT ${sql.unsafe(COLUMNS)} FROM executions WHERE tenant_id = ${tenantId} AND status = 'queued'
          ORDER BY queued_at DESC, execution_id DESC LIMIT ${limit})
      ) active ORDER BY started_at DESC LIMIT ${limit}` as unknown as Promise<Row[]>,
    cappedTotal(sql, sql`FROM executions WHERE tenant_id = ${tenantId} AND status = 'running'`),
    cappedTotal(sql, sql`FROM executions WHERE tenant_id = ${tenantId} AND status = 'queued'`),
  ]);
  const total = running.total + queued.total;
  return {
    executions: rows.map((r) => toExecution(r)),
    total: Math.min(total, TOTAL_CAP),
    totalIsExact: running.totalIsExact && queued.totalIsExact && total <= TOTAL_CAP,
  };
}

/** The execution's status ('cancelling' when it runs and a cancel was asked for), or undefined when there is none. */
export async function executionStatus(
  sql: Sql,
  tenantId: string,
  executionId: string,
): Promise<ExecutionStatus | 'cancelling' | undefined> {
  const [r] = await sql`SELECT status, cancel_requested FROM executions WHERE tenant_id = ${tenantId} AND execution_id = ${executionId}`;
  if (r?.status === 'running' && r.cancel_requested) return 'cancelling';
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
    SELECT e.execution_id, e.tenant_id, e.session_id, e.tool_name, e.key_type, e.started_at FROM executions e
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
      imageIds: [],
      eventsPrefix: opts.eventsPrefix,
      execution: {
        sessionId: o.session_id as string,
        toolName: o.tool_name as string,
        keyType: o.key_type as string,
        startedAt: o.started_at as Date,
      },
    });
    if (moved) n++;
  }
  // Liveness rows of processes long gone (their executions are all finished by now).
  await sql`DELETE FROM instances i WHERE heartbeat_at < now() - interval '1 day'
    AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.instance_id = i.instance_id AND e.status = 'running')`;
  return n;
}
