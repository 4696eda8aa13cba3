import type { Config } from './config.js';

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
