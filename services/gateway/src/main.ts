/**
 * Standalone entry of the gateway service (distributed shape: one service per process, configured
 * from the environment; see docs/design/ops.md). /metrics, /livez and /readyz are served on PORT by
 * the ops routes (src/routes/ops.ts), so no separate ops server. With tracing, start it with the preload:
 *   node --import tsx --import ./libs/platform/src/telemetry-preload.ts services/gateway/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('gateway', start, { opsServer: false });
