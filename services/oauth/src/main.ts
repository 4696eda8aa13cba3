/**
 * Standalone entry of the oauth service (distributed shape). Configured from the environment:
 * DATABASE_URL, PUBLIC_BASE_URL (issuer = PUBLIC_BASE_URL + /oauth), GRPC_HOST (listen interface),
 * HTTP_PORT (its HTTP server; the gateway's OAUTH_URL points here), TENANCY_ADDR, OPS_PORT (/metrics,
 * /livez, /readyz on a separate port).
 *   node --import tsx services/oauth/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('oauth', start);
