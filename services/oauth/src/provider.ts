import { randomUUID } from 'node:crypto';
import type { Logger, Sql } from '@imagegen/platform';
import { ALL_SCOPES } from '@imagegen/platform';
import Provider, { errors } from 'oidc-provider';
import { createAdapterClass } from './adapter.js';
import { escapeHtml, HTML_HEADERS, page } from './html.js';
import type { OAuthSecrets } from './secrets.js';

/** Where the authorization server lives below PUBLIC_BASE_URL; the issuer is `${base}${MOUNT}`. */
export const MOUNT = '/oauth';

export const ACCESS_TOKEN_TTL = 3600;
export const REFRESH_TOKEN_TTL = 30 * 24 * 3600;
/** Every scope value an authorization request may carry. */
const KNOWN_SCOPES: ReadonlySet<string> = new Set(['openid', 'offline_access', ...ALL_SCOPES]);

export interface ProviderDeps {
  sql: Sql;
  logger: Logger;
  publicBaseUrl: string;
  secrets: OAuthSecrets;
  /** Whether a tenant exists and is active (refresh grants of inactive tenants fail with invalid_grant). */
  tenantActive(tenantId: string): Promise<boolean>;
  /**
   * Appends a record to the audit log (tenancy's RecordAudit; issue 40, item 5): client registrations and grant
   * revocations. Awaited before the answer leaves; a failure is logged at warn and the answer is still sent.
   */
  audit?(entry: OAuthAuditEntry): Promise<void>;
}

/** What the oauth service records: registerOAuthClient, revokeOAuthToken (revocation endpoint), revokeOAuthGrant (refresh token reuse). */
export interface OAuthAuditEntry {
  action: 'registerOAuthClient' | 'revokeOAuthToken' | 'revokeOAuthGrant';
  requestId: string;
  /** The tenant whose grant was revoked (registrations belong to no tenant). */
  tenantId?: string;
  clientId: string;
  changes: Record<string, unknown>;
}

/** The audit entries of one answered request (none for most). */
function auditEntries(ctx: any): OAuthAuditEntry[] {
  const requestId = String(ctx.get('x-request-id') || '') || randomUUID();
  const route = ctx.oidc?.route;
  if (route === 'registration' && ctx.status === 201 && typeof ctx.body?.client_id === 'string') {
    const b = ctx.body;
    // Only the public metadata: never client_secret.
    const changes = {
      client_name: b.client_name ?? null,
      redirect_uris: b.redirect_uris ?? [],
      grant_types: b.grant_types ?? [],
      scope: b.scope ?? null,
      token_endpoint_auth_method: b.token_endpoint_auth_method ?? null,
    };
    return [{ action: 'registerOAuthClient', requestId, clientId: b.client_id, changes }];
  }
  const revoked: string[] = ctx.state?.revokedGrants ?? [];
  if (!revoked.length) return [];
  const token = ctx.oidc?.entities?.RefreshToken ?? ctx.oidc?.entities?.AccessToken;
  const clientId = String(ctx.oidc?.client?.clientId ?? token?.clientId ?? '');
  const action = route === 'revocation' ? 'revokeOAuthToken' : 'revokeOAuthGrant';
  return revoked.map((grantId) => ({
    action,
    requestId,
    tenantId: token?.accountId,
    clientId,
    changes: {
      grant_revoked: true,
      token_type: token?.kind ?? null,
      reason: action === 'revokeOAuthGrant' ? 'refresh token reuse' : 'revocation request',
      grant: grantId.slice(0, 8),
    },
  }));
}

export interface Urls {
  base: string;
  issuer: string;
  /** The protected resource (RFC 8707 / RFC 9728) the access tokens are for: the MCP endpoints. */
  resource: string;
}

export function urlsFor(publicBaseUrl: string): Urls {
  const base = publicBaseUrl.replace(/\/+$/, '');
  return { base, issuer: `${base}${MOUNT}`, resource: base };
}

/** Resource indicators we accept for the MCP resource: the base URL, /mcp and /sse (with or without a trailing slash). */
export function isOurResource(urls: Urls, indicator: string): boolean {
  const v = indicator.replace(/\/+$/, '');
  return v === urls.base || v === `${urls.base}/mcp` || v === `${urls.base}/sse`;
}

const wantsHtml = (accept: string | undefined) => !!accept && accept.includes('text/html');

/** The sign-in page URL a browser is sent to for an authorization request (see docs/design/oauth-mcp.md). */
export function loginUrlFor(urls: Urls, params: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) for (const x of v) q.append(k, String(x));
    else q.append(k, String(v));
  }
  const returnTo = `${urls.issuer}/authorize?${q.toString()}`;
  return `${urls.base}/?return_to=${encodeURIComponent(returnTo)}`;
}

