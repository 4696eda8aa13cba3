/**
 * Standalone entry of the oauth service (distributed shape: one service per process, configured
 * from the environment; see docs/README-ops.md). With tracing, start it with the preload:
 *   node --import tsx --import ./libs/platform/src/telemetry-preload.ts services/oauth/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('oauth', start);
