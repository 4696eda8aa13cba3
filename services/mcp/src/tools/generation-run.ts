import { randomUUID } from 'node:crypto';
import type { GeneratedImage } from '@imagegen/contracts/generation/v1/generation';
import type { Principal } from '@imagegen/platform';
import type { ToolContext, ToolImage, ToolOutput } from './framework.js';

/** Generation may take minutes (provB up to 240 s); gRPC calls for it get a long deadline. */
export const GENERATION_TIMEOUT_MS = 300_000;
const POLL_MS = 500;

/** Execution ids already attributed to a running call of this process (concurrent calls in one session). */
const claimed = new Set<string>();

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
 * Runs a generation call (which creates an execution in `sessionId`) and, while it runs, finds its
 * execution (ListSessionExecutions) to send progress notifications; with `async`, answers as soon as
 * the execution exists with its id (the call goes on; wait_for_execution picks up the result).
 */
export async function runGeneration(
  ctx: ToolContext,
  opts: {
    toolName: string;
    sessionId: string;
    async?: boolean;
    call: (principal: Principal) => Promise<ToolOutput & { executionId: string }>;
  },
): Promise<ToolOutput> {
  const principal: Principal = { ...ctx.principal, sessionId: opts.sessionId };
  const since = new Date(Date.now() - 5000).toISOString();
  const tracking = opts.async || ctx.extra._meta?.progressToken !== undefined;
  let settled = false;
  const result = opts.call(principal).finally(() => {
    settled = true;
  });
  result.catch(() => {});
  if (!tracking) return result;

  await ctx.progress(0, 100, 'started');
  let executionId: string | undefined;
  let lastPercent = -1;
  const findExecution = async () => {
    const r = await ctx.deps.clients.generation.listSessionExecutions(
      { sessionId: opts.sessionId, limit: 20, includeLogs: false, activeOrFinishedSince: since },
      principal,
    );
    const mine = r.executions
      .filter((e) => e.toolName === opts.toolName && !claimed.has(e.executionId))
      .sort((a, b) => a.startedAt.localeCompare(b.startedAt))[0];
    if (mine) {
      claimed.add(mine.executionId);
      return mine.executionId;
    }
    return undefined;
  };
  try {
    while (!settled) {
      try {
        if (!executionId) executionId = await findExecution();
        if (executionId && opts.async) {
          const id = executionId;
          ctx.deps.runs.add(id, principal.tenantId ?? '', result);
          return {
            data: {
              executionId: id,
              status: 'running',
              session_id: opts.sessionId,
              message: `Started; call wait_for_execution with execution_id ${id} for the result`,
            },
          };
        }
        if (executionId) {
          const e = await ctx.deps.clients.generation.getExecution({ executionId, includeLogs: false }, principal);
          if (e.progressPercent !== lastPercent && e.status === 'running') {
            lastPercent = e.progressPercent;
            await ctx.progress(e.progressPercent, 100, e.currentStep);
          }
        }
      } catch (err) {
        ctx.deps.logger.debug({ err }, 'mcp: progress polling failed');
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
  } finally {
    if (executionId && settled) claimed.delete(executionId);
    else if (executionId) result.finally(() => claimed.delete(executionId as string)).catch(() => {});
  }
}

export const newSessionId = () => randomUUID();
