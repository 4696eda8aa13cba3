import { isAppError, type Logger, type Sql } from '@imagegen/platform';
import { appendLog, createExecution, finishExecution, type NewExecution } from './store.js';

/**
 * The execution of one generate / edit / upload: status running -> completed | failed, progress,
 * current step and timed log lines, persisted as they happen so the SSE streams can follow them.
 * Log writes never fail the operation itself.
 */
export class ExecutionTracker {
  private finished = false;
  /** Log writes are queued (in order) so the pipeline never waits for them; finishing drains the queue. */
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly sql: Sql,
    readonly executionId: string,
    readonly tenantId: string,
    private readonly eventsPrefix: string,
    private readonly logger: Logger,
  ) {}

  static async start(sql: Sql, e: NewExecution, eventsPrefix: string, logger: Logger): Promise<ExecutionTracker> {
    await createExecution(sql, e);
    return new ExecutionTracker(sql, e.executionId, e.tenantId, eventsPrefix, logger.child({ executionId: e.executionId }));
  }

  async log(
    message: string,
    opts: { level?: 'info' | 'warn' | 'error'; step?: string; progress?: number; modelId?: string } = {},
  ): Promise<void> {
    if (this.finished) return;
    try {
      await appendLog(this.sql, this.tenantId, this.executionId, message, opts);
    } catch (err) {
      this.logger.warn({ err }, 'could not record execution log line');
    }
  }

  step(step: string, progress: number, message: string): Promise<void> {
    return this.log(message, { step, progress });
  }

  async complete(message: string, summary: string, images: number): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.queue;
    await finishExecution(this.sql, {
      tenantId: this.tenantId,
      executionId: this.executionId,
      status: 'completed',
      message,
      resultSummary: summary,
      images,
      eventsPrefix: this.eventsPrefix,
    });
  }

  async fail(err: unknown): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.queue;
    const text = isAppError(err) ? err.body.error : 'Internal error';
    try {
      await finishExecution(this.sql, {
        tenantId: this.tenantId,
        executionId: this.executionId,
        status: 'failed',
        message: `Failed: ${text}`,
        resultSummary: `Failed: ${text}`,
        error: text,
        images: 0,
        eventsPrefix: this.eventsPrefix,
      });
    } catch (e) {
      this.logger.error({ err: e }, 'could not mark execution failed');
    }
  }
}
