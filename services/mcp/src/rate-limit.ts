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

export function toolLimiterSettings(env: NodeJS.ProcessEnv = process.env): ToolLimiterSettings {
  const int = (name: string, def: number) => {
    const n = Number(env[name]);
    return env[name] !== undefined && env[name] !== '' && Number.isInteger(n) && n >= 0 ? n : def;
  };
  return {
    disabled: env.RATE_LIMIT_DISABLED === '1' || env.RATE_LIMIT_DISABLED === 'true',
    defaultPerMinute: int('RATE_LIMIT_DEFAULT_PER_MINUTE', 60),
    generationsPerMinute: int('RATE_LIMIT_GENERATIONS_PER_MINUTE', 30),
    uploadsPerMinute: int('RATE_LIMIT_UPLOADS_PER_MINUTE', 20),
    windowMs: 60_000,
  };
}

export type ToolLimiter = (
  tenantId: string,
  tenantRatePerMinute: number | undefined,
  tool: string,
) => { allowed: true } | { allowed: false; retryAfter: number };

export function createToolLimiter(s: ToolLimiterSettings = toolLimiterSettings()): ToolLimiter {
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