/** Schemes no redirect URI may use, whatever the client type (oidc-provider refuses these for native clients too). */
const DANGEROUS_SCHEMES = new Set(['javascript:', 'vbscript:', 'data:', 'blob:', 'file:', 'about:']);

/** RFC 7591 fields clients such as Cursor send; kept (as short strings) rather than dropped. */
const EXTRA_CLIENT_METADATA = ['software_id', 'software_version'];

/**
 * Registration policy, applied before oidc-provider checks the redirect URIs: a registration that names no
 * application_type but registers a custom-scheme redirect URI (a desktop or native app, e.g. Cursor's
 * `cursor://anysphere.cursor-mcp/oauth/callback`, often next to an https and a loopback http one) is a
 * native client (RFC 8252), not oidc-provider's default 'web' (which allows only http and https). Native
 * rules still apply: http only on loopback hosts, and never javascript:, data:, file: and the like.
 */
export function applyRegistrationPolicy(requested: Record<string, unknown> | undefined, metadata: Record<string, unknown>): void {
  if (!requested || requested.application_type !== undefined) return;
  const uris = Array.isArray(metadata.redirect_uris) ? (metadata.redirect_uris as unknown[]) : [];
  const custom = uris.some((u) => {
    const parsed = typeof u === 'string' ? URL.parse(u) : null;
    return !!parsed && parsed.protocol !== 'http:' && parsed.protocol !== 'https:' && !DANGEROUS_SCHEMES.has(parsed.protocol);
  });
  if (custom) metadata.application_type = 'native';
}

