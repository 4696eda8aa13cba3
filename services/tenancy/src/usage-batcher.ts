import type { Logger, Sql } from '@imagegen/platform';
import { addKeyUses } from './repositories/api-keys.js';

/**
 * API key usage (usageCount, lastUsedAt) is counted in memory and written in one UPDATE per
 * interval, so the authentication path never waits for a write.
 */
export interface UsageBatcher {
  record(keyHash: string, count: number, at?: Date): void;
  flush(): Promise<void>;
  stop(): Promise<void>;
}

export function createUsageBatcher(sql: Sql, logger: Logger, intervalMs = 1000): UsageBatcher {
  let pending = new Map<string, { c: number; l: number }>();
  let flushing: Promise<void> | undefined;

  async function flush() {
    // A loop, not an if: another caller may have started the next batch while this one waited.
    while (flushing) await flushing;
    if (pending.size === 0) return;
    const batch = pending;
    pending = new Map();
    const uses = [...batch].map(([h, v]) => ({ h, c: v.c, l: new Date(v.l).toISOString() }));
    flushing = addKeyUses(sql, uses)
      .catch((err) => {
        logger.warn({ err, keys: uses.length }, 'could not record API key usage; will retry');
        for (const u of uses) {
          const cur = pending.get(u.h);
          pending.set(u.h, { c: (cur?.c ?? 0) + u.c, l: Math.max(cur?.l ?? 0, Date.parse(u.l)) });
        }
      })
      .finally(() => {
        flushing = undefined;
      });
    await flushing;
  }

  const timer = setInterval(() => void flush(), intervalMs);
  timer.unref();

  return {
    record(keyHash, count, at = new Date()) {
      if (count <= 0) return;
      const cur = pending.get(keyHash);
      const t = at.getTime();
      if (cur) {
        cur.c += count;
        if (t > cur.l) cur.l = t;
      } else pending.set(keyHash, { c: count, l: t });
    },
    flush,
    async stop() {
      clearInterval(timer);
      await flush();
    },
  };
}
