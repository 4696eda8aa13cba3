import { createHmac, type Hmac, timingSafeEqual } from 'node:crypto';
import { Readable } from 'node:stream';
import { SIGNATURE_MAX_SKEW_MS } from '@imagegen/api-schemas/vocab';
import { AppError, dependencyUnavailable, type Logger, redisClient } from '@imagegen/platform';
import type { FastifyInstance, FastifyRequest, preParsingHookHandler } from 'fastify';
import type { GatewayDeps } from './types.js';

/**
 * Signed requests (SPEC 5.8; extension, issue 37), opt-in per API key (an admin turns `signatureRequired` on and
 * gets the signing secret once). Every request with such a key carries
 *   X-Timestamp: milliseconds since the epoch (decimal digits), within 5 minutes of the gateway's clock;
 *   X-Signature: lowercase or uppercase hex of HMAC-SHA256(secret as UTF-8, signed string), where the signed string
 *     is `${X-Timestamp}\n${METHOD}\n${path and query exactly as sent on the request line}\n` followed by the raw
 *     body bytes as sent (nothing after the last newline when there is no body).
 * Refusals, each 401 with its own text (SIGNATURE_ERRORS): headers missing, a malformed timestamp, a timestamp
 * more than 5 minutes away, a signature that matches no secret of the key (the current one, or the previous one
 * during its grace period after a rotation), and a signature seen before (replay): each verified signature is
 * claimed once, in Redis (SET NX with the rest of its window as TTL, shared by every gateway) when REDIS_URL is
 * set, else in this process's memory. A Redis outage refuses signed requests with 503 rather than skip the check.
 *
 * The headers and the clock are checked in the auth hook (auth.ts, `checkSignatureHeaders`); the body in a
 * preParsing hook, which reads it (up to the route's body limit), verifies it and hands the same bytes to the
 * parser. Keys without the flag pay one property check per request, nothing else.
 */

/** A key's signing secrets (HMAC keys), each accepted until `until` (ms since the epoch; Infinity for the current one). */
export interface SigningKeys {
  keyId: string;
  secrets: { key: Buffer; until: number }[];
}

/** What the auth hook leaves for the body check: the key, the timestamp text, the claimed signature. */
interface PendingSignature {
  keys: SigningKeys;
  timestamp: string;
  at: number;
  signature: Buffer;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook for a key that requires signatures; verified with the body in preParsing. */
    pendingSignature: PendingSignature | null;
  }
}

export const SIGNATURE_ERRORS = {
  missing: 'Request signature required: this API key needs X-Signature and X-Timestamp headers',
  timestamp: 'Invalid X-Timestamp header',
  stale: 'Request timestamp is more than 5 minutes from the server time',
  invalid: 'Invalid request signature',
  replayed: 'Request signature already used',
} as const;

const SIGNED_STRING =
  'X-Signature is the hex HMAC-SHA256, keyed with the signing secret, of "<X-Timestamp>\\n<METHOD>\\n<path?query>\\n<raw body>"';
const TIMESTAMP = /^\d{1,15}$/;
const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
/** A claimed signature is kept this much past the end of its window (clocks of gateways differ a little). */
const REPLAY_MARGIN_MS = 60_000;

const refuse = (error: string, details?: string[]) => new AppError(401, details ? { error, details } : { error });

/**
 * The header checks of a request made with a key that requires signatures (throws the 401s); on success, leaves
 * the pending signature on the request for the body check.
 */
export function checkSignatureHeaders(request: FastifyRequest, keys: SigningKeys, now = Date.now()): void {
  const signature = request.headers['x-signature'];
  const timestamp = request.headers['x-timestamp'];
  if (typeof signature !== 'string' || signature === '' || typeof timestamp !== 'string' || timestamp === '') {
    throw refuse(SIGNATURE_ERRORS.missing, [`send X-Timestamp (milliseconds since the epoch) and X-Signature; ${SIGNED_STRING}`]);
  }
  if (!TIMESTAMP.test(timestamp)) throw refuse(SIGNATURE_ERRORS.timestamp, ['X-Timestamp must be milliseconds since the epoch']);
  const at = Number(timestamp);
  if (Math.abs(now - at) > SIGNATURE_MAX_SKEW_MS) {
    throw refuse(SIGNATURE_ERRORS.stale, [`X-Timestamp must be within ${SIGNATURE_MAX_SKEW_MS} ms of the server time (${now})`]);
  }
  if (!HEX_SHA256.test(signature)) throw refuse(SIGNATURE_ERRORS.invalid, [SIGNED_STRING]);
  request.pendingSignature = { keys, timestamp, at, signature: Buffer.from(signature, 'hex') };
}

/** The start of the signed string; the raw body follows it. */
export const signedPrefix = (timestamp: string, method: string, pathWithQuery: string) => `${timestamp}\n${method}\n${pathWithQuery}\n`;

// ---- replay store ----

