/**
 * Standalone entry of the sandbox provider (a fake upstream for provA and provB; see service.ts).
 * Listens on HTTP_PORT (default: a free port, printed in the log); /metrics, /livez and /readyz on
 * OPS_PORT like every other service (k8s probes use them).
 *   node --import tsx services/sandbox-provider/src/main.ts
 */
import { runStandalone } from '@imagegen/platform';
import { start } from './service.js';

await runStandalone('sandbox-provider', start);
