import type { IncomingMessage } from 'node:http';
import formbody from '@fastify/formbody';
import type { Logger } from '@imagegen/platform';
import { ALL_SCOPES, httpLogger, refuseWhileClosing } from '@imagegen/platform';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type Provider from 'oidc-provider';
import { MOUNT, type Urls } from './provider.js';
import { handleSigninPage, handleSigninSubmit, type SigninDeps } from './signin.js';

export interface IntrospectionResult {
  active: boolean;
  tenant_id?: string;
  tenant_active?: boolean;
  rate_limit_per_minute?: number;
  scope?: string;
  client_id?: string;
  exp?: number;
}

export interface OAuthAppDeps {
  provider: Provider;
  urls: Urls;
  logger: Logger;
  signin: SigninDeps;
  getTenant: SigninDeps['getTenant'];
  /** One log line per request (LOG_REQUESTS). */
  logRequests?: boolean;
  /** Removes every stored model of a tenant (its grants, sessions, codes and tokens): the purge's oauth step. */
  purgeTenant?: (tenantId: string) => Promise<number>;
}

/**
 * Body of GET /.well-known/oauth-protected-resource[/<path>] (RFC 9728). `resource` is exactly the resource
 * identifier the well-known URI was derived from (§3.3: clients such as oauth4webapi compare it exactly):
 * the base URL at the bare location, `<base>/mcp` at /.well-known/oauth-protected-resource/mcp, and so on.
 * Tokens issued for any of them are for the same audience (the base URL, see isOurResource).
 */
export function protectedResourceMetadata(urls: Urls, path = '') {
  return {
    resource: `${urls.resource}${path}`,
    authorization_servers: [urls.issuer],
    scopes_supported: ALL_SCOPES,
    bearer_methods_supported: ['header'],
    resource_name: 'imagegen MCP server',
    resource_documentation: `${urls.base}/docs`,
  };
}

/** Endpoints a browser-based client calls directly (besides /.well-known/*). */
const CORS_PATHS = [`${MOUNT}/register`, `${MOUNT}/token`, `${MOUNT}/revoke`, `${MOUNT}/jwks`];
const isCorsPath = (path: string) => CORS_PATHS.includes(path) || path.startsWith('/.well-known/');
/** Any origin, no credentials (no Access-Control-Allow-Credentials: cookies are never needed there). */
const CORS_ACTUAL: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'www-authenticate, dpop-nonce, retry-after',
};
const CORS_PREFLIGHT: Record<string, string> = {
  ...CORS_ACTUAL,
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, accept, mcp-protocol-version, dpop',
  'access-control-max-age': '86400',
};

/**
 * The oauth service's HTTP server. The gateway forwards /oauth/*, /.well-known/* and GET / here
 * unchanged; /_internal/* is for the mcp service only (never forwarded by the gateway).
 */
