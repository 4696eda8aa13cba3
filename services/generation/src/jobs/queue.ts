import type { Execution } from '@imagegen/contracts/generation/v1/generation';
import { AppError, type DirectPublisher, notFound, type Principal, type Sql } from '@imagegen/platform';
import { executionExists, finishExecution, getExecution, type NewExecution } from '../store.js';

/**
 * The durable job queue (issue 37), in PostgreSQL: a job is its execution row, written 'queued' with the request
 * it runs and the caller it runs as. Every generation replica claims jobs with FOR UPDATE SKIP LOCKED, so N
 * replicas share one queue without a coordinator, and a job is claimed once: it is 'running' on one process from
 * then on (a process that dies leaves it to the orphan reaper, which fails it: a provider call is never made twice).
 *
 * Fairness: a claim serves the tenant with the fewest running jobs first (then the one whose next job waited
 * longest), and never starts more than `runningPerTenant` jobs of one tenant. So one tenant's thousand queued jobs
 * hold at most that many slots, and another tenant's first job waits at most for one job to end. A tenant's
 * claim is serialised by a transaction advisory lock, so replicas claiming side by side never exceed the cap.
 */

/** The caller a job runs as: the principal without its per-request parts. */
export type JobPrincipal = Pick<Principal, 'tenantId' | 'keyType' | 'scopes' | 'source' | 'sessionId' | 'requestId'>;

/** An execution to queue (NewExecution's fields, without a process or a step yet) and the job it runs. */
export type NewJob = Pick<
  NewExecution,
  'executionId' | 'tenantId' | 'sessionId' | 'toolName' | 'toolSource' | 'modelId' | 'keyType' | 'firstLog'
> & {
  /** GenerateImagesRequest, encoded. */
  request: Uint8Array;
  principal: JobPrincipal;
  operation: string;
  presentation: string;
};

/** A job this process claimed: what ExecutionTracker.attach takes, and the job it runs. */
export type ClaimedJob = Pick<NewExecution, 'executionId' | 'tenantId' | 'sessionId' | 'toolName' | 'keyType'> & {
  startedAt: Date;
  request: Uint8Array;
  principal: JobPrincipal;
};

const tenantLock = (tenantId: string) => `jobs:${tenantId}`;

/** 429 with Retry-After: the tenant's queue holds `max` jobs already. */
export const queueFull = (max: number) => {
  const e = new AppError(429, { error: 'Job queue is full', details: [`at most ${max} jobs may wait per tenant`] });
  e.headers['retry-after'] = '30';
  return e;
};

/**
 * Queues a job; its position (1 = next). 429 when the tenant has `maxQueued` waiting, 409 when its id is taken. One
 * statement (one round trip): the depth is read in the statement's snapshot, so submits racing it may each see
 * room, and the bound can be passed by the submits of that tenant in flight at that instant (a few, never a flood:
 * each is a request the gateway admitted).
 */
export async function enqueueJob(sql: Sql, job: NewJob, maxQueued: number): Promise<{ position: number }> {
  let row: { n: number; queued: boolean } | undefined;
  try {
    [row] = (await sql`
      WITH depth AS (
        SELECT count(*)::int AS n FROM (SELECT 1 FROM executions
          WHERE tenant_id = ${job.tenantId} AND status = 'queued' LIMIT ${maxQueued}) q
      ), x AS (
        INSERT INTO executions (execution_id, tenant_id, session_id, tool_name, tool_source, status, current_step, model_id, key_type,
          log_count, queued_at, started_at, updated_at, job_request, job_principal, operation, presentation)
        SELECT ${job.executionId}, ${job.tenantId}, ${job.sessionId}, ${job.toolName}, ${job.toolSource}, 'queued', 'queued',
          ${job.modelId}, ${job.keyType}, 1, clock_timestamp(), clock_timestamp(), clock_timestamp(), ${Buffer.from(job.request)},
          ${sql.json(job.principal as never)}, ${job.operation}, ${job.presentation}
        FROM depth WHERE depth.n < ${maxQueued}
        RETURNING execution_id, tenant_id, queued_at
      ), l AS (
        INSERT INTO execution_logs (execution_id, tenant_id, logged_at, message)
        SELECT execution_id, tenant_id, queued_at, ${job.firstLog} FROM x
      )
      SELECT depth.n, EXISTS (SELECT 1 FROM x) AS queued FROM depth`) as unknown as { n: number; queued: boolean }[];
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw executionExists(job.executionId);
    throw err;
  }
  if (!row?.queued) throw queueFull(maxQueued);
  return { position: row.n + 1 };
}

/**
 * Claims the next job for this process: the least busy tenant with a queued job and a free slot, its oldest job.
 * Undefined when there is none.
 */
