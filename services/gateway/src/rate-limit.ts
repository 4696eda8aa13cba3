import rateLimit from '@fastify/rate-limit';
import { processRateLimitStore, rateLimitNamespace, tenantRateBuckets, watchRedis } from '@imagegen/operations';
import { AppError, type Config, redisClient } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { GatewayDeps } from './types.js';

/**
 * Rate limits (SPEC 8), fixed one-minute windows counted with @fastify/rate-limit's stores (Redis when
 * REDIS_URL is set, so every gateway process shares the counters; memory otherwise):
 *
 * | bucket      | applies to                                                        | key                 | per minute |
 * |-------------|-------------------------------------------------------------------|---------------------|------------|
 * | api         | every tenant-authenticated request                                | tenant id           | the tenant's rate_limit_per_minute (default 60) |
 * | generation  | the catalogue's operations with rate 'generation' (generate, edit, character and product generation) | tenant id | 30 (*) |
 * | upload      | the catalogue's operations with rate 'upload' (POST /api/upload-for-editing) | tenant id | 20 (*) |
 * | oauth-token | POST /oauth/token                                                 | client IP           | 30 |
 * | admin       | every /admin/* request                                            | cf-connecting-ip    | 300 |
 * | admin-login | POST /admin/auth/login, POST /console/session (the console's sign-in) | cf-connecting-ip | 10 |
 *
 * (*) The SPEC defaults hold at the default API rate of 60/min; a tenant configured above it gets
 * proportionally more (generations max(30, rate/2), uploads max(20, rate/3)), never less.
 *
 * A request may fall in several buckets (a generation also counts as an API request); it is refused
 * when any of them is exhausted, and the headers describe the tightest one. The admin API identifies
 * the client only by cf-connecting-ip (X-Forwarded-For is ignored), falling back to the socket
 * address when the header is absent.
 *
 * Two hooks: the admin and OAuth token buckets are keyed by client address, so they are counted in an
 * onRequest hook registered BEFORE authentication: requests with a wrong admin token or session are
 * counted too (otherwise the legacy admin token could be guessed without limit). The tenant buckets
 * need the tenant, so they are counted in a preParsing hook (after every onRequest hook, i.e. after
 * authentication, and before the body is read or validated); tenant requests refused with 401/403
 * are not counted.
 *
 * Settings (Config.rateLimits, read at gateway start from RATE_LIMIT_GENERATIONS_PER_MINUTE,
 * RATE_LIMIT_UPLOADS_PER_MINUTE, RATE_LIMIT_OAUTH_TOKEN_PER_MINUTE, RATE_LIMIT_ADMIN_PER_MINUTE,
 * RATE_LIMIT_ADMIN_LOGIN_PER_MINUTE, RATE_LIMIT_DEFAULT_PER_MINUTE (tenant fallback, 60), RATE_LIMIT_PREFIX
 * (Redis key prefix; default EVENTS_PREFIX), RATE_LIMIT_DISABLED=1 (no limits, no headers: load tests).
 */

/** Config.rateLimits plus the window every limit counts in. */
export type RateLimitSettings = Config['rateLimits'] & { windowMs: number };

export function rateLimitSettings(config: Config): RateLimitSettings {
  return { ...config.rateLimits, windowMs: 60_000 };
}

type Bucket = 'api' | 'generation' | 'upload' | 'oauth-token' | 'admin' | 'admin-login';

interface Applied {
  bucket: Bucket;
  key: string;
  max: number;
}

/** The admin API's client identity: cf-connecting-ip only (X-Forwarded-For ignored), else the socket. */
export function clientIp(req: FastifyRequest): string {
  const h = req.headers['cf-connecting-ip'];
  const v = (Array.isArray(h) ? h[0] : h)?.trim();
  return v && v.length <= 64 ? v : req.ip;
}

/** The tenant buckets of an authenticated tenant request (none for any other request). */
function tenantBucketsOf(req: FastifyRequest, s: RateLimitSettings): Applied[] {
  const route = req.routeOptions.url ?? '';
  const _method = req.method;
  const out: Applied[] = [];
  const tenantId = req.principal?.tenantId;
  if (tenantId && (req.principal?.source === 'tenant_api' || route.startsWith('/api/'))) {
    out.push(...tenantRateBuckets(tenantId, req.apiKeyInfo?.rateLimitPerMinute, req.routeOptions.config.rate, s));
  }
  return out;
}

