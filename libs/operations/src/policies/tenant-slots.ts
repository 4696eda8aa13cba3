import { randomUUID } from 'node:crypto';
import { AppError, type Logger, redactUrl, redisClient } from '@imagegen/platform';
import type { Redis } from 'ioredis';

/**
 * Per-tenant caps on work held open at once (issue 15: one tenant cannot degrade another), counted in slots:
 * the gateway's for its routes (services/gateway/src/tenant-concurrency.ts), the mcp service's for its
 * generation tools, in the same counters.
 *
 * Counted across replicas in Redis when REDIS_URL is set: one sorted set per tenant and cap whose members are
 * the held slots, scored by their lease expiry (LEASE_MS, renewed every LEASE_MS/3 while held). A process that
 * crashes stops renewing, and its slots drop out within LEASE_MS (a plain INCR/DECR counter with a TTL would
 * keep a dead process's count for as long as live ones keep refreshing the key). While Redis cannot be reached
 * the caps are counted in this process's memory (per replica) and a warning says so. Without REDIS_URL they are
 * counted in memory (one process).
 */

/** A held slot's lease in Redis; renewed every LEASE_MS / 3. */
export const LEASE_MS = 30_000;
/** Retry-After of a refusal: generations last seconds, streams are usually short-lived too. */
export const CONCURRENCY_RETRY_AFTER_S = 5;

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
  /** Slots this process holds in Redis: member id -> key. */
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
 * before the process reports that it started. Used by the rate limits and the concurrency caps.
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

export type ConcurrencyKind = 'stream' | 'generation';

/** The 429: the `{error, details}` envelope, plus `retryAfter` as in the spec's rate-limit 429, and Retry-After. */
export function concurrencyRefusal(kind: ConcurrencyKind, max: number): AppError {
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

const processStores = new Map<string, SlotStore>();

/**
 * The memory slots of one deployment (events prefix) in this process, shared by the services it runs (the
 * all-in-one stack's gateway and mcp count together). Closing it is a no-op: holders give their slots back.
 */
function processSlotStore(eventsPrefix: string): SlotStore {
  let store = processStores.get(eventsPrefix);
  if (!store) {
    const inner = memorySlotStore();
    store = { acquire: (key, max) => inner.acquire(key, max), close: async () => {} };
    processStores.set(eventsPrefix, store);
  }
  return store;
}

/**
 * The slot store of a process: in Redis under `${eventsPrefix}:conc:` when `redisUrl` is set (with the memory
 * fallback and its warnings), in memory otherwise (shared by the services of this process). `who` names the process in Redis and in the warnings.
 */
export async function createSlotStore(opts: { redisUrl?: string; eventsPrefix: string; logger: Logger; who: string }): Promise<SlotStore> {
  const memory = processSlotStore(opts.eventsPrefix);
  if (!opts.redisUrl) return memory;
  const redis = redisClient(opts.redisUrl, `${opts.who}-concurrency`);
  let lastWarn = 0;
  const store = redisSlotStore(redis, `${opts.eventsPrefix}:conc:`, memory, (err) => {
    if (Date.now() - lastWarn < 30_000) return;
    lastWarn = Date.now();
    opts.logger.warn({ err }, `tenant concurrency caps: Redis unavailable, counting in this ${opts.who} only meanwhile`);
  });
  await watchRedis(
    redis,
    opts.logger,
    opts.redisUrl,
    `per-tenant stream and generation caps count in this ${opts.who} only (not across replicas) until it is back`,
  );
  return {
    acquire: (key, max) => store.acquire(key, max),
    async close() {
      await store.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