export async function claimNextJob(sql: Sql, instanceId: string, runningPerTenant: number): Promise<ClaimedJob | undefined> {
  // The tenants with queued jobs (a skip scan over executions_queued: one probe per tenant, not per job), with
  // their running jobs and their next job's age. A hint only: each is checked again under its lock.
  const candidates = await sql`
    WITH RECURSIVE t(tenant_id) AS (
      (SELECT tenant_id FROM executions WHERE status = 'queued' ORDER BY tenant_id LIMIT 1)
      UNION ALL
      SELECT (SELECT e.tenant_id FROM executions e WHERE e.status = 'queued' AND e.tenant_id > t.tenant_id ORDER BY e.tenant_id LIMIT 1)
      FROM t WHERE t.tenant_id IS NOT NULL
    )
    SELECT t.tenant_id,
      (SELECT count(*)::int FROM executions r WHERE r.tenant_id = t.tenant_id AND r.status = 'running' AND r.queued_at IS NOT NULL) AS running,
      (SELECT min(q.queued_at) FROM executions q WHERE q.tenant_id = t.tenant_id AND q.status = 'queued') AS oldest
    FROM t WHERE t.tenant_id IS NOT NULL
    ORDER BY running, oldest
    LIMIT 50`;
  for (const c of candidates) {
    if ((c.running as number) >= runningPerTenant) continue;
    const job = await sql.begin(async (tx) => {
      const [{ locked }] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${tenantLock(c.tenant_id as string)})) AS locked`;
      if (!locked) return undefined; // another replica claims for this tenant right now
      const [{ running }] = await tx`SELECT count(*)::int AS running FROM executions
        WHERE tenant_id = ${c.tenant_id as string} AND status = 'running' AND queued_at IS NOT NULL`;
      if ((running as number) >= runningPerTenant) return undefined;
      const [row] = await tx`
        WITH next AS (
          SELECT execution_id FROM executions WHERE tenant_id = ${c.tenant_id as string} AND status = 'queued'
            AND NOT cancel_requested -- being cancelled: it never runs
          ORDER BY queued_at, execution_id LIMIT 1 FOR UPDATE SKIP LOCKED
        )
        UPDATE executions e SET status = 'running', current_step = 'starting', instance_id = ${instanceId},
          started_at = clock_timestamp(), updated_at = clock_timestamp()
        FROM next WHERE e.execution_id = next.execution_id
        RETURNING e.execution_id, e.tenant_id, e.session_id, e.tool_name, e.key_type, e.started_at, e.job_request, e.job_principal`;
      return row;
    });
    if (job)
      return {
        executionId: job.execution_id as string,
        tenantId: job.tenant_id as string,
        sessionId: job.session_id as string,
        toolName: job.tool_name as string,
        keyType: job.key_type as string,
        startedAt: job.started_at as Date,
        request: job.job_request as Uint8Array,
        principal: job.job_principal as JobPrincipal,
      };
  }
  return undefined;
}

/**
 * Cancels an execution of the tenant: a queued one ends 'cancelled' at once (with its ExecutionFinished event); a
 * running one is marked, and the process running it aborts it (see JobRunner). 404 for an unknown id (or another
 * tenant's), 409 once it has finished.
 */
export async function cancelExecution(
  sql: Sql,
  tenantId: string,
  executionId: string,
  opts: { eventsPrefix: string; outbox?: DirectPublisher },
): Promise<Execution> {
  const [marked] = await sql`
    UPDATE executions SET cancel_requested = true, updated_at = clock_timestamp()
    WHERE tenant_id = ${tenantId} AND execution_id = ${executionId} AND status IN ('queued', 'running')
    RETURNING status, session_id, tool_name, key_type, started_at`;
  if (!marked) {
    const e = await getExecution(sql, tenantId, executionId, false);
    if (!e) throw notFound('Execution not found');
    throw new AppError(409, { error: `Execution already ${e.status}` });
  }
  if (marked.status === 'queued') {
    await finishExecution(sql, {
      tenantId,
      executionId,
      status: 'cancelled',
      message: 'Cancelled before it started',
      resultSummary: 'Cancelled',
      error: 'Execution cancelled',
      imageIds: [],
      eventsPrefix: opts.eventsPrefix,
      outbox: opts.outbox,
      execution: {
        sessionId: marked.session_id as string,
        toolName: marked.tool_name as string,
        keyType: marked.key_type as string,
        startedAt: marked.started_at as Date,
      },
    });
  }
  return (await getExecution(sql, tenantId, executionId, false)) as Execution;
}

/** The executions this process runs whose cancel was asked for. */
export async function cancelsFor(sql: Sql, instanceId: string): Promise<string[]> {
  const rows = await sql`SELECT execution_id FROM executions
    WHERE instance_id = ${instanceId} AND status = 'running' AND cancel_requested`;
  return rows.map((r) => r.execution_id as string);
}
