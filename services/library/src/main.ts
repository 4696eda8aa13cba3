/**
 * Standalone entry of the library service (distributed shape: one service per process, configured
 * from the environment; see docs/design/ops.md). With tracing, start it with the preload:
 *   node --import tsx --import ./libs/platform/src/telemetry-preload.ts services/library/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('library', start);