export function createProvider(deps: ProviderDeps): Provider {
  const urls = urlsFor(deps.publicBaseUrl);
  const Adapter = createAdapterClass(deps.sql);

  const resourceServerInfo = {
    scope: ALL_SCOPES.join(' '),
    audience: urls.resource,
    accessTokenFormat: 'opaque',
    accessTokenTTL: ACCESS_TOKEN_TTL,
  };

  const provider = new Provider(urls.issuer, {
    adapter: Adapter,
    jwks: deps.secrets.jwks,
    cookies: {
      keys: deps.secrets.cookieKeys,
      long: { httpOnly: true, sameSite: 'lax', signed: true },
      short: { httpOnly: true, sameSite: 'lax', signed: true },
    },
    scopes: [...KNOWN_SCOPES],
    // SPEC 5: the scope values are the twelve scopes (plus openid / offline_access). oidc-provider itself
    // silently drops unknown values; an authorization request naming one is refused with invalid_scope
    // (checked after client and redirect_uri, so the error goes back to the client with its state).
    extraParams: {
      scope: async (_ctx: unknown, value: unknown) => {
        const unknown = String(value ?? '')
          .split(' ')
          .filter((s) => s && !KNOWN_SCOPES.has(s));
        if (unknown.length) throw new errors.InvalidScope('requested scope is not supported', unknown.join(' '));
      },
    },
    claims: { openid: ['sub'] },
    responseTypes: ['code'],
    pkce: { required: () => true },
    // SPEC 4.10: redirect_uri is required at authorize (and so at the token endpoint), even for a client
    // with a single registered redirect URI (oidc-provider would otherwise fill it in).
    allowOmittingSingleRegisteredRedirectUri: false,
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    extraClientMetadata: {
      properties: EXTRA_CLIENT_METADATA,
      // Runs once per extra property, before the standard checks (redirect URIs among them); `metadata` is the
      // client being built and may be changed. The policy is applied once, at dynamic registration only.
      validator: (ctx: any, key: string, value: unknown, metadata: Record<string, unknown>) => {
        if (value !== undefined && (typeof value !== 'string' || value.length > 255)) {
          throw new errors.InvalidClientMetadata(`${key} must be a string of at most 255 characters`);
        }
        if (key === EXTRA_CLIENT_METADATA[0] && ctx?.oidc?.route === 'registration') {
          applyRegistrationPolicy(ctx.oidc.body as Record<string, unknown> | undefined, metadata);
        }
      },
    },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      id_token_signed_response_alg: 'RS256',
    },
    routes: {
      authorization: '/authorize',
      token: '/token',
      registration: '/register',
      revocation: '/revoke',
      jwks: '/jwks',
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true, initialAccessToken: false, issueRegistrationAccessToken: false },
      registrationManagement: { enabled: false },
      revocation: { enabled: true },
      introspection: { enabled: false },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      dPoP: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx: unknown, _client: unknown, oneOf?: string | string[]) => oneOf ?? urls.resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx: unknown, indicator: string) => {
          if (!isOurResource(urls, indicator)) throw new errors.InvalidTarget();
          return resourceServerInfo;
        },
      },
    },
    // Every client that may use refresh tokens gets one, rotated on every use; reuse of a rotated
    // token is refused by oidc-provider, which then revokes the whole grant (all its tokens).
    issueRefreshToken: async (_ctx: unknown, client: any) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: true,
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL,
      AuthorizationCode: 120,
      RefreshToken: REFRESH_TOKEN_TTL,
      Grant: REFRESH_TOKEN_TTL,
      Interaction: 3600,
      Session: 14 * 24 * 3600,
      IdToken: 3600,
    },
    // The HTTP layer (app.ts) answers CORS for the token endpoint itself (any origin, no credentials), which
    // makes oidc-provider skip this check; it stays for a provider mounted without that layer.
    clientBasedCORS: (_ctx: unknown, origin: string, client: any) =>
      origin !== 'null' && client.redirectUris.some((uri: string) => URL.canParse(uri) && new URL(uri).origin === origin),
    findAccount: async (_ctx: unknown, sub: string) => {
      if (!(await deps.tenantActive(sub))) return undefined;
      return { accountId: sub, claims: async () => ({ sub }) };
    },
    interactions: {
      url: async (_ctx: unknown, interaction: any) => loginUrlFor(urls, interaction.params),
    },
    renderError: async (ctx: any, out: Record<string, string>) => {
      const body = { ...out };
      // An unregistered redirect_uri cannot be redirected to; it is an invalid request (SPEC 5 error codes).
      if (body.error === 'invalid_redirect_uri') body.error = 'invalid_request';
      delete body.iss;
      if (wantsHtml(ctx.get('accept'))) {
        for (const [k, v] of Object.entries(HTML_HEADERS)) ctx.set(k, v);
        ctx.type = 'html';
        ctx.body = page(
          'Authorization error',
          `<h1>Authorization error</h1><p class="err">${escapeHtml(body.error ?? 'error')}</p>` +
            `<p>${escapeHtml(body.error_description ?? '')}</p><p>Go back to your application and try again.</p>`,
        );
      } else {
        ctx.type = 'json';
        ctx.body = body;
      }
    },
  } as any);

  provider.proxy = true;

  // Requests without a scope ask for the client's registered scope, else all twelve scopes.
  provider.use(async (ctx: any, next: () => Promise<void>) => {
    if (ctx.method === 'GET' && ctx.path === '/authorize' && !ctx.query.scope && typeof ctx.query.client_id === 'string') {
      const client = await provider.Client.find(ctx.query.client_id).catch(() => undefined);
      if (client) {
        ctx.query = { ...ctx.query, scope: client.scope ?? ALL_SCOPES.join(' ') };
        // keep the mount path detectable (oidc-provider compares originalUrl with the request url)
        ctx.req.originalUrl = `${MOUNT}${ctx.url}`;
      }
    }
    await next();
    if (ctx.oidc?.route === 'authorization' && ctx.status === 303) {
      // Sign-in needed: browsers follow the redirect to the sign-in page; other clients get 401 JSON.
      const location = String(ctx.response.get('location') ?? '');
      if (location.startsWith(`${urls.base}/?return_to=`) && !wantsHtml(ctx.get('accept'))) {
        ctx.remove('location');
        ctx.remove('set-cookie');
        ctx.status = 401;
        ctx.type = 'json';
        ctx.body = {
          error: 'login_required',
          error_description: 'The tenant must sign in and approve this request in a browser',
          login_required: true,
          login_url: location,
        };
      }
    }
    if (ctx.oidc?.route === 'registration' && ctx.status === 201 && ctx.body?.token_endpoint_auth_method === 'none') {
      // A public client never uses a secret (oidc-provider makes one when the request omits the method).
      const { client_secret: _s, client_secret_expires_at: _e, ...rest } = ctx.body;
      ctx.body = rest;
    }
    if (ctx.oidc?.route === 'registration' && ctx.status === 400 && ctx.body?.error === 'invalid_client_metadata') {
      if (/scope/.test(String(ctx.body.error_description ?? ''))) ctx.body = { ...ctx.body, error: 'invalid_scope' };
    }
    if (deps.audit) {
      for (const entry of auditEntries(ctx)) {
        await deps
          .audit(entry)
          .catch((err) =>
            deps.logger.warn({ err, audit: entry }, 'AUDIT RECORD NOT WRITTEN: the OAuth change was made, its audit record is missing'),
          );
      }
    }
  });

  provider.on('server_error', (_ctx: unknown, err: Error) => deps.logger.error({ err }, 'oauth server error'));
  provider.on('grant.revoked', (ctx: any, grantId: string) => {
    deps.logger.info({ grantId }, 'oauth grant revoked');
    // Recorded in the audit log by the middleware above, once the request's answer is known.
    if (ctx?.state) ctx.state.revokedGrants = [...(ctx.state.revokedGrants ?? []), grantId];
  });
  return provider;
}
