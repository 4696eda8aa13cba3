import { randomUUID } from 'node:crypto';
import { AppError, type Logger, redactUrl } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { GatewayDeps } from './app.js';

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
 * Counted across gateway replicas in Redis when REDIS_URL is set: one sorted set per tenant and cap whose
 * members are the held slots, scored by their lease expiry (LEASE_MS, renewed every LEASE_MS/3 while held).
 * A gateway that crashes stops renewing, and its slots drop out within LEASE_MS (a plain INCR/DECR counter
 * with a TTL would keep a dead gateway's count for as long as live gateways keep refreshing the key). While
 * Redis cannot be reached the caps are counted in this gateway's memory (per replica) and a warning says so.
 * Without REDIS_URL they are counted in memory (one gateway).
 */

export const STREAM_ROUTES = new Set(['/api/executions/:executionId/stream', '/api/sessions/:sessionId/logs/stream']);
export const GENERATION_ROUTES = new Set([
  '/api/images',
  '/api/edit-image',
  '/api/upload-for-editing',
  '/api/characters/generate-multi',
  '/api/characters/:identifier/generate',
  '/api/products/:identifier/generate',
]);

/** A held slot's lease in Redis; renewed every LEASE_MS / 3. */
export const LEASE_MS = 30_000;
/** Retry-After of a refusal: generations last seconds, streams are usually short-lived too. */
export const CONCURRENCY_RETRY_AFTER_S = 5;

type Kind = 'stream' | 'generation';

export interface Slot {
  release(): void;
}

export interface SlotStore {
  /** A slot of `key` when fewer than `max` are held, else undefined. */
  acquire(key: string, max: number): Promise<Slot | undefined>;
  close(): Promise<void>;
}

/** Slots counted in this process. */
export function memorySlotStore(): SlotStore {
  const held = new Map<string, number>();
  return {
    async acquire(key, max) {
      const n = held.get(key) ?? 0;
      if (n >= max) return undefined;
      held.set(key, n + 1);
      let done = false;
      return {
        release() {
          if (done) return;
          done = true;
          const left = (held.get(key) ?? 1) - 1;
          if (left > 0) held.set(key, left);
          else held.delete(key);
        },
      };
    },
    async close() {
      held.clear();
    },
  };
}

/** Drops expired slots, then adds one if fewer than ARGV[2] remain. Redis' own clock: replicas may disagree. */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1`;
/** Extends held slots (KEYS[1]; ARGV[2..] are its members). */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1`;

/**
 * Slots shared by every gateway through Redis (see the module comment). `fallback` counts while Redis is not
 * ready or a command fails; `onFallback` is told each time (the caller rate-limits its warning).
 */
export function redisSlotStore(
  redis: Redis,
  prefix: string,
  fallback: SlotStore,
  onFallback: (err?: unknown) => void,
  leaseMs = LEASE_MS,
): SlotStore {
  /** Slots this gateway holds in Redis: member id -> key. */
  const held = new Map<string, string>();
  const renew = setInterval(() => {
    const byKey = new Map<string, string[]>();
    for (const [id, key] of held) byKey.set(key, [...(byKey.get(key) ?? []), id]);
    for (const [key, ids] of byKey) redis.eval(RENEW, 1, key, String(leaseMs), ...ids).catch(() => {});
  }, leaseMs / 3);
  renew.unref();
  return {
    async acquire(k, max) {
      if (redis.status !== 'ready') {
        onFallback();
        return fallback.acquire(k, max);
      }
      const key = `${prefix}${k}`;
      const id = randomUUID();
      let got: unknown;
      try {
        got = await redis.eval(ACQUIRE, 1, key, String(leaseMs), String(max), id);
      } catch (err) {
        onFallback(err);
        return fallback.acquire(k, max);
      }
      if (Number(got) !== 1) return undefined;
      held.set(id, key);
      return {
        release() {
          if (!held.delete(id)) return;
          redis.zrem(key, id).catch(() => {}); // else its lease runs out
        },
      };
    },
    async close() {
      clearInterval(renew);
      const ids = [...held];
      held.clear();
      await Promise.all(ids.map(([id, key]) => redis.zrem(key, id).catch(() => {})));
      await fallback.close();
    },
  };
}

/**
 * Logs, loudly and once per outage, that Redis cannot be reached and what that means (`consequence`); logs
 * again when it is back. At start it waits (at most 3 s) for a first answer, so an unreachable Redis is said
 * before the gateway reports that it started. Used by the rate limits and the concurrency caps.
 */
export async function watchRedis(redis: Redis, logger: Logger, url: string, consequence: string): Promise<void> {
  const where = redactUrl(url);
  let down = false;
  const wentDown = (cause: string) => {
    if (down) return;
    down = true;
    logger.warn({ redis: where, cause }, `Redis at ${where} (REDIS_URL) is unreachable (${cause}): ${consequence}`);
  };
  redis.on('error', (err: Error & { code?: string }) => wentDown(err.code ?? err.message));
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    logger.info({ redis: where }, `Redis at ${where} (REDIS_URL) is reachable again`);
  });
  let timer: NodeJS.Timeout | undefined;
  const answered = await Promise.race([
    redis.ping().then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), 3000);
    }),
  ]);
  clearTimeout(timer);
  if (!answered) wentDown('no answer at start');
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Gives back the tenant concurrency slot this request holds (idempotent). */
    releaseTenantSlot?: () => void;
  }
}

