/**
 * Standalone entry of webhook-dispatcher (distributed shape: one service per process, configured from
 * the environment: DATABASE_URL, NATS_URL, EVENTS_PREFIX, GRPC_HOST/GRPC_PORT, CREDENTIALS_KEY,
 * WEBHOOK_RETRY_BASE_MS, WEBHOOK_CA_FILE (tests only, with ALLOW_LOOPBACK_FETCH=1)).
 *   node --import tsx services/webhook-dispatcher/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('webhook-dispatcher', start);