/** Signatures seen: `claim` is true the first time an id is claimed within its TTL, false after. */
export interface ReplayStore {
  claim(id: string, ttlMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** Ids claimed in this process (the all-in-one without Redis); at most `max`, the oldest dropped first beyond it. */
export function memoryReplayStore(now: () => number = Date.now, max = 1_000_000): ReplayStore {
  const seen = new Map<string, number>();
  const sweep = () => {
    const t = now();
    for (const [id, until] of seen) if (until <= t) seen.delete(id);
  };
  const timer = setInterval(sweep, 60_000);
  timer.unref();
  return {
    async claim(id, ttlMs) {
      const until = seen.get(id);
      if (until !== undefined && until > now()) return false;
      if (seen.size >= max) {
        sweep();
        if (seen.size >= max) seen.delete(seen.keys().next().value as string);
      }
      seen.delete(id);
      seen.set(id, now() + ttlMs);
      return true;
    },
    async close() {
      clearInterval(timer);
    },
  };
}

/** The one Redis command the Redis store uses (tests may give it a fake). */
export interface RedisSetNx {
  set(key: string, value: string, px: 'PX', ms: number, nx: 'NX'): Promise<'OK' | null>;
}

/** Ids claimed in Redis, shared by every gateway: SET NX with a TTL. */
export function redisReplayStore(redis: RedisSetNx, prefix: string): ReplayStore {
  return {
    async claim(id, ttlMs) {
      return (await redis.set(`${prefix}${id}`, '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX')) === 'OK';
    },
    async close() {},
  };
}

/** Redis when `redisUrl` is set (its connection opened at the first signed request), memory otherwise. */
export function createReplayStore(opts: { redisUrl?: string; prefix: string; logger: Logger }): ReplayStore {
  if (!opts.redisUrl) return memoryReplayStore();
  const url = opts.redisUrl;
  let redis: ReturnType<typeof redisClient> | undefined;
  let store: ReplayStore | undefined;
  return {
    claim(id, ttlMs) {
      if (!store) {
        redis = redisClient(url, 'gateway-signatures');
        redis.on('error', (err) => opts.logger.debug({ err }, 'request-signature redis error'));
        store = redisReplayStore(redis, opts.prefix);
      }
      return store.claim(id, ttlMs);
    },
    async close() {
      await redis?.quit().catch(() => redis?.disconnect());
    },
  };
}

// ---- the body check ----

/**
 * Reads the body (at most `limit` bytes), checks the signature against every secret still accepted, claims it
 * against replays; answers the same bytes as a stream for the parser.
 */
async function verify(request: FastifyRequest, p: PendingSignature, payload: NodeJS.ReadableStream, store: ReplayStore) {
  const limit = request.routeOptions.bodyLimit ?? Number.POSITIVE_INFINITY;
  if (Number(request.headers['content-length']) > limit) throw new AppError(413, { error: 'Request body too large' });
  const now = Date.now();
  const prefix = signedPrefix(p.timestamp, request.raw.method ?? request.method, request.raw.url ?? request.url);
  const macs: Hmac[] = p.keys.secrets.filter((s) => s.until > now).map((s) => createHmac('sha256', s.key).update(prefix, 'utf8'));
  const chunks = await new Promise<Buffer[]>((resolve, reject) => {
    const out: Buffer[] = [];
    let size = 0;
    const stop = () => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', reject);
    };
    const onData = (chunk: Buffer | string) => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += b.length;
      if (size > limit) {
        stop();
        return reject(new AppError(413, { error: 'Request body too large' }));
      }
      for (const m of macs) m.update(b);
      out.push(b);
    };
    const onEnd = () => {
      stop();
      resolve(out);
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', reject);
  });
  if (!macs.some((m) => timingSafeEqual(m.digest(), p.signature))) throw refuse(SIGNATURE_ERRORS.invalid, [SIGNED_STRING]);
  let fresh: boolean;
  try {
    fresh = await store.claim(`${p.keys.keyId}:${p.signature.toString('hex')}`, p.at + SIGNATURE_MAX_SKEW_MS - now + REPLAY_MARGIN_MS);
  } catch (err) {
    request.log.warn({ err }, 'request signatures: the replay store failed');
    throw dependencyUnavailable();
  }
  if (!fresh) throw refuse(SIGNATURE_ERRORS.replayed, ['sign every request anew: a new X-Timestamp makes a new signature']);
  return Readable.from(chunks, { objectMode: false });
}

/**
 * Registers the body check (a preParsing hook; requests without a pending signature pass at the cost of one
 * property check). Replay claims live under `<EVENTS_PREFIX>:sig:` in Redis.
 */
export function registerRequestSignatures(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): void {
  const { ctx } = deps;
  const store = createReplayStore({ redisUrl: ctx.config.redisUrl, prefix: `${ctx.config.eventsPrefix}:sig:`, logger: ctx.logger });
  app.decorateRequest('pendingSignature', null);
  app.addHook('onClose', () => store.close());
  const hook: preParsingHookHandler = (request, _reply, payload, done) => {
    const pending = request.pendingSignature;
    if (!pending) return done(null, payload);
    verify(request, pending, payload, store).then(
      (body) => done(null, body),
      (err: Error) => done(err),
    );
  };
  app.addHook('preParsing', hook);
}
