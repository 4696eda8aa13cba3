import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, type Client, internalPrincipal, type Logger } from '@imagegen/platform';

/** Who is calling the MCP endpoint. */
export interface McpAuth {
  kind: 'api_key' | 'oauth';
  tenantId: string;
  keyType: 'live' | 'test';
  /** OAuth scopes; undefined for API keys (all scopes). */
  scopes?: string[];
  clientId?: string;
  /** The tenant's rate_limit_per_minute (per-tenant tool call limit). */
  rateLimitPerMinute?: number;
  /** The gateway's request id, when forwarded. */
  requestId?: string;
}

/** An HTTP-level refusal (401/403) with the headers MCP clients need to find the authorization server. */
export class AuthFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string>,
  ) {
    super(String(body.error));
  }
}

export const API_KEY_PATTERN = /^sk_(live|test)_[a-zA-Z0-9]{32,}$/;
const API_KEY_PREFIX = /^sk_(live|test)_/;
const BEARER = /^bearer\s+(.+)$/i;

const sha256 = (v: string) => createHash('sha256').update(v, 'utf8').digest('hex');

interface Introspection {
  active: boolean;
  tenant_id?: string;
  tenant_active?: boolean;
  rate_limit_per_minute?: number;
  scope?: string;
  client_id?: string;
  exp?: number;
}

export interface AuthenticatorOptions {
  tenancy: Client<typeof TenancyServiceService>;
  /** Base URL of the oauth service (its /_internal/introspect validates access tokens). */
  oauthUrl: () => string;
  /** `${PUBLIC_BASE_URL}/.well-known/oauth-protected-resource` */
  resourceMetadataUrl: string;
  apiKeyCacheTtlMs: number;
  logger: Logger;
}

/**
 * Credentials of an MCP request: `X-API-Key` (wins) or `Authorization: Bearer <value>`. Values with
 * the sk_live_/sk_test_ prefix are API keys (tenancy AuthenticateApiKey with the sha256 hex hash);
 * anything else is an OAuth access token, validated by the oauth service (introspection).
 */
export function createAuthenticator(opts: AuthenticatorOptions) {
  const keyCache = new Map<string, { expires: number; auth?: McpAuth; inactive?: boolean }>();
  const tokenCache = new Map<string, { expires: number; result: Introspection }>();
  const uses = new Map<string, number>();

  const challenge = (error?: string, description?: string) => {
    const parts = [`resource_metadata="${opts.resourceMetadataUrl}"`];
    if (error) parts.unshift(`error="${error}"`);
    if (description) parts.push(`error_description="${description}"`);
    return { 'www-authenticate': `Bearer ${parts.join(', ')}` };
  };
  const missing = () => new AuthFailure(401, { error: 'Invalid or missing API key' }, challenge());
  const inactive = () => new AuthFailure(403, { error: 'Tenant account is inactive' }, {});

  const flushUses = async () => {
    if (!uses.size) return;
    const batch = [...uses.entries()].map(([keyHash, count]) => ({ keyHash, count, lastUsedAt: new Date().toISOString() }));
    uses.clear();
    await opts.tenancy.recordApiKeyUsage({ uses: batch }, internalPrincipal()).catch((err) => {
      opts.logger.debug({ err }, 'mcp: recording API key usage failed');
    });
  };
  const flushTimer = setInterval(() => void flushUses(), 5000);
  flushTimer.unref();

  async function apiKey(key: string, requestId?: string): Promise<McpAuth> {
    if (!API_KEY_PATTERN.test(key)) throw missing();
    const keyHash = sha256(key);
    const now = Date.now();
    const hit = keyCache.get(keyHash);
    if (hit && hit.expires > now) {
      if (hit.inactive) throw inactive();
      if (!hit.auth) throw missing();
      uses.set(keyHash, (uses.get(keyHash) ?? 0) + 1);
      return { ...hit.auth, requestId };
    }
    if (keyCache.size > 50_000) keyCache.clear();
    try {
      const r = await opts.tenancy.authenticateApiKey({ keyHash }, internalPrincipal());
      const auth: McpAuth = {
        kind: 'api_key',
        tenantId: r.tenantId,
        keyType: r.keyType === 'test' ? 'test' : 'live',
        rateLimitPerMinute: r.rateLimitPerMinute,
      };
      keyCache.set(keyHash, { expires: now + opts.apiKeyCacheTtlMs, auth, inactive: !r.tenantActive });
      if (!r.tenantActive) throw inactive();
      return { ...auth, requestId };
    } catch (err) {
      if (err instanceof AuthFailure) throw err;
      if (err instanceof AppError && err.status === 401) {
        keyCache.set(keyHash, { expires: now + opts.apiKeyCacheTtlMs });
        throw missing();
      }
      throw err;
    }
  }

  async function introspect(token: string): Promise<Introspection> {
    const key = sha256(token);
    const now = Date.now();
    const hit = tokenCache.get(key);
    if (hit && hit.expires > now) return hit.result;
    const res = await fetch(`${opts.oauthUrl().replace(/\/+$/, '')}/_internal/introspect`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok) throw new AppError(503, { error: 'Service temporarily unavailable' });
    const result = (await res.json()) as Introspection;
    if (tokenCache.size > 50_000) tokenCache.clear();
    // Short cache: revocation (refresh token reuse, inactive tenant) takes effect within seconds.
    const ttl = result.active && result.exp ? Math.min(5000, result.exp * 1000 - now) : 5000;
    if (ttl > 0) tokenCache.set(key, { expires: now + ttl, result });
    return result;
  }

  async function oauth(token: string, requestId?: string): Promise<McpAuth> {
    if (token.length > 512)
      throw new AuthFailure(
        401,
        { error: 'invalid_token', error_description: 'The access token is invalid or expired' },
        challenge('invalid_token'),
      );
    const r = await introspect(token);
    if (!r.active || !r.tenant_id) {
      throw new AuthFailure(
        401,
        { error: 'invalid_token', error_description: 'The access token is invalid or expired' },
        challenge('invalid_token'),
      );
    }
    if (r.tenant_active === false) throw inactive();
    return {
      kind: 'oauth',
      tenantId: r.tenant_id,
      keyType: 'live',
      scopes: (r.scope ?? '').split(' ').filter(Boolean),
      clientId: r.client_id,
      rateLimitPerMinute: r.rate_limit_per_minute,
      requestId,
    };
  }

  return {
    async authenticate(headers: IncomingHttpHeaders): Promise<McpAuth> {
      const requestId = typeof headers['x-request-id'] === 'string' ? headers['x-request-id'] : undefined;
      const xApiKey = headers['x-api-key'];
      if (typeof xApiKey === 'string' && xApiKey.trim()) return apiKey(xApiKey.trim(), requestId);
      const bearer = BEARER.exec(String(headers.authorization ?? ''))?.[1]?.trim();
      if (!bearer) throw missing();
      if (API_KEY_PREFIX.test(bearer)) return apiKey(bearer, requestId);
      return oauth(bearer, requestId);
    },
    /** Forgets what is cached of a tenant (its keys, its tokens' introspections): TenantChanged. */
    dropTenant(tenantId: string) {
      for (const [hash, e] of keyCache) if (e.auth?.tenantId === tenantId) keyCache.delete(hash);
      for (const [token, e] of tokenCache) if (e.result.tenant_id === tenantId) tokenCache.delete(token);
    },
    async stop() {
      clearInterval(flushTimer);
      await flushUses();
    },
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