function kindOf(req: FastifyRequest): Kind | undefined {
  const route = req.routeOptions.url ?? '';
  if (req.method === 'GET' && STREAM_ROUTES.has(route)) return 'stream';
  if (req.method === 'POST' && GENERATION_ROUTES.has(route)) return 'generation';
  return undefined;
}

/** The 429: the `{error, details}` envelope, plus `retryAfter` as in the spec's rate-limit 429, and Retry-After. */
function refusal(kind: Kind, max: number): AppError {
  const s = CONCURRENCY_RETRY_AFTER_S;
  const body =
    kind === 'stream'
      ? {
          error: 'Too many concurrent streams',
          details: [`at most ${max} event streams per tenant at once: close one, or retry in ${s} s`],
        }
      : {
          error: 'Too many generations in progress',
          details: [`at most ${max} generations per tenant at once: retry when one has finished`],
        };
  return new AppError(429, { ...body, retryAfter: s }, { 'retry-after': String(s) });
}

/** Registers the caps (call after registerAuth and registerIdempotency; see the module comment). */
export async function registerTenantConcurrency(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): Promise<void> {
  const { ctx } = deps;
  const caps: Record<Kind, number> = {
    stream: ctx.config.tenantLimits.maxStreams,
    generation: ctx.config.tenantLimits.maxGenerationsInFlight,
  };
  if (caps.stream <= 0 && caps.generation <= 0) return;

  let store: SlotStore;
  const memory = memorySlotStore();
  if (ctx.config.redisUrl) {
    const redis = new Redis(ctx.config.redisUrl, {
      connectTimeout: 2000,
      commandTimeout: 1000,
      maxRetriesPerRequest: 1,
      connectionName: 'imagegen-gateway-concurrency',
    });
    let lastWarn = 0;
    store = redisSlotStore(redis, `${ctx.config.eventsPrefix}:conc:`, memory, (err) => {
      if (Date.now() - lastWarn < 30_000) return;
      lastWarn = Date.now();
      ctx.logger.warn({ err }, 'tenant concurrency caps: Redis unavailable, counting in this gateway only meanwhile');
    });
    await watchRedis(
      redis,
      ctx.logger,
      ctx.config.redisUrl,
      'per-tenant stream and generation caps count in this gateway only (not across replicas) until it is back',
    );
    app.addHook('onClose', async () => {
      await store.close();
      await redis.quit().catch(() => redis.disconnect());
    });
  } else {
    store = memory;
    app.addHook('onClose', () => store.close());
  }

  app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
    const kind = kindOf(req);
    const tenantId = req.principal?.tenantId;
    if (!kind || !tenantId || caps[kind] <= 0) return;
    const slot = await store.acquire(`${kind}:${tenantId}`, caps[kind]);
    if (!slot) throw refusal(kind, caps[kind]);
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