/** The buckets keyed by client address (admin API, OAuth token endpoint): known before authentication. */
function clientBucketsOf(req: FastifyRequest, s: RateLimitSettings): Applied[] {
  const route = req.routeOptions.url ?? '';
  const method = req.method;
  const out: Applied[] = [];
  if (route === '/admin' || route.startsWith('/admin/')) {
    const ip = clientIp(req);
    out.push({ bucket: 'admin', key: `admin:${ip}`, max: s.adminPerMinute });
    if (method === 'POST' && route === '/admin/auth/login') {
      out.push({ bucket: 'admin-login', key: `admin-login:${ip}`, max: s.adminLoginPerMinute });
    }
    return out;
  }
  // The web console's sign-in (an API key, or an admin's password) counts in the admin sign-in bucket.
  if (method === 'POST' && route === '/console/session') {
    out.push({ bucket: 'admin-login', key: `admin-login:${clientIp(req)}`, max: s.adminLoginPerMinute });
  }
  if (method === 'POST' && req.url.split('?')[0] === '/oauth/token') {
    out.push({ bucket: 'oauth-token', key: `oauth-token:${clientIp(req)}`, max: s.oauthTokenPerMinute });
  }
  return out;
}

declare module 'fastify' {
  interface FastifyRequest {
    rateLimitApplied?: Applied;
  }
}

/**
 * Registers the rate-limit hooks. Call BEFORE registerAuth: the client-address buckets (admin API,
 * OAuth token) are checked in an onRequest hook that must run before authentication; the tenant
 * buckets are checked in a preParsing hook, which runs after every onRequest hook (authentication).
 */
export async function registerRateLimits(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): Promise<void> {
  const { ctx } = deps;
  const s = rateLimitSettings(ctx.config);
  if (s.disabled) {
    ctx.logger.warn('rate limits are disabled (RATE_LIMIT_DISABLED)');
    return;
  }
  let redis: Redis | undefined;
  if (ctx.config.redisUrl) {
    redis = redisClient(ctx.config.redisUrl, 'gateway-ratelimit');
    redis.on('error', (err) => ctx.logger.debug({ err }, 'rate-limit redis error'));
    await watchRedis(redis, ctx.logger, ctx.config.redisUrl, 'rate limits are NOT enforced (requests pass uncounted) until it is back');
    app.addHook('onClose', async () => {
      await redis?.quit().catch(() => redis?.disconnect());
    });
  }
  const prefix = rateLimitNamespace(ctx.config);
  await app.register(rateLimit, {
    global: false,
    // A Redis outage must not take the API down: requests pass uncounted meanwhile.
    skipOnError: true,
    // Without Redis: this process's counters of the deployment, shared with the mcp service if it runs here too.
    ...(redis ? { redis, nameSpace: prefix } : { store: processRateLimitStore(prefix) }),
  });

  const limiter = app.createRateLimit({
    keyGenerator: (req: FastifyRequest) => (req.rateLimitApplied as Applied).key,
    max: (req: FastifyRequest) => (req.rateLimitApplied as Applied).max,
    timeWindow: s.windowMs,
  });

  const enforce = async (req: FastifyRequest, reply: FastifyReply, buckets: Applied[]): Promise<void> => {
    if (buckets.length === 0) return;
    let shown: { max: number; remaining: number; ttl: number } | undefined;
    let exceeded: { max: number; ttl: number } | undefined;
    for (const b of buckets) {
      req.rateLimitApplied = b;
      const r = await limiter(req);
      if (r.isAllowed) continue;
      if (r.isExceeded && (!exceeded || r.ttl > exceeded.ttl)) exceeded = { max: r.max, ttl: r.ttl };
      if (!shown || r.remaining < shown.remaining || (r.remaining === shown.remaining && r.max < shown.max)) {
        shown = { max: r.max, remaining: r.remaining, ttl: r.ttl };
      }
    }
    req.rateLimitApplied = undefined;
    const view = exceeded ? { ...exceeded, remaining: 0 } : shown;
    if (!view) return;
    const ttl = Math.max(0, view.ttl);
    reply.header('x-ratelimit-limit', view.max);
    reply.header('x-ratelimit-remaining', view.remaining);
    reply.header('x-ratelimit-reset', Math.ceil((Date.now() + ttl) / 1000));
    if (exceeded) {
      const retryAfter = Math.max(1, Math.ceil(ttl / 1000));
      throw new AppError(
        429,
        { error: `Rate limit exceeded. Try again in ${retryAfter} seconds.`, retryAfter },
        { 'retry-after': String(retryAfter) },
      );
    }
  };

  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => enforce(req, reply, clientBucketsOf(req, s)));
  app.addHook('preParsing', async (req: FastifyRequest, reply: FastifyReply, payload) => {
    await enforce(req, reply, tenantBucketsOf(req, s));
    return payload;
  });
}
