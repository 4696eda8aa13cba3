import { ExecutionFinished } from '@imagegen/contracts/events/v1/events';
import { decodeOrSkip, type EventTransport, type Logger, subjectFor } from '@imagegen/platform';
import { OBJECT_GC_SWEEP_MS, sweepObjects } from './object-gc.js';
import { commitExecutionImages, committedHere, discardExecutionImages, discardStalePending, type PendingDeps } from './pending.js';

/** Durable consumer name of the library on generation's ExecutionFinished. */
export const EXECUTION_OUTCOMES_DURABLE = 'library-execution-outcomes';

/**
 * What the library does in the background so that faults lose nothing and bill nothing:
 * - on ExecutionFinished: a completed execution's reported images (the event's imageIds) are committed (listed,
 *   ImageStored) and its other pending images discarded; a failed one's, or one that reported none, are discarded
 *   with their files (never billed). Idempotent, so redeliveries are harmless;
 * - every OBJECT_GC_SWEEP_MS: removes files no row owns (object_gc) and pending images whose execution
 *   never reported an outcome (PENDING_IMAGE_MAX_AGE_MS).
 */
export async function startExecutionOutcomes(
  deps: PendingDeps & { events: EventTransport; logger: Logger },
): Promise<{ stop(): Promise<void> }> {
  const logger = deps.logger;
  const sub = await deps.events.subscribe({
    durable: EXECUTION_OUTCOMES_DURABLE,
    subjects: [subjectFor(deps.config.eventsPrefix, 'generation.execution_finished')],
    ackWaitMs: 10_000,
    handler: async (m) => {
      const e = decodeOrSkip(ExecutionFinished, m, logger);
      if (!e?.tenantId || !e.executionId) return;
      // A completed execution lists exactly the images its caller was told of (imageIds; the rest is discarded).
      // An event written before imageIds existed names none while it counts some: all its pending images then.
      if (e.status === 'completed' && (e.imageIds.length > 0 || e.images > 0)) {
        // Generation's own call through this process moved them: nothing is left to look for.
        if (e.imageIds.length > 0 && (await committedHere(e.executionId))) return;
        const n = await commitExecutionImages(deps, e.tenantId, e.executionId, e.imageIds, { checkFirst: true });
        if (n > 0) logger.info({ executionId: e.executionId, images: n }, 'committed pending images of a completed execution');
      } else {
        const n = await discardExecutionImages(deps, e.tenantId, e.executionId);
        if (n > 0) logger.info({ executionId: e.executionId, images: n }, 'discarded pending images of a failed execution');
      }
    },
  });
  let running: Promise<void> | undefined;
  const sweep = async () => {
    try {
      const stale = await discardStalePending(deps);
      if (stale > 0) logger.warn({ images: stale }, 'discarded pending images whose execution never reported an outcome');
      let removed = 0;
      for (let n = await sweepObjects(deps); n > 0; n = await sweepObjects(deps)) removed += n;
      if (removed > 0) logger.info({ objects: removed }, 'removed objects that no row owns');
    } catch (err) {
      logger.warn({ err }, 'object sweep failed; retrying at the next one');
    }
  };
  const timer = setInterval(() => {
    running ??= sweep().finally(() => {
      running = undefined;
    });
  }, OBJECT_GC_SWEEP_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await sub.stop();
      await running;
    },
  };
}
