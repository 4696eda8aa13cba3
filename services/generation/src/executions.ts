import {
  AppError,
  type DirectPublisher,
  dependencyUnavailable,
  invalidPayload,
  isAppError,
  type Logger,
  lazyChildLogger,
  neverReachedServer,
  type Sql,
} from '@imagegen/platform';
import {
  appendLogs,
  createExecution,
  type ExecutionFacts,
  executionStatus,
  finishExecution,
  type LogLine,
  type NewExecution,
} from './store.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The execution id a GenerateImages / EditImage / UploadForEditing caller chose (execution_id), lower-cased, for
 * the execution the call starts; undefined when it chose none. It must be a UUID (400, checked here) and unused: the
 * execution's insert answers 409 when it is taken (its unique key; no look-up before it, since every gateway and MCP
 * call names its execution and a look-up would be one more round trip on each). Passed on as a parameter, not in
 * async context: an AsyncLocalStorage turns on promise hooks for the whole process, a cost paid on every generated
 * image (docs/BENCHMARKS.md).
 */
export function requestedExecutionId(executionId: string | undefined): string | undefined {
  if (executionId === undefined) return undefined;
  if (!UUID.test(executionId)) throw invalidPayload(['execution_id must be a UUID']);
  return executionId.toLowerCase();
}

/**
 * The execution of one generate / edit / upload: status running -> completed | failed, progress,
 * current step and timed log lines, persisted as they happen so the SSE streams can follow them.
 * Log writes never fail the operation itself.
 */
export class ExecutionTracker {
  private finished = false;
  /**
   * Log lines wait in `pending` for LOG_BATCH_MS, then are written in order, in batches, one write at a time
   * (`writing`): the pipeline never waits for them, and lines said close together go out in one statement.
   * Finishing takes the lines still waiting into its own statement (after any write in flight), so the final
   * line is always the last and counted, and a quick execution writes its log lines with its outcome.
   */
  private writing: Promise<void> = Promise.resolve();
  private pending: LogLine[] = [];
  /** Settled when the lines in `pending` are stored (or given up). */
  private batch?: { done: Promise<void>; settle: () => void };
  private timer?: NodeJS.Timeout;

  private constructor(
    private readonly sql: Sql,
    readonly executionId: string,
    readonly tenantId: string,
    /** What its ExecutionFinished event repeats (so finishing reads nothing back). */
    private readonly facts: ExecutionFacts,
    private readonly eventsPrefix: string,
    private readonly logger: Logger,
    /** Publishes ExecutionFinished right after the statement that wrote it (the relay's direct publishing). */
    private readonly outbox?: DirectPublisher,
  ) {}

  static async start(sql: Sql, e: NewExecution, eventsPrefix: string, logger: Logger, outbox?: DirectPublisher): Promise<ExecutionTracker> {
    const startedAt = e.startedAt ?? new Date();
    await createExecution(sql, { ...e, startedAt });
    return ExecutionTracker.attach(sql, { ...e, startedAt }, eventsPrefix, logger, outbox);
  }

  /** The tracker of an execution that exists and runs here (a queued job this process claimed). */
  static attach(
    sql: Sql,
    e: Pick<NewExecution, 'executionId' | 'tenantId' | 'sessionId' | 'toolName' | 'keyType'> & { startedAt: Date },
    eventsPrefix: string,
    logger: Logger,
    outbox?: DirectPublisher,
  ): ExecutionTracker {
    const startedAt = e.startedAt;
    const facts = { sessionId: e.sessionId, toolName: e.toolName, keyType: e.keyType, startedAt };
    // Lazy: only failures log, and a pino child (its bindings through redaction) would cost every execution.
    return new ExecutionTracker(
      sql,
      e.executionId,
      e.tenantId,
      facts,
      eventsPrefix,
      lazyChildLogger(logger, { executionId: e.executionId }),
      outbox,
    );
  }

  /** Records a log line; resolves once it is stored (callers need not wait). Never rejects. */
  log(
    message: string,
    opts: { level?: 'info' | 'warn' | 'error'; step?: string; progress?: number; modelId?: string } = {},
  ): Promise<void> {
    if (this.finished) return Promise.resolve();
    this.pending.push({ message, at: new Date(), ...opts });
    if (!this.batch) {
      let settle = () => {};
      const done = new Promise<void>((r) => (settle = r));
      this.batch = { done, settle };
      this.timer = setTimeout(() => this.writeWaiting(), LOG_BATCH_MS);
    }
    return this.batch.done;
  }

