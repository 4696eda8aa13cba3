import { createHash, randomUUID } from 'node:crypto';
import { AppError, redisClient } from '@imagegen/platform';
import type { Logger } from 'pino';

/**
 * Idempotency records (the IETF httpapi Idempotency-Key draft, with Stripe's semantics), shared by the
 * gateway (REST) and the mcp service (tools' idempotency_key): per scope (tenant + surface) and key, the
 * first request's fingerprint, then its response, kept for `ttlMs` (24 h).
 *
 * A request first claims the key with a lease (`leaseMs`, renewed while it runs). A claim that is never
 * completed (its process died) expires with its lease, so the key can be retried; a response is only
 * completed by the claim's owner, so a late owner never overwrites a retry's result.
 *
 * Two stores: Redis (REDIS_URL; every gateway and mcp replica shares the records) and memory (one
 * process: the all-in-one without Redis; records do not outlive the process).
 */

export interface StoredResponse {
  status: number;
  contentType?: string;
  /** Answer headers a replay repeats (an async submit's Location and Preference-Applied). */
  headers?: Record<string, string>;
  body: string;
}

export type ClaimResult =
  | { state: 'claimed'; owner: string }
  | { state: 'in_flight' }
  | { state: 'mismatch' }
  | { state: 'done'; response: StoredResponse };

export interface IdempotencyStore {
  claim(id: string, fingerprint: string, leaseMs: number): Promise<ClaimResult>;
  renew(id: string, owner: string, leaseMs: number): Promise<void>;
  complete(id: string, owner: string, fingerprint: string, response: StoredResponse, ttlMs: number): Promise<void>;
  release(id: string, owner: string): Promise<void>;
  close(): Promise<void>;
}

interface Rec {
  fingerprint: string;
  owner?: string;
  response?: StoredResponse;
}

function decide(rec: Rec, fingerprint: string): ClaimResult {
  if (rec.fingerprint !== fingerprint) return { state: 'mismatch' };
  if (rec.response) return { state: 'done', response: rec.response };
  return { state: 'in_flight' };
}

export function memoryIdempotencyStore(now: () => number = Date.now): IdempotencyStore {
  const recs = new Map<string, Rec & { expires: number }>();
  const live = (id: string) => {
    const r = recs.get(id);
    if (r && r.expires <= now()) {
      recs.delete(id);
      return undefined;
    }
    return r;
  };
  const sweep = setInterval(() => {
    for (const id of recs.keys()) live(id);
  }, 60_000);
  sweep.unref();
  return {
    async claim(id, fingerprint, leaseMs) {
      const r = live(id);
      if (r) return decide(r, fingerprint);
      const owner = randomUUID();
      recs.set(id, { fingerprint, owner, expires: now() + leaseMs });
      return { state: 'claimed', owner };
    },
    async renew(id, owner, leaseMs) {
      const r = live(id);
      if (r && r.owner === owner && !r.response) r.expires = now() + leaseMs;
    },
    async complete(id, owner, fingerprint, response, ttlMs) {
      const r = live(id);
      if (r && r.owner !== owner) return;
      recs.set(id, { fingerprint, response, expires: now() + ttlMs });
    },
    async release(id, owner) {
      const r = live(id);
      if (r && r.owner === owner && !r.response) recs.delete(id);
    },
    async close() {
      clearInterval(sweep);
    },
  };
}

// Compare-and-set on the owner: only the claim's owner may renew, complete or release it.
const IF_OWNER = `
local v = redis.call('GET', KEYS[1])
if v then
  local r = cjson.decode(v)
  if r.owner ~= ARGV[1] or r.response then return 0 end
end
if ARGV[2] == 'renew' then
  if not v then return 0 end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif ARGV[2] == 'complete' then
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[3])
elseif ARGV[2] == 'release' then
  redis.call('DEL', KEYS[1])
end
return 1`;

