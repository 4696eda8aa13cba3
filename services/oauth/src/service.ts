import { fileURLToPath } from 'node:url';
import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { createClient, databaseSteps, dbReadiness, internalPrincipal, type StartService, startSteps } from '@imagegen/platform';
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
export const start: StartService = (ctx) =>
  startSteps({ logger: ctx.logger }, async (step) => {
    const { config, logger } = ctx;
    const sql = await databaseSteps(step, ctx.config, { service: 'oauth', schema: SCHEMA, migrations: MIGRATIONS });
    const secrets = await step('signing keys', () => loadSecrets(sql));
    const tenancy = await step(
      'tenancy client',
      () => createClient(TenancyServiceService, () => ctx.resolve('tenancy')),
      (c) => c.close(),
    );

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
      // The audit log (issue 40, item 5): the tenant whose grant it was acts; a registration is the client's own.
      audit: async (e) => {
        const principal = { requestId: e.requestId, tenantId: e.tenantId, source: 'oauth' };
        const changesJson = JSON.stringify(e.changes);
        await tenancy.recordAudit(
          { action: e.action, resourceId: e.clientId || undefined, changesJson, anonymousActor: `oauth-client:${e.clientId}` },
          principal,
          { timeoutMs: 5000 },
        );
      },
    });
    const host = config.grpcHost;
    const app = await step(
      'http server',
      async () => {
        const app = await buildOAuthApp({
          provider,
          urls,
          logger,
          getTenant,
          signin: { provider, urls, logger, csrfSecret: secrets.csrfSecret, authenticateKey, getTenant },
          logRequests: config.logRequests,
          // Every model naming the tenant as its account (grants, sessions, codes, tokens), or an interaction's session.
          purgeTenant: async (tenantId) =>
            (
              await sql`DELETE FROM oidc_payloads WHERE payload->>'accountId' = ${tenantId} OR payload->'session'->>'accountId' = ${tenantId}`
            ).count,
        });
        try {
          await app.listen({ host, port: config.httpPort });
        } catch (err) {
          await app.close();
          throw err;
        }
        return app;
      },
      (app) => app.close(),
    );
    const port = (app.server.address() as { port: number }).port;
    await step(
      'purge of expired artifacts',
      () => {
        const timer = setInterval(() => {
          purgeExpired(sql).catch((err) => logger.warn({ err }, 'oauth: purge of expired artifacts failed'));
        }, 15 * 60_000);
        timer.unref();
        return timer;
      },
      (timer) => clearInterval(timer),
    );

    return {
      httpUrl: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
      ready: dbReadiness(sql),
    };
  });
