import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';

/**
 * The one way a process and each of its services start and stop (issue 36, item 3).
 *
 * A start is a list of steps, each started in order by `step(name, start, stop?)`: the step's start runs now
 * and its `stop` (given what the start returned) is kept. `stop()` runs the kept stops in reverse order. Every
 * start and every stop is timed and logged with its name and milliseconds (`{step, ms}`). A start that
 * fails stops the steps already started, in reverse, and rethrows the failure: `startSteps` does that for
 * the function that builds a service, so a service writes no stop list and no try/catch of its own.
 *
 *   export const start: StartService = (ctx) =>
 *     startSteps({ logger: ctx.logger }, async (step) => {
 *       const sql = await step('database pool', () => createDb(url), (sql) => sql.end({ timeout: 5 }));
 *       await step('migrations', () => migrate(sql, SCHEMA, MIGRATIONS));
 *       const grpc = await step('grpc server', () => startGrpcServer({...}), (g) => g.stop(graceMs));
 *       return { grpcAddress: grpc.address };   // startSteps adds stop()
 *     });
 */

/**
 * Process-wide state read by readiness endpoints (runStandalone's ops server, the gateway's ops routes):
 * once `stopping` is set (the `readiness` step of startModules, the first to stop), readiness answers 503
 * so load balancers stop sending work while the modules drain.
 */
export const lifecycle = { stopping: false };

/** Starts one step now and keeps `stop` (called with what `start` returned) for `Steps.stop()`. */
export type Step = <T>(name: string, start: () => T | Promise<T>, stop?: (value: Awaited<T>) => unknown) => Promise<Awaited<T>>;

export interface Steps {
  step: Step;
  /** Names of the steps started and not stopped yet, in start order. */
  readonly started: readonly string[];
  /** True once stop() was called: a step started from then on is refused (StoppedWhileStarting). */
  readonly stopping: boolean;
  /**
   * Stops the started steps in reverse order, each timed and logged; a stop that fails is logged and the
   * others still run. Idempotent: a second call waits for the first.
   */
  stop(): Promise<void>;
}

export interface StepsOptions {
  logger: Logger;
  /** Level of the per-step lines (default 'debug'; the process-level steps of the stack and runStandalone log at 'info'). */
  level?: 'info' | 'debug';
}

/** A step was asked to start after stop() (e.g. SIGTERM while the process was starting). */
export class StoppedWhileStarting extends Error {
  constructor(step: string) {
    super(`stopped while starting (before ${step})`);
    this.name = 'StoppedWhileStarting';
  }
}

const elapsed = (t0: number) => Math.round((performance.now() - t0) * 10) / 10;

export function createSteps(opts: StepsOptions): Steps {
  const { logger } = opts;
  const level = opts.level ?? 'debug';
  const kept: { name: string; stop?: () => unknown }[] = [];
  let stopRequested = false;
  let stopping: Promise<void> | undefined;

  const runStop = async (entry: { name: string; stop?: () => unknown }) => {
    if (!entry.stop) return;
    const t0 = performance.now();
    try {
      await entry.stop();
      logger[level]({ step: entry.name, ms: elapsed(t0) }, `${entry.name}: stopped`);
    } catch (err) {
      logger.warn({ step: entry.name, ms: elapsed(t0), err }, `${entry.name}: failed to stop`);
    }
  };

  const step: Step = async <T>(name: string, start: () => T | Promise<T>, stop?: (value: Awaited<T>) => unknown): Promise<Awaited<T>> => {
    if (stopRequested) throw new StoppedWhileStarting(name);
    const t0 = performance.now();
    let value: Awaited<T>;
    try {
      value = await start();
    } catch (err) {
      logger[level]({ step: name, ms: elapsed(t0) }, `${name}: failed to start`);
      throw err;
    }
    const entry = { name, stop: stop ? () => stop(value) : undefined };
    if (stopRequested) {
      // stop() ran while this step was starting: it is undone at once, the caller's start ends here.
      await runStop(entry);
      throw new StoppedWhileStarting(name);
    }
    kept.push(entry);
    logger[level]({ step: name, ms: elapsed(t0) }, `${name}: started`);
    return value;
  };

  return {
    step,
    get started() {
      return kept.map((k) => k.name);
    },
    get stopping() {
      return stopRequested;
    },
    stop() {
      stopRequested = true;
      stopping ??= (async () => {
        for (let e = kept.pop(); e; e = kept.pop()) await runStop(e);
      })();
      return stopping;
    },
  };
}

/**
 * Runs `build` with a fresh list of steps. On success returns what `build` returned with `stop()` (the steps,
 * in reverse); when `build` throws, the steps already started are stopped in reverse and the error rethrown.
 */
export async function startSteps<R extends object>(
  opts: StepsOptions,
  build: (step: Step, steps: Steps) => Promise<R>,
): Promise<Omit<R, 'stop'> & { stop(): Promise<void> }> {
  const steps = createSteps(opts);
  try {
    const result = await build(steps.step, steps);
    return Object.assign(result, { stop: () => steps.stop() });
  } catch (err) {
    await steps.stop();
    throw err;
  }
}

/** A step that runs `work` at once and then every `everyMs` (without keeping the process alive) until stopped. */
export function repeatingStep(step: Step, name: string, work: () => unknown, everyMs: number): Promise<NodeJS.Timeout> {
  return step(
    name,
    () => {
      void work();
      const timer = setInterval(work, everyMs);
      timer.unref();
      return timer;
    },
    (timer) => clearInterval(timer),
  );
}
