/**
 * Standalone entry of the generation service (distributed shape). Configured from the environment:
 * DATABASE_URL, NATS_URL, GRPC_HOST/GRPC_PORT, TENANCY_ADDR, LIBRARY_ADDR, USAGE_ADDR, PROVA_BASE_URL,
 * PROVB_BASE_URL, PROVA_MODEL_MAP/PROVB_MODEL_MAP, PROVIDER_BREAKER_THRESHOLD, PROVIDER_BREAKER_RESET_MS,
 * PROVA_TIMEOUT_MS, PROVB_TIMEOUT_MS.
 *   node --import tsx services/generation/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('generation', start);
