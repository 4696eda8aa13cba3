import { writeFileSync } from 'node:fs';
import { createInProcessTransport, createLogger, createResolver, type Logger, loadConfig, type ServiceContext } from '@imagegen/platform';
import { buildApp } from '../src/app.js';

/**
 * The gateway's OpenAPI document without a running stack: builds the app (no service is called) and prints
 * /docs/json, or writes it to the file given as the first argument. `pnpm client` uses it.
 */
/**
 * A service context for building the gateway app without a stack: no events, storage or reachable services.
 * `env` adds to its configuration (e.g. a service address nothing listens on); `logger` replaces the silent one.
 */
export function offlineContext(name = 'openapi', opts: { env?: NodeJS.ProcessEnv; logger?: Logger } = {}): ServiceContext {
  const config = loadConfig({ RATE_LIMIT_DISABLED: '1', LOG_LEVEL: 'silent', ...opts.env });
  const logger = opts.logger ?? createLogger(name, 'silent');
  return {
    config,
    logger,
    events: createInProcessTransport({ logger }),
    storage: {} as ServiceContext['storage'],
    resolve: createResolver(config, {}),
  } as ServiceContext;
}

export async function offlineApp() {
  const app = await buildApp(offlineContext());
  await app.ready();
  return app;
}

export async function openapiDocument(): Promise<Record<string, unknown>> {
  const app = await offlineApp();
  const doc = app.swagger() as Record<string, unknown>;
  await app.close();
  return JSON.parse(JSON.stringify(doc));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const doc = await openapiDocument();
  const text = `${JSON.stringify(doc, null, 2)}\n`;
  if (process.argv[2]) writeFileSync(process.argv[2], text);
  else process.stdout.write(text);
}