  /** Hands the waiting lines to the writer (after the write in flight). */
  private writeWaiting(): void {
    const { lines, settle } = this.takeWaiting();
    if (lines.length === 0) return;
    this.writing = this.writing.then(async () => {
      try {
        await appendLogs(this.sql, this.tenantId, this.executionId, lines);
      } catch (err) {
        this.logger.warn({ err, lines: lines.length }, 'could not record execution log lines');
      }
      settle();
    });
  }

  private takeWaiting(): { lines: LogLine[]; settle: () => void } {
    clearTimeout(this.timer);
    this.timer = undefined;
    const lines = this.pending;
    const settle = this.batch?.settle ?? (() => {});
    this.pending = [];
    this.batch = undefined;
    return { lines, settle };
  }

  /** For the final write: the lines not written yet, once the write in flight (earlier lines) is done. */
  private async remainingLines(): Promise<{ lines: LogLine[]; settle: () => void }> {
    await this.writing;
    return this.takeWaiting();
  }

  step(step: string, progress: number, message: string): Promise<void> {
    return this.log(message, { step, progress });
  }

  /**
   * Writes the final 'completed' state (retrying a database that is briefly away, for up to
   * COMPLETE_RETRY_MS). When it cannot be written, or the execution is no longer running (a reaper failed
   * it while this process could not reach the database), the execution ends failed and this throws 503:
   * at once when no try reached the server (the write certainly did not land), else once the row tells:
   * the caller is then told the work failed, and nothing of it is listed or billed. `imageIds` (the images the
   * caller is told of) and `requested` (how many it asked for; default: as many) are kept on the row, so a caller
   * whose answer is lost can still be given it (GetExecution). A write that may have landed is read back for as long
   * as the caller waits (`signal`; at most OUTCOME_WAIT_MS without one): answering before the row tells would either
   * bill a 503 or report images that were never completed.
   */
  async complete(message: string, summary: string, imageIds: number[], requested?: number, signal?: AbortSignal): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    const earlier = await this.remainingLines();
    let moved: boolean | undefined;
    let mayHaveLanded = false;
    /** What each failed try answered (a code per try), for the log. */
    const tries: string[] = [];
    try {
      moved = await retrying(
        () =>
          finishExecution(this.sql, {
            tenantId: this.tenantId,
            executionId: this.executionId,
            status: 'completed',
            message,
            resultSummary: summary,
            imageIds,
            requested,
            eventsPrefix: this.eventsPrefix,
            outbox: this.outbox,
            execution: this.facts,
            earlier: earlier.lines,
          }),
        COMPLETE_RETRY_MS,
        (err) => {
          mayHaveLanded ||= !neverReachedServer(err);
          tries.push(String((err as { code?: unknown }).code ?? (err as Error).message));
        },
      );
    } catch (err) {
      this.logger.warn({ err, mayHaveLanded, tries }, 'could not confirm the completed state yet');
    }
    earlier.settle();
    if (moved) return;
    // Not confirmed. When no try reached the server (every connection refused or timed out before a statement
    // went out), nothing of ours landed: the execution is failed now, without waiting for the database. When
    // a try may have reached it, a write of ours may have committed with its answer lost (the connection died
    // at COMMIT), or a reaper failed the execution meanwhile: the row tells, and the caller waits for it (only
    // a database lost in the middle of this very write), so that the answer it gets and the bill always agree.
    const status =
      moved === undefined && !mayHaveLanded
        ? 'running'
        : await retrying(
            () => executionStatus(this.sql, this.tenantId, this.executionId),
            signal ? Number.POSITIVE_INFINITY : OUTCOME_WAIT_MS,
            undefined,
            signal,
          ).catch((err) => {
            this.logger.error({ err }, 'the outcome of the execution could not be read; answering 503');
            return undefined;
          });
    if (status === 'completed') return;
    if (status === 'cancelling') {
      // A cancel came before the completion: the job ends cancelled and its images are discarded (never billed).
      this.finished = false;
      this.pending = earlier.lines;
      await this.cancel();
      throw executionCancelled();
    }
    const unavailable = dependencyUnavailable();
    if (status === 'failed') {
      this.logger.warn('execution was failed by the orphan reaper before it completed (its process was presumed dead)');
    } else {
      this.finished = false;
      this.pending = earlier.lines; // they go out with the failed state instead
      // The database has just failed every try: the answer does not wait for this write too (it goes on in the
      // background).
      await this.fail(unavailable, 0);
    }
    throw unavailable;
  }

  /** Writes the final 'cancelled' state (a cancel was asked for); the library discards its pending images. */
  async cancel(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    const remaining = await this.remainingLines();
    try {
      await retrying(
        () =>
          finishExecution(this.sql, {
            tenantId: this.tenantId,
            executionId: this.executionId,
            status: 'cancelled',
            message: 'Cancelled',
            resultSummary: 'Cancelled',
            error: 'Execution cancelled',
            imageIds: [],
            eventsPrefix: this.eventsPrefix,
            outbox: this.outbox,
            execution: this.facts,
            earlier: remaining.lines,
          }),
        COMPLETE_RETRY_MS,
      );
    } catch (err) {
      // Still running with its cancel asked for: the orphan reaper or a retried cancel ends it.
      this.logger.warn({ err }, 'could not mark the execution cancelled');
    }
    remaining.settle();
  }

  /**
   * Writes the final 'failed' state. The first try is made at once; when the database is away the call
   * does not wait: the write is retried in the background until it lands (and if this process dies first,
   * the orphan reaper of any replica marks the execution failed from its missed heartbeats). The caller's answer
   * waits for the write at most `waitMs`.
   */
  async fail(err: unknown, waitMs = FAIL_WAIT_MS): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    const text = isAppError(err) ? err.body.error : 'Internal error';
    let earlier: LogLine[] = [];
    const write = () =>
      finishExecution(this.sql, {
        tenantId: this.tenantId,
        executionId: this.executionId,
        status: 'failed',
        message: `Failed: ${text}`,
        resultSummary: `Failed: ${text}`,
        error: text,
        imageIds: [],
        eventsPrefix: this.eventsPrefix,
        outbox: this.outbox,
        execution: this.facts,
        earlier,
      });
    const landed: Promise<void> = (async () => {
      const remaining = await this.remainingLines();
      earlier = remaining.lines;
      try {
        await write();
        remaining.settle();
      } catch (e) {
        remaining.settle();
        this.logger.warn({ err: e }, 'could not mark execution failed yet; retrying in the background');
        await retrying(write, Number.POSITIVE_INFINITY).then(
          () => this.logger.info('execution marked failed after retries'),
          (e2) => this.logger.error({ err: e2 }, 'could not mark execution failed (the orphan reaper will)'),
        );
      }
    })().finally(() => pendingFailures.delete(landed));
    pendingFailures.add(landed);
    // The caller's error answer does not wait for a database that is away (each try can take the 2 s
    // connect timeout): it waits at most FAIL_WAIT_MS, which a reachable database meets.
    if (waitMs > 0) await Promise.race([landed, new Promise((r) => setTimeout(r, waitMs))]);
  }
}