export async function buildOAuthApp(deps: OAuthAppDeps): Promise<FastifyInstance> {
  const { provider, urls } = deps;
  const app = Fastify({
    loggerInstance: httpLogger(deps.logger, 'oauth-http'),
    logController: new LogController({ disableRequestLogging: !deps.logRequests }),
    trustProxy: false,
    // Fastify's own 503 while closing has no Retry-After: refuseWhileClosing answers instead.
    return503OnClosing: false,
  });
  refuseWhileClosing(app);
  const callback = provider.callback();
  const publicUrl = new URL(urls.base);

  /** Hands the raw request to oidc-provider as if it were mounted at /oauth on the public origin. */
  const dispatch = (req: FastifyRequest, reply: FastifyReply, path: string) => {
    reply.hijack();
    const raw = req.raw as IncomingMessage & { originalUrl?: string };
    raw.originalUrl = path;
    raw.url = path.slice(MOUNT.length) || '/';
    raw.headers['x-forwarded-host'] = publicUrl.host;
    raw.headers['x-forwarded-proto'] = publicUrl.protocol.replace(':', '');
    return callback(raw, reply.raw);
  };

  app.get('/health', async () => ({ status: 'ok', timestamp: new Date().toISOString() }));

  // CORS for browser-based clients (MCP Inspector's direct mode, web apps): the metadata documents, dynamic
  // registration and the token, revocation and JWKS endpoints answer any origin, without credentials (no
  // cookies are involved; PKCE binds the code to the client). Preflights are answered here; the actual
  // responses carry the headers whoever writes them (oidc-provider writes its responses itself).
  // (oidc-provider's own CORS, and its per-client origin check at the token endpoint, step aside when the
  // response already carries Access-Control-* headers.)
  for (const p of [...CORS_PATHS, '/.well-known/*'])
    app.options(p, (req, reply) => {
      const asked = req.headers['access-control-request-headers'];
      const headers = typeof asked === 'string' && /^[\w\-, ]{1,1000}$/.test(asked) ? { 'access-control-allow-headers': asked } : {};
      return reply
        .headers({ ...CORS_PREFLIGHT, ...headers })
        .status(204)
        .send();
    });
  app.addHook('onRequest', async (req, reply) => {
    if (req.method !== 'OPTIONS' && isCorsPath(req.url.split('?')[0])) {
      for (const [k, v] of Object.entries(CORS_ACTUAL)) reply.raw.setHeader(k, v);
    }
  });

  // RFC 9728 protected resource metadata (also at the path-suffixed locations clients derive from /mcp, /sse).
  for (const suffix of ['', '/mcp', '/sse']) {
    app.get(`/.well-known/oauth-protected-resource${suffix}`, async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*');
      return protectedResourceMetadata(urls, suffix);
    });
  }

  // Authorization server metadata: RFC 8414 and OIDC discovery locations, all the provider's discovery document.
  for (const p of [
    '/.well-known/oauth-authorization-server',
    `/.well-known/oauth-authorization-server${MOUNT}`,
    '/.well-known/openid-configuration',
    `/.well-known/openid-configuration${MOUNT}`,
    `${MOUNT}/.well-known/oauth-authorization-server`,
  ]) {
    app.get(p, (req, reply) => dispatch(req, reply, `${MOUNT}/.well-known/openid-configuration`));
  }

  app.get('/', (req, reply) => {
    reply.hijack();
    return handleSigninPage(deps.signin, req.raw, reply.raw, req.query as Record<string, unknown>).catch((err) => {
      deps.logger.error({ err }, 'sign-in page failed');
      if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'text/plain' });
      reply.raw.end('Internal server error');
    });
  });

  await app.register(async (scope) => {
    await scope.register(formbody, { bodyLimit: 16 * 1024 });
    scope.post(`${MOUNT}/signin`, (req, reply) => {
      reply.hijack();
      return handleSigninSubmit(deps.signin, req.raw, reply.raw, (req.body ?? {}) as Record<string, unknown>).catch((err) => {
        deps.logger.error({ err }, 'sign-in submit failed');
        if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'text/plain' });
        reply.raw.end('Internal server error');
      });
    });
  });

  // Everything else under /oauth is oidc-provider, which reads request bodies itself.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    // POST /oauth/token is limited to 30 per minute per client IP by the gateway (services/gateway/src/rate-limit.ts).
    const handler = (req: FastifyRequest, reply: FastifyReply) => dispatch(req, reply, req.url);
    scope.all(MOUNT, handler);
    scope.all(`${MOUNT}/*`, handler);
  });

  // A tenant's purge (issue 40, item 4), called by the gateway's purge (internal: never forwarded).
  app.post('/_internal/purge-tenant', async (req, reply) => {
    const tenantId = (req.body as { tenant_id?: unknown } | undefined)?.tenant_id;
    if (typeof tenantId !== 'string' || !tenantId || tenantId.length > 128 || !deps.purgeTenant) {
      return reply.code(400).send({ error: 'Invalid request payload', details: ['tenant_id is required'] });
    }
    return { rows_removed: { oidc_payloads: await deps.purgeTenant(tenantId) } };
  });

  // Token introspection for the mcp service (internal: the gateway never forwards /_internal).
  app.post('/_internal/introspect', async (req): Promise<IntrospectionResult> => {
    const token = (req.body as { token?: unknown } | undefined)?.token;
    if (typeof token !== 'string' || !token || token.length > 512) return { active: false };
    const at = await provider.AccessToken.find(token).catch(() => undefined);
    if (!at || at.isExpired || !at.accountId) return { active: false };
    const aud = [at.aud].flat();
    if (!aud.includes(urls.resource)) return { active: false };
    const tenant = await deps.getTenant(at.accountId);
    if (!tenant) return { active: false };
    return {
      active: true,
      tenant_id: tenant.tenantId,
      tenant_active: tenant.isActive,
      rate_limit_per_minute: tenant.rateLimitPerMinute,
      scope: at.scope ?? '',
      client_id: at.clientId,
      exp: at.exp,
    };
  });

  return app as unknown as FastifyInstance;
}
