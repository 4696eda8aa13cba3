import { fileURLToPath } from 'node:url';
import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { createClient, createDb, dbReadiness, internalPrincipal, migrate, type StartService } from '@imagegen/platform';
import { purgeExpired } from './adapter.js';
import { buildOAuthApp } from './app.js';
import { createProvider, urlsFor } from './provider.js';
import { loadSecrets } from './secrets.js';
import type { TenantAuth } from './signin.js';

export const SCHEMA = 'oauth';
const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/**
 * OAuth 2.1 authorization server (oidc-provider on schema `oauth`) and the sign-in page. HTTP only:
 * the gateway forwards /oauth/*, /.well-known/* and GET / to `httpUrl`; the mcp service validates
 * access tokens with POST `${httpUrl}/_internal/introspect`.
 */
export const start: StartService = async (ctx) => {
  const { config, logger } = ctx;
  if (!config.databaseUrl) throw new Error('DATABASE_URL is required by the oauth service');
  const sql = createDb(config.databaseUrl, { schema: SCHEMA, max: config.dbPoolMax });
  const cleanups: (() => Promise<unknown>)[] = [async () => sql.end({ timeout: 5 })];
  const stopAll = async () => {
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        logger.warn({ err }, 'oauth: error while stopping');
      }
    }
    cleanups.length = 0;
  };
  try {
    await migrate(sql, SCHEMA, MIGRATIONS);
    const secrets = await loadSecrets(sql);
    const tenancy = createClient(TenancyServiceService, () => ctx.resolve('tenancy'));
    cleanups.push(async () => tenancy.close());

    // Tenant lookups are cached briefly (introspection runs on every MCP request).
    const tenantCache = new Map<string, { at: number; value: Awaited<ReturnType<TenantAuth['getTenant']>> }>();
    const getTenant: TenantAuth['getTenant'] = async (tenantId) => {
      const hit = tenantCache.get(tenantId);
      if (hit && Date.now() - hit.at < 5000) return hit.value;
      let value: Awaited<ReturnType<TenantAuth['getTenant']>>;
      try {
        const t = await tenancy.getTenant({ tenantId }, internalPrincipal(tenantId));
        value = { tenantId: t.tenantId, tenantName: t.tenantName, isActive: t.isActive, rateLimitPerMinute: t.rateLimitPerMinute };
      } catch (err) {
        if ((err as { status?: number }).status !== 404) throw err;
        value = undefined;
      }
      if (tenantCache.size > 10_000) tenantCache.clear();
      tenantCache.set(tenantId, { at: Date.now(), value });
      return value;
    };
    const authenticateKey: TenantAuth['authenticateKey'] = async (keyHash) => {
      const r = await tenancy.authenticateApiKey({ keyHash }, internalPrincipal());
      return { tenantId: r.tenantId, tenantActive: r.tenantActive };
    };

    const urls = urlsFor(config.publicBaseUrl);
    const provider = createProvider({
      sql,
      logger,
      publicBaseUrl: config.publicBaseUrl,
      secrets,
      tenantActive: async (tenantId) => !!(await getTenant(tenantId))?.isActive,
    });
    const app = await buildOAuthApp({
      provider,
      urls,
      logger,
      getTenant,
      signin: { provider, urls, logger, csrfSecret: secrets.csrfSecret, authenticateKey, getTenant },
      logRequests: config.logRequests,
    });
    const host = config.grpcHost;
    await app.listen({ host, port: config.httpPort });
    cleanups.push(() => app.close());
    const port = (app.server.address() as { port: number }).port;

    const purge = setInterval(() => {
      purgeExpired(sql).catch((err) => logger.warn({ err }, 'oauth: purge of expired artifacts failed'));
    }, 15 * 60_000);
    purge.unref();
    cleanups.push(async () => clearInterval(purge));

    return {
      httpUrl: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
      stop: stopAll,
      ready: dbReadiness(sql),
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
};
