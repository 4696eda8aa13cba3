import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../distributed/harness.js';

/** Static checks of deployment files (deploy/, k8s/) against the code. */

/** A repository file's text. */
export const readRepoFile = (p: string): string => readFileSync(join(REPO_ROOT, p), 'utf8');

/** Services with a standalone entry point (services/<name>/src/main.ts), the stack excepted. */
export const STANDALONE_SERVICES = readdirSync(join(REPO_ROOT, 'services')).filter(
  (s) => s !== 'stack' && existsSync(join(REPO_ROOT, 'services', s, 'src', 'main.ts')),
);

/** Environment names the code reads: config.ts's schema, plus what runStandalone and telemetry read. */
export const CODE_ENV: readonly string[] = [
  ...[...readRepoFile('libs/platform/src/config.ts').matchAll(/^\s{2}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]),
  'OPS_PORT',
  'SHUTDOWN_DRAIN_MS',
  'OTEL_SERVICE_NAME',
  'OTEL_BSP_SCHEDULE_DELAY',
  'NODE_ENV',
];
