import { createHash } from 'node:crypto';
import { AppError, type IdempotencyStore, memoryIdempotencyStore, redisIdempotencyStore, type StoredResponse } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { GatewayDeps } from './app.js';

/**
 * Idempotency-Key (IETF httpapi draft; Stripe's semantics) on every POST that creates or bills. With the
 * header, the first request's answer (status and body) is kept per tenant and key for 24 h and replayed,
 * with `Idempotent-Replayed: true`, to every retry with the same key and the same request:
 * - the same key with another request (method, path, query or body) is 422;
 * - while the first is still running, a retry is 409 (with Retry-After);
 * - answers that say nothing happened are not kept, so the key can be retried (NOT_KEPT and 5xx: the work
 *   failed and, by the generation rules, was not billed);
 * - a claim whose gateway died runs out with its lease (LEASE_MS), then the key can be retried. The
 *   generation call of a gateway that died is cancelled, and generation bills nothing for a cancelled call.
 * Records live in Redis when REDIS_URL is set (shared by every gateway), in memory otherwise. When Redis
 * cannot be reached, a request carrying the header is refused with 503 rather than run unprotected.
 */

export const IDEMPOTENT_ROUTES = new Set([
  '/api/images',
  '/api/edit-image',
  '/api/upload-for-editing',
  '/api/characters',
  '/api/characters/generate-multi',
  '/api/characters/:identifier/generate',
  '/api/products',
  '/api/products/:identifier/generate',
  '/api/scenes',
  '/api/style-presets',
  '/api/search-presets',
  '/api/webhooks',
]);

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** A running request's claim lasts this long unless renewed (every LEASE_MS / 3 while it runs). */
export const LEASE_MS = 30_000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/**
 * Answers not kept (the key stays free): 5xx (failed, not billed), 400 (refused by validation: correct it
 * and resend under the same key), 401/403 (credentials), 408, 429 (try again later).
 */
const NOT_KEPT = new Set([400, 401, 403, 408, 429]);

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { id: string; owner: string; fingerprint: string; timer: NodeJS.Timeout };
  }
}

export async function registerIdempotency(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): Promise<void> {
  const { ctx } = deps;
  let store: IdempotencyStore;
  if (ctx.config.redisUrl) {
    const redis = new Redis(ctx.config.redisUrl, {
      connectTimeout: 2000,
      commandTimeout: 1000,
      maxRetriesPerRequest: 1,
      connectionName: 'imagegen-gateway-idempotency',
    });
    redis.on('error', (err) => ctx.logger.debug({ err }, 'idempotency redis error'));
    store = redisIdempotencyStore(redis, `${ctx.config.eventsPrefix}:idem:`);
    app.addHook('onClose', async () => {
      await redis.quit().catch(() => redis.disconnect());
    });
  } else {
    store = memoryIdempotencyStore();
    app.addHook('onClose', () => store.close());
  }

  const unavailable = (err: unknown) => {
    ctx.logger.warn({ err }, 'idempotency store unavailable');
    return new AppError(503, { error: 'Service temporarily unavailable' }, { 'retry-after': '2' });
  };

  app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
    if (req.method !== 'POST' || !IDEMPOTENT_ROUTES.has(req.routeOptions.url ?? '')) return;
    const raw = req.headers['idempotency-key'];
    if (raw === undefined) return;
    const key = Array.isArray(raw) ? raw[0] : raw;
    if (Array.isArray(raw) || !KEY_PATTERN.test(key)) {
      throw new AppError(400, {
        error: 'Invalid Idempotency-Key header',
        details: ['Idempotency-Key must be one value of 1-255 visible ASCII characters'],
      });
    }
    const tenantId = req.principal?.tenantId;
    if (!tenantId) return;
    const id = `rest:${tenantId}:${key}`;
    const fingerprint = createHash('sha256')
      .update(`${req.method} ${req.url}\n${JSON.stringify(req.body ?? null)}`)
      .digest('hex');
    const claim = await store.claim(id, fingerprint, LEASE_MS).catch((err) => {
      throw unavailable(err);
    });
    if (claim.state === 'mismatch') {
      throw new AppError(422, {
        error: 'Idempotency-Key already used for a different request',
        details: ['send a new Idempotency-Key for a request with another method, path, query or body'],
      });
    }
    if (claim.state === 'in_flight') {
      throw new AppError(
        409,
        { error: 'A request with this Idempotency-Key is still in progress', details: ['retry when it has finished'] },
        { 'retry-after': '1' },
      );
    }
    if (claim.state === 'done') {
      reply.header('idempotent-replayed', 'true');
      if (claim.response.contentType) reply.header('content-type', claim.response.contentType);
      return reply.status(claim.response.status).send(claim.response.body);
    }
    const timer = setInterval(() => {
      store.renew(id, claim.owner, LEASE_MS).catch((err) => ctx.logger.debug({ err }, 'idempotency lease renewal failed'));
    }, LEASE_MS / 3);
    timer.unref();
    req.idempotency = { id, owner: claim.owner, fingerprint, timer };
  });

  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const claim = req.idempotency;
    if (!claim) return payload;
    req.idempotency = undefined;
    clearInterval(claim.timer);
    const status = reply.statusCode;
    const keep = status < 500 && !NOT_KEPT.has(status);
    try {
      if (keep && (typeof payload === 'string' || Buffer.isBuffer(payload) || payload == null)) {
        const response: StoredResponse = {
          status,
          contentType: reply.getHeader('content-type') as string | undefined,
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
    clearInterval(claim.timer);
    await store.release(claim.id, claim.owner).catch(() => {});
  });
}
