/**
 * Standalone entry of the tenancy service (distributed shape: one service per process, configured
 * from the environment: DATABASE_URL, CREDENTIALS_KEY, NATS_URL, GRPC_HOST/GRPC_PORT, ADMIN_EMAIL/ADMIN_PASSWORD).
 *   node --import tsx services/tenancy/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('tenancy', start);
