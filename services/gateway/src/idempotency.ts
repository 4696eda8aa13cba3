import {
  createIdempotencyStore,
  holdClaim,
  IDEMPOTENCY_KEY_PATTERN,
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_TTL_MS,
  idempotencyRefusal,
  keepsIdempotentAnswer,
  requestFingerprint,
  type StoredResponse,
} from '@imagegen/operations';
import { AppError, dependencyUnavailable } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayDeps } from './types.js';

/**
 * Idempotency-Key (IETF httpapi draft; Stripe's semantics) on every POST that creates or bills. With the
 * header, the first request's answer (status and body) is kept per tenant and key for 24 h and replayed,
 * with `Idempotent-Replayed: true`, to every retry with the same key and the same request:
 * - the same key with another request (method, path, query or body) is 422;
 * - while the first is still running, a retry is 409 (with Retry-After);
 * - answers that say nothing happened are not kept, so the key can be retried (keepsIdempotentAnswer: 5xx,
 *   the work failed and, by the generation rules, was not billed; 400, 401, 403, 408, 429);
 * - a claim whose gateway died runs out with its lease (IDEMPOTENCY_LEASE_MS), then the key can be retried. The
 *   generation call of a gateway that died is cancelled, and generation bills nothing for a cancelled call.
 * Records live in Redis when REDIS_URL is set (shared by every gateway), in memory otherwise. When Redis
 * cannot be reached, a request carrying the header is refused with 503 rather than run unprotected.
 */

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { id: string; owner: string; fingerprint: string; release: () => void };
  }
}

export async function registerIdempotency(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): Promise<void> {
  const { ctx } = deps;
  const store = createIdempotencyStore({
    redisUrl: ctx.config.redisUrl,
    prefix: ctx.config.eventsPrefix,
    name: 'gateway',
    logger: ctx.logger,
  });
  app.addHook('onClose', () => store.close());

  app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
    if (!req.routeOptions.config.idempotent) return;
    const raw = req.headers['idempotency-key'];
    if (raw === undefined) return;
    const key = Array.isArray(raw) ? raw[0] : raw;
    if (Array.isArray(raw) || !IDEMPOTENCY_KEY_PATTERN.test(key)) {
      throw new AppError(400, {
        error: 'Invalid Idempotency-Key header',
        details: ['Idempotency-Key must be one value of 1-255 visible ASCII characters'],
      });
    }
    const tenantId = req.principal?.tenantId;
    if (!tenantId) return;
    const id = `rest:${tenantId}:${key}`;
    const fingerprint = requestFingerprint(req.method, req.url, JSON.stringify(req.body ?? null));
    const claim = await store.claim(id, fingerprint, IDEMPOTENCY_LEASE_MS).catch((err) => {
      ctx.logger.warn({ err }, 'idempotency store unavailable');
      throw dependencyUnavailable();
    });
    if (claim.state === 'mismatch' || claim.state === 'in_flight') {
      throw idempotencyRefusal(claim, 'send a new Idempotency-Key for a request with another method, path, query or body');
    }
    if (claim.state === 'done') {
      reply.header('idempotent-replayed', 'true');
      if (claim.response.contentType) reply.header('content-type', claim.response.contentType);
      for (const [name, value] of Object.entries(claim.response.headers ?? {})) reply.header(name, value);
      return reply.status(claim.response.status).send(claim.response.body);
    }
    req.idempotency = { id, owner: claim.owner, fingerprint, release: holdClaim(store, id, claim.owner, ctx.logger) };
  });

  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claim = req.idempotency;
    if (!claim) return payload;
    req.idempotency = undefined;
    claim.release();
    const status = reply.statusCode;
    const keep = keepsIdempotentAnswer(status);
    try {
      if (keep && (typeof payload === 'string' || Buffer.isBuffer(payload) || payload == null)) {
        const response: StoredResponse = {
          status,
          contentType: reply.getHeader('content-type') as string | undefined,
          headers: replayedHeaders(reply),
          body: payload == null ? '' : payload.toString(),
        };
        await store.complete(claim.id, claim.owner, claim.fingerprint, response, IDEMPOTENCY_TTL_MS);
      } else {
        await store.release(claim.id, claim.owner);
      }
    } catch (err) {
      // The answer goes out anyway; the claim runs out with its lease and the key can then be retried.
      ctx.logger.warn({ err }, 'could not record the idempotent response');
    }
    return payload;
  });

  // A request that never reaches onSend (the client went away mid-handler) still gives its claim back.
  app.addHook('onResponse', async (req: FastifyRequest) => {
    const claim = req.idempotency;
    if (!claim) return;
    req.idempotency = undefined;
    claim.release();
    await store.release(claim.id, claim.owner).catch(() => {});
  });
}

/** The answer headers a replay repeats besides its content type: where an accepted job is, and what was applied. */
const REPLAYED_HEADERS = ['location', 'preference-applied'];
function replayedHeaders(reply: FastifyReply): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const name of REPLAYED_HEADERS) {
    const v = reply.getHeader(name);
    if (typeof v === 'string') out[name] = v;
  }
  return Object.keys(out).length ? out : undefined;
}
