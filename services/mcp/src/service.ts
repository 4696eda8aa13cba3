import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import {
  createClient,
  createIdempotencyStore,
  createSlotStore,
  onTenantChanged,
  rateLimitNamespace,
  type StartService,
} from '@imagegen/platform';
import { createAuthenticator } from './auth.js';
import { createClients } from './clients.js';
import { buildMcpApp } from './http.js';
import { createToolLimiter, toolLimiterSettings } from './rate-limit.js';
import { AsyncRuns } from './tools/framework.js';

/**
 * The MCP server (@modelcontextprotocol/sdk): /mcp (streamable HTTP, stateless), /sse + /messages
 * (legacy), 47 tools calling the other services over gRPC. HTTP only; the gateway forwards to `httpUrl`.
 */
export const start: StartService = async (ctx) => {
  const { config, logger } = ctx;
  const clients = createClients(ctx);
  const tenancy = createClient(TenancyServiceService, () => ctx.resolve('tenancy'));
  const authenticator = createAuthenticator({
    tenancy,
    oauthUrl: () => ctx.resolve('oauth'),
    resourceMetadataUrl: `${config.publicBaseUrl}/.well-known/oauth-protected-resource`,
    apiKeyCacheTtlMs: config.apiKeyCacheTtlMs,
    logger,
  });
  // A tenant deactivated or a key revoked: this process forgets its cached credentials of the tenant at once.
  const tenantChanged = await onTenantChanged(
    ctx.events,
    { eventsPrefix: config.eventsPrefix, durable: 'mcp-tenant-changed', logger },
    (id) => authenticator.dropTenant(id),
  );
  const limits = await createToolLimiter(toolLimiterSettings(config), {
    redisUrl: config.redisUrl,
    namespace: rateLimitNamespace(config),
    logger,
  });
  const slots = await createSlotStore({ redisUrl: config.redisUrl, eventsPrefix: config.eventsPrefix, logger, who: 'mcp' });
  const idempotency = createIdempotencyStore({ redisUrl: config.redisUrl, prefix: config.eventsPrefix, name: 'mcp', logger });
  const { app, closeSessions } = await buildMcpApp({
    tools: {
      clients,
      logger,
      publicBaseUrl: config.publicBaseUrl,
      runs: new AsyncRuns(),
      limiter: limits.limiter,
      generationSlots: { store: slots, max: config.tenantLimits.maxGenerationsInFlight },
      idempotency,
    },
    authenticator,
    logger,
    logRequests: config.logRequests,
  });
  const host = config.grpcHost;
  await app.listen({ host, port: config.httpPort });
  const port = (app.server.address() as { port: number }).port;
  return {
    httpUrl: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    async stop() {
      await closeSessions();
      await app.close();
      await tenantChanged.stop();
      await authenticator.stop();
      tenancy.close();
      clients.close();
      await idempotency.close();
      await limits.close();
      await slots.close();
    },
  };
};
