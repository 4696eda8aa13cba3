import rateLimit from '@fastify/rate-limit';
import { processRateLimitStore, tenantRateBuckets } from '@imagegen/operations';
import { type Config, type Logger, redisClient } from '@imagegen/platform';
import Fastify from 'fastify';

/**
 * Per-tenant limits of MCP tool calls (SPEC 8), in the very buckets of the REST API (tenantRateBuckets):
 * every call counts as an API request at the tenant's rate_limit_per_minute (default 60), generation tools
 * also against the generations bucket and upload_image_for_editing against the uploads one. The counters are
 * @fastify/rate-limit's, in Redis under the gateway's keys when REDIS_URL is set, so a tenant's limit holds
 * across every mcp and gateway process and across REST and MCP together; in this process's memory otherwise
 * (processRateLimitStore: shared with a gateway in the same process, as in `pnpm start`).
 * A Redis outage lets calls pass uncounted, as the gateway does. RATE_LIMIT_DISABLED=1 turns them off.
 */
export type ToolLimiterSettings = Pick<
  Config['rateLimits'],
  'disabled' | 'defaultPerMinute' | 'generationsPerMinute' | 'uploadsPerMinute'
> & { windowMs: number };

/** From Config.rateLimits (RATE_LIMIT_DISABLED, RATE_LIMIT_DEFAULT/GENERATIONS/UPLOADS_PER_MINUTE), as the gateway. */
export function toolLimiterSettings(config: Config): ToolLimiterSettings {
  return { ...config.rateLimits, windowMs: 60_000 };
}

export type ToolLimiter = (
  tenantId: string,
  tenantRatePerMinute: number | undefined,
  /** The catalogue's rate class of the tool's operation (generation, upload), counted besides the API bucket. */
  rate: 'generation' | 'upload' | undefined,
) => Promise<{ allowed: true } | { allowed: false; retryAfter: number }>;

/** What the plugin's limiter reads from the "request" it is given: the bucket being counted. */
interface BucketCall {
  routeOptions: { config: Record<string, never> };
  bucket: { key: string; max: number };
}

export async function createToolLimiter(
  s: ToolLimiterSettings,
  opts: { redisUrl?: string; namespace: string; logger: Logger },
): Promise<{ limiter: ToolLimiter; close(): Promise<void> }> {
  if (s.disabled) return { limiter: async () => ({ allowed: true }), close: async () => {} };
  const redis = opts.redisUrl ? redisClient(opts.redisUrl, 'mcp-ratelimit') : undefined;
  redis?.on('error', (err) => opts.logger.debug({ err }, 'rate-limit redis error'));
  // The plugin's counting (store, windows, Redis script) is reached through a fastify instance of its own: the
  // MCP app's requests are not the unit counted here, tool calls are.
  const counter = Fastify({ logger: false });
  await counter.register(rateLimit, {
    global: false,
    skipOnError: true,
    // Without Redis: this process's counters of the deployment, shared with the gateway if it runs here too.
    ...(redis ? { redis, nameSpace: opts.namespace } : { store: processRateLimitStore(opts.namespace) }),
  });
  await counter.ready();
  const count = counter.createRateLimit({
    keyGenerator: (req) => (req as unknown as BucketCall).bucket.key,
    max: (req) => (req as unknown as BucketCall).bucket.max,
    timeWindow: s.windowMs,
  });
  const limiter: ToolLimiter = async (tenantId, tenantRate, kind) => {
    let retryAfter = 0;
    for (const bucket of tenantRateBuckets(tenantId, tenantRate, kind, s)) {
      const r = await count({ routeOptions: { config: {} }, bucket } as unknown as Parameters<typeof count>[0]);
      if (!r.isAllowed && r.isExceeded) retryAfter = Math.max(retryAfter, Math.max(1, r.ttlInSeconds));
    }
    return retryAfter ? { allowed: false, retryAfter } : { allowed: true };
  };
  return {
    limiter,
    close: async () => {
      await counter.close();
      await redis?.quit().catch(() => redis.disconnect());
    },
  };
}
