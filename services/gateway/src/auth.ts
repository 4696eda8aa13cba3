import { createHash, timingSafeEqual } from 'node:crypto';
import { SESSION_ID_MAX } from '@imagegen/api-schemas/vocab';
import { AppError, forbidden, onTenantChanged, type Principal, unauthorized } from '@imagegen/platform';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { checkConsoleRequest, consoleCookieName, consoleTokenKind, consoleTokenOf } from './console.js';
import { checkSignatureHeaders, registerRequestSignatures, type SigningKeys } from './request-signature.js';
import type { GatewayDeps, RouteAuth } from './types.js';

/** What the gateway knows about the API key of a tenant request (rate limiting reads rateLimitPerMinute). */
export interface ApiKeyInfo {
  keyId: string;
  keyName: string;
  keyHash: string;
  rateLimitPerMinute: number;
}

/** The signed-in admin of a request authenticated by session token (undefined for the legacy admin token). */
export interface AdminUserInfo {
  userId: string;
  email: string;
  role: 'admin' | 'super_admin';
  displayName: string;
  sessionExpiresAt: string;
  tokenHash: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    apiKeyInfo: ApiKeyInfo | null;
    adminUser: AdminUserInfo | null;
  }
}

export const API_KEY_PATTERN = /^sk_(live|test)_[a-zA-Z0-9]{32,}$/;
const BEARER = /^bearer\s+(.+)$/i;
const MAX_CACHE_ENTRIES = 50_000;
const USAGE_FLUSH_MS = 2000;

export const ADMIN_AUTH_REQUIRED = 'Admin authentication required';
export const SUPER_ADMIN_REQUIRED = 'super_admin privileges required';

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

interface CacheEntry {
  expires: number;
  /** undefined: the key is unknown or revoked (negative entry). */
  tenantId?: string;
  keyType?: 'live' | 'test';
  keyId?: string;
  keyName?: string;
  tenantActive?: boolean;
  rateLimitPerMinute?: number;
  /** Set only for a key that requires signed requests (request-signature.ts): its secrets. */
  signing?: SigningKeys;
}

/** Which protection a route gets: the catalogue's (operation-policy.ts), or its own config; none when no route matched. */
const routeAuthOf = (request: FastifyRequest): RouteAuth => request.routeOptions.config?.auth ?? 'none';

function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

function sessionIdOf(request: FastifyRequest): string | undefined {
  const raw = request.headers['x-session-id'];
  if (raw === undefined) return undefined;
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (typeof v !== 'string' || v.length < 1 || v.length > SESSION_ID_MAX) {
    throw new AppError(400, {
      error: 'Invalid request payload',
      details: [`X-Session-Id must be between 1 and ${SESSION_ID_MAX} characters`],
    });
  }
  return v;
}

/**
 * The auth hook (SPEC 5). Tenant keys: X-API-Key wins over Authorization: Bearer; validation order
 * format, cache (by sha256 of the key, TTL API_KEY_CACHE_TTL_MS), stored lookup through tenancy,
 * tenant active, cache refresh, then (a key that requires signed requests) the signature headers, whose body
 * check follows in preParsing (request-signature.ts). A cache hit makes no gRPC call; uses served from the cache are
 * reported to tenancy in batches. Admin: Authorization: Bearer <session token> (checked on every
 * request, no cache, so deactivation and logout apply at once) or the legacy X-Admin-Token.
 */
