import { createRequire } from 'node:module';
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Config } from '@imagegen/platform';

export type TenantRateBucket = 'api' | 'generation' | 'upload';

/**
 * The per-tenant rate-limit buckets (SPEC 8) a request falls in, the same for a REST request (gateway) and an
 * MCP tool call (mcp), so both count in one set of counters per tenant (shared through Redis, keys under
 * rateLimitNamespace): every request counts as an API request at the tenant's rate_limit_per_minute (default
 * 60); a generation also against 30/min and an upload against 20/min, scaled up for tenants above 60/min
 * (max(30, rate/2), max(20, rate/3)), never below the defaults.
 */
export function tenantRateBuckets(
  tenantId: string,
  tenantRatePerMinute: number | undefined,
  kind: 'generation' | 'upload' | undefined,
  s: Pick<Config['rateLimits'], 'defaultPerMinute' | 'generationsPerMinute' | 'uploadsPerMinute'>,
): { bucket: TenantRateBucket; key: string; max: number }[] {
  const rate = tenantRatePerMinute && tenantRatePerMinute > 0 ? tenantRatePerMinute : s.defaultPerMinute;
  const scaled = (base: number) => Math.max(base, Math.floor((base * rate) / 60));
  const out: { bucket: TenantRateBucket; key: string; max: number }[] = [{ bucket: 'api', key: `api:${tenantId}`, max: rate }];
  if (kind === 'generation') out.push({ bucket: 'generation', key: `gen:${tenantId}`, max: scaled(s.generationsPerMinute) });
  if (kind === 'upload') out.push({ bucket: 'upload', key: `upload:${tenantId}`, max: scaled(s.uploadsPerMinute) });
  return out;
}

/** The Redis key namespace of the rate-limit counters (RATE_LIMIT_PREFIX, default EVENTS_PREFIX). */
export function rateLimitNamespace(config: Pick<Config, 'rateLimits' | 'eventsPrefix'>): string {
  return `${config.rateLimits.prefix ?? config.eventsPrefix}:rl:`;
}

type Incr = (key: string, cb: (err: Error | null, res?: { current: number; ttl: number }) => void, timeWindow: number, max: number) => void;

type LocalStoreCtor = new (continueExceeding: boolean, exponentialBackoff: boolean, cache: number) => { incr: Incr };
/** @fastify/rate-limit's own in-memory counting (fixed windows in an LRU of keys): its LocalStore, loaded when first used. */
const localStore = (): LocalStoreCtor => createRequire(import.meta.url)('@fastify/rate-limit/store/LocalStore.js');

/** Keys the in-memory counters of one namespace keep (the least recently counted go first; the plugin's default is 5,000). */
const MEMORY_RATE_KEYS = 20_000;

const processRateCounters = new Map<string, { incr: Incr }>();

/**
 * The in-memory rate-limit counters of one deployment (its rateLimitNamespace) in this process, as a store for
 * @fastify/rate-limit's `store` option. Without REDIS_URL the gateway and mcp of one process (`pnpm start`)
 * count a tenant's REST requests and MCP tool calls in the same buckets, as they do in Redis; each limiter
 * would otherwise get counters of its own and a tenant twice its limit.
 */
export function processRateLimitStore(namespace: string): FastifyRateLimitStoreCtor {
  let counters = processRateCounters.get(namespace);
  if (!counters) {
    counters = new (localStore())(false, false, MEMORY_RATE_KEYS);
    processRateCounters.set(namespace, counters);
  }
  const shared = counters;
  return class SharedMemoryRateStore implements FastifyRateLimitStore {
    incr(key: string, cb: Parameters<Incr>[1], timeWindow?: number, max?: number): void {
      shared.incr(key, cb, timeWindow as number, max as number);
    }
    // Every route and createRateLimit() of every instance counts in the same map: the keys name the bucket.
    child(): FastifyRateLimitStore {
      return this;
    }
  };
}
