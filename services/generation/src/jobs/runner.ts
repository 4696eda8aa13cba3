import type { Logger, Sql } from '@imagegen/platform';
import type { CancelRegistry } from './cancels.js';
import { type ClaimedJob, cancelsFor, claimNextJob } from './queue.js';

export interface JobRunnerOptions {
  sql: Sql;
  instanceId: string;
  logger: Logger;
  cancels: CancelRegistry;
  /** Runs a claimed job to its end (GenerationPipeline.runJob); never rejects. */
  run(job: ClaimedJob, signal: AbortSignal): Promise<void>;
  /** Jobs this process runs at once (JOB_WORKERS). */
  workers: number;
  /** A tenant's jobs running at once, across replicas (JOBS_RUNNING_PER_TENANT). */
  runningPerTenant: number;
  /** How often to look for jobs and for cancels (JOB_POLL_MS). */
  pollMs: number;
}

/**
 * One generation process's share of the job queue: every `pollMs` (and at once after a submit here or a job's end)
 * it claims jobs until it runs `workers` of them or none is left, and it aborts the executions it runs whose cancel
 * was asked for. A failed look-up (the database away) is logged and tried again at the next tick.
 */
export class JobRunner {
  private active = new Map<string, Promise<void>>();
  private claiming?: Promise<void>;
  private again = false;
  private stopping = false;
  private timer?: NodeJS.Timeout;

  constructor(private readonly opts: JobRunnerOptions) {}

  start(): void {
    this.timer = setInterval(() => {
      this.wake();
      void this.checkCancels();
    }, this.opts.pollMs);
    this.timer.unref();
    this.wake();
  }

  /** Claims jobs now (a job was queued here, or one ended). */
  wake(): void {
    if (this.stopping) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = this.claimWhileRoom()
      .catch((err) => this.opts.logger.warn({ err }, 'could not claim queued jobs; trying again at the next tick'))
      .finally(() => {
        this.claiming = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async claimWhileRoom(): Promise<void> {
    while (!this.stopping && this.active.size < this.opts.workers) {
      const job = await claimNextJob(this.opts.sql, this.opts.instanceId, this.opts.runningPerTenant);
      if (!job) return;
      const cancel = this.opts.cancels.track(job.executionId);
      const run = this.opts
        .run(job, cancel.signal)
        .catch((err) => this.opts.logger.error({ err, executionId: job.executionId }, 'job ended with an unexpected error'))
        .finally(() => {
          cancel.done();
          this.active.delete(job.executionId);
          this.wake();
        });
      this.active.set(job.executionId, run);
    }
  }

  /** Aborts the executions running here whose cancel was asked for (through any replica). */
  async checkCancels(): Promise<void> {
    if (this.opts.cancels.running().length === 0) return;
    try {
      for (const id of await cancelsFor(this.opts.sql, this.opts.instanceId)) this.opts.cancels.abort(id);
    } catch (err) {
      this.opts.logger.debug({ err }, 'could not read cancels');
    }
  }

  /** Stops claiming and waits for the jobs running here (at most `graceMs`; what is left the orphan reaper ends). */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    await this.claiming;
    if (this.active.size > 0) await Promise.race([Promise.all(this.active.values()), new Promise((r) => setTimeout(r, graceMs))]);
  }
}
