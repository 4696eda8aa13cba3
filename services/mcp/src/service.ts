import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { createClients, createIdempotencyStore, createSlotStore, rateLimitNamespace } from '@imagegen/operations';
import { createClient, onTenantChanged, type StartService, startSteps } from '@imagegen/platform';
import { createAuthenticator } from './auth.js';
import { buildMcpApp } from './http.js';
import { createToolLimiter, toolLimiterSettings } from './rate-limit.js';

/**
 * The MCP server (@modelcontextprotocol/sdk): /mcp (streamable HTTP, stateless), /sse + /messages
 * (legacy), 50 tools calling the other services over gRPC. HTTP only; the gateway forwards to `httpUrl`.
 */
export const start: StartService = (ctx) =>
  startSteps({ logger: ctx.logger }, async (step) => {
    const { config, logger } = ctx;
    const clients = await step(
      'service clients',
      () => createClients(ctx),
      (c) => c.close(),
    );
    const tenancy = await step(
      'tenancy client',
      () => createClient(TenancyServiceService, () => ctx.resolve('tenancy')),
      (c) => c.close(),
    );
    const authenticator = await step(
      'authenticator',
      () =>
        createAuthenticator({
          tenancy,
          oauthUrl: () => ctx.resolve('oauth'),
          resourceMetadataUrl: `${config.publicBaseUrl}/.well-known/oauth-protected-resource`,
          apiKeyCacheTtlMs: config.apiKeyCacheTtlMs,
          logger,
        }),
      (a) => a.stop(),
    );
    // A tenant deactivated or a key revoked: this process forgets its cached credentials of the tenant at once.
    await step(
      'tenant-changed consumer',
      () =>
        onTenantChanged(ctx.events, { eventsPrefix: config.eventsPrefix, durable: 'mcp-tenant-changed', logger }, (id) =>
          authenticator.dropTenant(id),
        ),
      (c) => c.stop(),
    );
    const limits = await step(
      'tool rate limits',
      () => createToolLimiter(toolLimiterSettings(config), { redisUrl: config.redisUrl, namespace: rateLimitNamespace(config), logger }),
      (l) => l.close(),
    );
    const slots = await step(
      'generation slots',
      () => createSlotStore({ redisUrl: config.redisUrl, eventsPrefix: config.eventsPrefix, logger, who: 'mcp' }),
      (s) => s.close(),
    );
    const idempotency = await step(
      'idempotency store',
      () => createIdempotencyStore({ redisUrl: config.redisUrl, prefix: config.eventsPrefix, name: 'mcp', logger }),
      (i) => i.close(),
    );
    const host = config.grpcHost;
    const { app } = await step(
      'http server',
      async () => {
        const built = await buildMcpApp({
          tools: {
            clients,
            logger,
            publicBaseUrl: config.publicBaseUrl,
            limiter: limits.limiter,
            generationSlots: { store: slots, max: config.tenantLimits.maxGenerationsInFlight },
            idempotency,
          },
          authenticator,
          logger,
          logRequests: config.logRequests,
        });
        try {
          await built.app.listen({ host, port: config.httpPort });
        } catch (err) {
          await built.app.close();
          throw err;
        }
        return built;
      },
      async ({ app, closeSessions }) => {
        await closeSessions();
        await app.close();
      },
    );
    const port = (app.server.address() as { port: number }).port;
    return { httpUrl: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}` };
  });
