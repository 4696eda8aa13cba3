import type { Config } from '@imagegen/platform';

/**
 * Per-tenant limits of MCP tool calls (SPEC 8), with the gateway's buckets and wording: every call
 * counts as an API request (the tenant's rate_limit_per_minute, default 60); generation tools also
 * count against 30/min and upload_image_for_editing against 20/min (scaled up for tenants above
 * 60/min, as the gateway does). Fixed one-minute windows, in memory per mcp process (the REST
 * gateway's counters live in its own store). RATE_LIMIT_DISABLED=1 turns them off like the gateway's.
 */
export const GENERATION_TOOLS = new Set([
  'generate_image',
  'edit_image',
  'generate_character_image',
  'generate_multi_character_image',
  'generate_product_image',
]);
export const UPLOAD_TOOLS = new Set(['upload_image_for_editing']);

export interface ToolLimiterSettings {
  disabled: boolean;
  defaultPerMinute: number;
  generationsPerMinute: number;
  uploadsPerMinute: number;
  windowMs: number;
}

/** From Config.rateLimits (RATE_LIMIT_DISABLED, RATE_LIMIT_DEFAULT/GENERATIONS/UPLOADS_PER_MINUTE), as the gateway. */
export function toolLimiterSettings(config: Config): ToolLimiterSettings {
  const r = config.rateLimits;
  return {
    disabled: r.disabled,
    defaultPerMinute: r.defaultPerMinute,
    generationsPerMinute: r.generationsPerMinute,
    uploadsPerMinute: r.uploadsPerMinute,
    windowMs: 60_000,
  };
}

export type ToolLimiter = (
  tenantId: string,
  tenantRatePerMinute: number | undefined,
  tool: string,
) => { allowed: true } | { allowed: false; retryAfter: number };

export function createToolLimiter(s: ToolLimiterSettings): ToolLimiter {
  const windows = new Map<string, { start: number; count: number }>();
  const hit = (key: string, max: number, now: number) => {
    let w = windows.get(key);
    if (!w || now - w.start >= s.windowMs) {
      if (windows.size > 100_000) windows.clear();
      w = { start: now, count: 0 };
      windows.set(key, w);
    }
    w.count += 1;
    return w.count <= max ? 0 : Math.max(1, Math.ceil((w.start + s.windowMs - now) / 1000));
  };
  return (tenantId, tenantRate, tool) => {
    if (s.disabled) return { allowed: true };
    const now = Date.now();
    const rate = tenantRate && tenantRate > 0 ? tenantRate : s.defaultPerMinute;
    const scaled = (base: number) => Math.max(base, Math.floor((base * rate) / 60));
    const waits = [hit(`api:${tenantId}`, rate, now)];
    if (GENERATION_TOOLS.has(tool)) waits.push(hit(`gen:${tenantId}`, scaled(s.generationsPerMinute), now));
    if (UPLOAD_TOOLS.has(tool)) waits.push(hit(`upload:${tenantId}`, scaled(s.uploadsPerMinute), now));
    const retryAfter = Math.max(...waits);
    return retryAfter ? { allowed: false, retryAfter } : { allowed: true };
  };
}
