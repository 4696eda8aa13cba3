import { randomUUID } from 'node:crypto';
import type { GeneratedImage } from '@imagegen/contracts/generation/v1/generation';
import type { Principal } from '@imagegen/platform';
import type { ToolContext, ToolImage, ToolOutput } from './framework.js';

const POLL_MS = 500;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Thumbnails of produced images, fetched from the library (GetObjectData), as MCP image content. */
export async function thumbnailsOf(ctx: ToolContext, keys: string[]): Promise<ToolImage[]> {
  const out = await Promise.all(
    keys.filter(Boolean).map(async (objectKey): Promise<ToolImage | undefined> => {
      try {
        const r = await ctx.deps.clients.library.getObjectData({ objectKey }, ctx.principal);
        return { data: Buffer.from(r.data), mimeType: r.mimeType || 'image/png' };
      } catch (err) {
        ctx.deps.logger.warn({ err, objectKey }, 'mcp: thumbnail not available');
        return undefined;
      }
    }),
  );
  return out.filter((x): x is ToolImage => !!x);
}

export const thumbnailsOfGenerated = (ctx: ToolContext, images: GeneratedImage[]) =>
  thumbnailsOf(
    ctx,
    images.map((i) => i.thumbnailKey),
  );

/**
 * Runs a generation call with an execution id chosen here (passed to `call`, which must send it as the
 * request's execution_id), so progress follows exactly this call's execution, never another call's in the same
 * session. While it runs, sends progress notifications from that execution. (An async call is a queued job:
 * submitGenerationJob, then wait_for_execution.)
 */
export async function runGeneration(
  ctx: ToolContext,
  opts: {
    sessionId: string;
    call: (principal: Principal, executionId: string) => Promise<ToolOutput & { executionId: string }>;
  },
): Promise<ToolOutput> {
  const principal: Principal = { ...ctx.principal, sessionId: opts.sessionId };
  const executionId = randomUUID();
  const tracking = ctx.extra._meta?.progressToken !== undefined;
  let settled = false;
  const result = opts.call(principal, executionId).finally(() => {
    settled = true;
  });
  result.catch(() => {});
  if (!tracking) return result;

  await ctx.progress(0, 100, 'started');
  let lastPercent = -1;
  while (!settled) {
    try {
      // 404 until the call has validated its request and created the execution.
      const e = await ctx.deps.clients.generation.getExecution({ executionId, includeLogs: false }, principal);
      if (e.progressPercent !== lastPercent && e.status === 'running') {
        lastPercent = e.progressPercent;
        await ctx.progress(e.progressPercent, 100, e.currentStep);
      }
    } catch (err) {
      ctx.deps.logger.debug({ err, executionId }, 'mcp: progress polling failed');
    }
    await Promise.race([
      sleep(POLL_MS),
      result.then(
        () => {},
        () => {},
      ),
    ]);
  }
  const out = await result;
  await ctx.progress(100, 100, 'completed');
  return out;
}

export const newSessionId = () => randomUUID();
