/**
 * In-memory fixed-window limiter (per key). The oauth service uses it for the token endpoint
 * (SPEC 8: 30 requests per minute per client IP) as a fallback when the gateway does not limit it.
 */
export function createFixedWindowLimiter(limit: number, windowMs: number) {
  const windows = new Map<string, { start: number; count: number }>();
  return (key: string) => {
    const now = Date.now();
    let w = windows.get(key);
    if (!w || now - w.start >= windowMs) {
      if (windows.size > 50_000) windows.clear();
      w = { start: now, count: 0 };
      windows.set(key, w);
    }
    w.count += 1;
    const resetSeconds = Math.max(1, Math.ceil((w.start + windowMs - now) / 1000));
    return { allowed: w.count <= limit, limit, remaining: Math.max(0, limit - w.count), resetSeconds };
  };
}
