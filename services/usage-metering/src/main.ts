/**
 * Standalone entry of the usage-metering service (distributed shape: one service per process, configured
 * from the environment; see docs/README-ops.md). With tracing, start it with the preload:
 *   node --import tsx --import ./libs/platform/src/telemetry-preload.ts services/usage-metering/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('usage-metering', start);