/** What a call whose execution was cancelled answers (POST /api/executions/:id/cancel). */
export const executionCancelled = () => new AppError(409, { error: 'Execution cancelled' });

/** How long a log line waits for others to go out with it (or with the final write). */
export const LOG_BATCH_MS = 50;
/**
 * How long complete() retries the final write while the caller waits: a database that refuses connections for
 * longer fails the request (503) within about this long (issue 35: in-flight requests answer within 2 s).
 */
export const COMPLETE_RETRY_MS = 500;
/** How long fail() holds the caller's error answer for the 'failed' write (the rest goes on in the background). */
export const FAIL_WAIT_MS = 500;
/** How long complete() waits to read the outcome of a final write whose answer was lost, when it has no caller's signal. */
export const OUTCOME_WAIT_MS = 30_000;

/** Background writes of failed states still retrying (drained on stop, see drainPendingFailures). */
const pendingFailures = new Set<Promise<void>>();
let abandonRetries = false;

/**
 * On a clean stop: gives the background writes of failed states up to `ms` to land, then stops retrying
 * (what is left is marked failed by another replica's orphan reaper, or this one's after a restart).
 */
export async function drainPendingFailures(ms: number): Promise<void> {
  if (pendingFailures.size > 0) await Promise.race([Promise.all([...pendingFailures]), new Promise((r) => setTimeout(r, ms))]);
  abandonRetries = true;
  await Promise.all([...pendingFailures]);
  abandonRetries = false;
}

/**
 * Runs `fn` until it succeeds, backing off 100 ms -> 2 s, for at most `budgetMs` or until `signal` aborts (the last
 * error is thrown; `onError` sees each).
 */
async function retrying<T>(fn: () => Promise<T>, budgetMs: number, onError?: (err: unknown) => void, signal?: AbortSignal): Promise<T> {
  const until = Date.now() + budgetMs;
  let wait = 100;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      onError?.(err);
      if (Date.now() + wait > until || abandonRetries || signal?.aborted) throw err;
      if (isAppError(err) && err.status < 500) throw err;
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(wait * 2, 2000);
    }
  }
}
