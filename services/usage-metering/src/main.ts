/**
 * Standalone entry of usage-metering (distributed shape: one service per process, configured from the
 * environment: DATABASE_URL, NATS_URL, EVENTS_PREFIX, GRPC_HOST/GRPC_PORT, TENANCY_ADDR).
 *   node --import tsx services/usage-metering/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('usage-metering', start);