/** The few ioredis commands the Redis store uses (tests give it a fake). */
export interface RedisCommands {
  set(key: string, value: string, px: 'PX', ms: number, nx: 'NX'): Promise<'OK' | null>;
  get(key: string): Promise<string | null>;
  eval(script: string, numKeys: number, ...args: string[]): Promise<unknown>;
}

export function redisIdempotencyStore(redis: RedisCommands, prefix: string): IdempotencyStore {
  const k = (id: string) => `${prefix}${id}`;
  const ifOwner = (id: string, owner: string, op: string, ms = 0, value = '') =>
    redis.eval(IF_OWNER, 1, k(id), owner, op, String(ms), value);
  return {
    async claim(id, fingerprint, leaseMs) {
      for (let i = 0; i < 3; i++) {
        const owner = randomUUID();
        const set = await redis.set(k(id), JSON.stringify({ fingerprint, owner }), 'PX', leaseMs, 'NX');
        if (set === 'OK') return { state: 'claimed', owner };
        const v = await redis.get(k(id));
        if (v) return decide(JSON.parse(v) as Rec, fingerprint);
        // Expired between the two commands: claim again.
      }
      return { state: 'in_flight' };
    },
    async renew(id, owner, leaseMs) {
      await ifOwner(id, owner, 'renew', leaseMs);
    },
    async complete(id, owner, fingerprint, response, ttlMs) {
      await ifOwner(id, owner, 'complete', ttlMs, JSON.stringify({ fingerprint, response }));
    },
    async release(id, owner) {
      await ifOwner(id, owner, 'release');
    },
    async close() {},
  };
}

/**
 * The store of this process: Redis when REDIS_URL is set (shared by every replica), memory otherwise.
 * `name` tells the connections apart (CLIENT LIST) and scopes nothing: callers put their surface in the id.
 */
export function createIdempotencyStore(opts: { redisUrl?: string; prefix: string; name: string; logger: Logger }): IdempotencyStore {
  if (!opts.redisUrl) return memoryIdempotencyStore();
  const redis = redisClient(opts.redisUrl, `${opts.name}-idempotency`);
  redis.on('error', (err) => opts.logger.debug({ err }, 'idempotency redis error'));
  const store = redisIdempotencyStore(redis, `${opts.prefix}:idem:`);
  return {
    ...store,
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The fingerprint of a request: what must be the same for a retry to be the same request. */
export const requestFingerprint = (...parts: string[]) => createHash('sha256').update(parts.join('\n')).digest('hex');

/** Idempotency records are kept this long (the IETF draft suggests at least 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** A running request's claim lasts this long unless renewed (every third of it while the request runs). */
export const IDEMPOTENCY_LEASE_MS = 30_000;
/** A valid key: 1-255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/**
 * Answers that are not kept (the key stays free for a retry): 5xx (the work failed and was not billed),
 * 400 (refused by validation: correct it and resend under the same key), 401/403, 408 and 429.
 */
export const keepsIdempotentAnswer = (status: number) => status < 500 && ![400, 401, 403, 408, 429].includes(status);

/** Renews a claim while its request runs; returns the stop function. */
export function holdClaim(store: IdempotencyStore, id: string, owner: string, logger: Logger): () => void {
  const timer = setInterval(() => {
    store.renew(id, owner, IDEMPOTENCY_LEASE_MS).catch((err) => logger.debug({ err }, 'idempotency lease renewal failed'));
  }, IDEMPOTENCY_LEASE_MS / 3);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * The refusal of a claim that is not this request's to run, the same on REST and MCP: 422 when the key was
 * used for another request (`mismatchDetail` says what differs on that surface), 409 while the first runs.
 */
export function idempotencyRefusal(claim: { state: 'mismatch' | 'in_flight' }, mismatchDetail: string): AppError {
  if (claim.state === 'mismatch') {
    return new AppError(422, { error: 'Idempotency-Key already used for a different request', details: [mismatchDetail] });
  }
  return new AppError(
    409,
    { error: 'A request with this Idempotency-Key is still in progress', details: ['retry when it has finished'] },
    { 'retry-after': '1' },
  );
}