export async function registerAuth(app: FastifyInstance<any, any, any, any, any>, deps: GatewayDeps): Promise<void> {
  const { ctx } = deps;
  const config = ctx.config;
  const ttl = config.apiKeyCacheTtlMs ?? 3000;
  const tenancy = deps.clients.tenancy;
  const cache = new Map<string, CacheEntry>();
  const inflight = new Map<string, Promise<CacheEntry>>();
  let uses = new Map<string, { c: number; l: number }>();

  app.decorateRequest('apiKeyInfo', null);
  app.decorateRequest('adminUser', null);
  registerRequestSignatures(app, deps);

  const remember = (hash: string, e: CacheEntry) => {
    if (ttl <= 0) return;
    cache.delete(hash);
    if (cache.size >= MAX_CACHE_ENTRIES) {
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) cache.delete(oldest);
    }
    cache.set(hash, e);
  };

  const lookup = (hash: string, requestId: string): Promise<CacheEntry> => {
    let p = inflight.get(hash);
    if (p) return p;
    p = tenancy
      .authenticateApiKey({ keyHash: hash, verifiesSignatures: true }, { requestId, source: 'gateway' }, { timeoutMs: 10_000 })
      .then(
        (r): CacheEntry => ({
          expires: Date.now() + ttl,
          tenantId: r.tenantId,
          keyType: r.keyType as 'live' | 'test',
          keyId: r.keyId,
          keyName: r.keyName,
          tenantActive: r.tenantActive,
          rateLimitPerMinute: r.rateLimitPerMinute,
          signing: r.signatureRequired
            ? {
                keyId: r.keyId,
                secrets: r.signingSecrets.map((x) => ({
                  key: Buffer.from(x.secret, 'utf8'),
                  until: x.expiresAt ? Date.parse(x.expiresAt) : Number.POSITIVE_INFINITY,
                })),
              }
            : undefined,
        }),
        (err: unknown): CacheEntry => {
          if (err instanceof AppError && err.status === 401) return { expires: Date.now() + ttl };
          throw err;
        },
      )
      .then((e) => {
        remember(hash, e);
        return e;
      })
      .finally(() => inflight.delete(hash));
    inflight.set(hash, p);
    return p;
  };

  const flushUses = async () => {
    if (uses.size === 0) return;
    const batch = uses;
    uses = new Map();
    const list = [...batch].map(([keyHash, v]) => ({ keyHash, count: v.c, lastUsedAt: new Date(v.l).toISOString() }));
    try {
      await tenancy.recordApiKeyUsage({ uses: list }, { requestId: `usage-${Date.now()}`, source: 'gateway' }, { timeoutMs: 5000 });
    } catch (err) {
      ctx.logger.debug({ err }, 'could not report API key usage; retrying later');
      for (const u of list) {
        const cur = uses.get(u.keyHash);
        uses.set(u.keyHash, { c: (cur?.c ?? 0) + u.count, l: Math.max(cur?.l ?? 0, Date.parse(u.lastUsedAt)) });
      }
    }
  };
  const timer = setInterval(() => void flushUses(), USAGE_FLUSH_MS);
  timer.unref();
  // A tenant deactivated or a key revoked: this gateway forgets the tenant's cached keys at once (the TTL stays
  // the bound).
  const tenantChanged = await onTenantChanged(
    ctx.events,
    { eventsPrefix: config.eventsPrefix, durable: 'gateway-tenant-changed', logger: ctx.logger },
    (tenantId) => {
      for (const [hash, e] of cache) if (e.tenantId === tenantId) cache.delete(hash);
    },
  );
  app.addHook('onClose', () => tenantChanged.stop());
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await flushUses();
  });

  const finishTenant = (request: FastifyRequest, hash: string, e: CacheEntry) => {
    if (!e.tenantId) throw unauthorized();
    if (!e.tenantActive) throw forbidden('Tenant account is inactive');
    // Signed requests (SPEC 5.8, extension): the headers and the clock here, the body in preParsing.
    if (e.signing) checkSignatureHeaders(request, e.signing);
    request.apiKeyInfo = {
      keyId: e.keyId as string,
      keyName: e.keyName as string,
      keyHash: hash,
      rateLimitPerMinute: e.rateLimitPerMinute as number,
    };
    request.principal = {
      requestId: request.id,
      tenantId: e.tenantId,
      keyType: e.keyType,
      sessionId: sessionIdOf(request),
      source: 'tenant_api',
    };
  };

  // The web console's session cookie (console.ts), when a request sends no other credential: the session names the
  // API key it signed in with, authenticated as that key is (cache, revocation, tenant state); CSRF checked after.
  const cookieName = consoleCookieName(config);
  const consoleTenant = (request: FastifyRequest, done: HookHandlerDoneFunction) => {
    const token = consoleTokenOf(request, cookieName);
    if (!token || consoleTokenKind(token) !== 'tenant') return done(unauthorized());
    tenancy
      .authenticateConsoleSession({ tokenHash: sha256Hex(token) }, { requestId: request.id, source: 'gateway' })
      .then((s) => {
        const hit = cache.get(s.keyHash);
        return (hit && hit.expires > Date.now() ? Promise.resolve(hit) : lookup(s.keyHash, request.id)).then((e) => {
          finishTenant(request, s.keyHash, e);
          checkConsoleRequest(request, token);
        });
      })
      .then(() => done(), done);
  };

  const tenantAuth = (request: FastifyRequest, done: HookHandlerDoneFunction) => {
    const xKey = request.headers['x-api-key'];
    let key: string | undefined;
    if (xKey !== undefined && xKey !== '') key = Array.isArray(xKey) ? xKey[0] : xKey;
    else {
      const m = request.headers.authorization ? BEARER.exec(request.headers.authorization) : null;
      if (m) key = m[1].trim();
    }
    if (key === undefined && !request.headers.authorization) return consoleTenant(request, done);
    if (!key || !API_KEY_PATTERN.test(key)) return done(unauthorized());
    const hash = sha256Hex(key);
    const hit = cache.get(hash);
    if (hit && hit.expires > Date.now()) {
      try {
        finishTenant(request, hash, hit);
      } catch (err) {
        return done(err as Error);
      }
      if (hit.tenantId) {
        const u = uses.get(hash);
        if (u) {
          u.c++;
          u.l = Date.now();
        } else uses.set(hash, { c: 1, l: Date.now() });
      }
      return done();
    }
    lookup(hash, request.id).then(
      (e) => {
        try {
          finishTenant(request, hash, e);
        } catch (err) {
          return done(err as Error);
        }
        done();
      },
      (err) => done(err),
    );
  };

  const adminAuth = async (request: FastifyRequest, need: 'admin' | 'super_admin') => {
    const authz = request.headers.authorization;
    const m = authz ? BEARER.exec(authz) : null;
    // The web console's admin session cookie, when no other admin credential is sent (never the legacy token).
    const cookie = !authz && !request.headers['x-admin-token'] ? consoleTokenOf(request, cookieName) : undefined;
    const fromCookie = cookie !== undefined && consoleTokenKind(cookie) === 'admin' ? cookie : undefined;
    let principal: Principal;
    if (m || fromCookie) {
      const token = fromCookie ?? (m as RegExpExecArray)[1].trim();
      const tokenHash = sha256Hex(token);
      const s = await tenancy.authenticateAdminSession({ tokenHash }, { requestId: request.id, source: 'gateway' });
      request.adminUser = {
        userId: s.userId,
        email: s.email,
        role: s.role as 'admin' | 'super_admin',
        displayName: s.displayName,
        sessionExpiresAt: s.sessionExpiresAt,
        tokenHash,
      };
      principal = { requestId: request.id, adminUserId: s.userId, adminRole: s.role as Principal['adminRole'], source: 'admin' };
      if (fromCookie) checkConsoleRequest(request, fromCookie);
    } else {
      const raw = request.headers['x-admin-token'];
      const given = Array.isArray(raw) ? raw[0] : raw;
      if (given === undefined || given === '') throw unauthorized(ADMIN_AUTH_REQUIRED);
      if (!config.adminToken || !safeEqual(given, config.adminToken)) throw unauthorized('Invalid admin token');
      principal = { requestId: request.id, adminRole: 'super_admin', source: 'admin' };
    }
    if (need === 'super_admin' && principal.adminRole !== 'super_admin') throw forbidden(SUPER_ADMIN_REQUIRED);
    request.principal = principal;
  };

  app.addHook('onRequest', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const mode = routeAuthOf(request);
    if (mode === 'tenant') return tenantAuth(request, done);
    if (mode === 'none') {
      request.principal = { requestId: request.id };
      return done();
    }
    adminAuth(request, mode).then(() => done(), done);
  });
}

/** OpenAPI security requirement of admin routes. */
export const adminSecurity: { [label: string]: string[] }[] = [{ bearer: [] }, { adminToken: [] }];
/** OpenAPI security requirement of tenant routes. */
export const tenantSecurity: { [label: string]: string[] }[] = [{ apiKey: [] }, { bearer: [] }];
