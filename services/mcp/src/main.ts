/**
 * Standalone entry of the mcp service (distributed shape). Configured from the environment:
 * PUBLIC_BASE_URL, GRPC_HOST (listen interface), HTTP_PORT (its HTTP server; the gateway's MCP_URL
 * points here), TENANCY_ADDR, LIBRARY_ADDR, GENERATION_ADDR, USAGE_ADDR, WEBHOOKS_ADDR, OAUTH_URL
 * (token introspection), API_KEY_CACHE_TTL_MS, OPS_PORT (/metrics, /livez, /readyz on a separate port).
 * The legacy /sse transport keeps its sessions in memory: with several replicas, route /sse and
 * /messages of one client to the same replica (sticky sessions); /mcp is stateless.
 *   node --import tsx services/mcp/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('mcp', start);
