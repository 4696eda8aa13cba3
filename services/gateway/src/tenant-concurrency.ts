import { type ConcurrencyKind, concurrencyRefusal, createSlotStore } from '@imagegen/operations';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayDeps } from './types.js';

/**
 * Per-tenant caps on work held open at once (issue 15: one tenant cannot degrade another), besides the
 * per-minute rate limits of rate-limit.ts:
 *
 * | cap         | counts                                                                   | setting (default)                    |
 * |-------------|--------------------------------------------------------------------------|--------------------------------------|
 * | streams     | open SSE responses: GET /api/executions/:id/stream, /api/sessions/:id/logs/stream | TENANT_MAX_STREAMS (10)      |
 * | generations | POST /api/images, /api/edit-image, /api/upload-for-editing, character, multi-character and product generate | TENANT_MAX_GENERATIONS_IN_FLIGHT (10) |
 *
 * A request over its tenant's cap is refused before any work with 429 `{error, details}` and Retry-After
 * (0 disables a cap). A slot is taken after authentication and validation (preHandler; an invalid body
 * never holds one, an idempotent replay is answered before) and given back:
 * - stream: when its connection closes (the stream ended, the client went away or the gateway closes), or
 *   with the answer when it never became a stream (404, 204);
 * - generation: with the answer (onSend: the generation is over), or when the response ends. A client that
 *   disconnects does not free it at once: the gateway still waits for (and bills) that generation, so the
 *   slot stays held until the call returns (at most its deadline); else a tenant could disconnect and
 *   reconnect past the cap.
 *
 * Counted in the shared slot store (libs/operations/src/policies/tenant-slots.ts: Redis across replicas when REDIS_URL
 * is set, shared with the mcp service's generation tools; memory otherwise).
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** Gives back the tenant concurrency slot this request holds (idempotent). */
    releaseTenantSlot?: () => void;
  }
}

/** The cap a request counts against: the catalogue's (an event stream, or a call that waits for generation). */
const kindOf = (req: FastifyRequest): ConcurrencyKind | undefined => req.routeOptions.config.concurrency;

/** Registers the caps (call after registerAuth and registerIdempotency; see the module comment). */
export async function registerTenantConcurrency(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): Promise<void> {
  const { ctx } = deps;
  const caps: Record<ConcurrencyKind, number> = {
    stream: ctx.config.tenantLimits.maxStreams,
    generation: ctx.config.tenantLimits.maxGenerationsInFlight,
  };
  if (caps.stream <= 0 && caps.generation <= 0) return;

  const store = await createSlotStore({
    redisUrl: ctx.config.redisUrl,
    eventsPrefix: ctx.config.eventsPrefix,
    logger: ctx.logger,
    who: 'gateway',
  });
  app.addHook('onClose', () => store.close());

  app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
    const kind = kindOf(req);
    const tenantId = req.principal?.tenantId;
    if (!kind || !tenantId || caps[kind] <= 0) return;
    const slot = await store.acquire(`${kind}:${tenantId}`, caps[kind]);
    if (!slot) throw concurrencyRefusal(kind, caps[kind]);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      slot.release();
    };
    req.releaseTenantSlot = release;
    // A stream is over when its connection closes; a generation only when its call returns (onSend below).
    if (kind === 'stream') reply.raw.once('close', release);
  });
  // The answer: a generation is over; a stream route answered without streaming (404, 204).
  app.addHook('onSend', async (req: FastifyRequest, _reply: FastifyReply, payload: unknown) => {
    req.releaseTenantSlot?.();
    return payload;
  });
  app.addHook('onResponse', async (req: FastifyRequest) => req.releaseTenantSlot?.());
}
