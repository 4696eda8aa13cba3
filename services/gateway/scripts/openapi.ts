import { writeFileSync } from 'node:fs';
import { buildOpenapiDocument } from '@imagegen/api-schemas';
import { createInProcessTransport, createLogger, createResolver, type Logger, loadConfig, type ServiceContext } from '@imagegen/platform';
import { buildApp } from '../src/app.js';

/**
 * The gateway app without a running stack (tests build it to inject requests), and the OpenAPI document it
 * serves. The document is built from the operation catalogue alone (@imagegen/api-schemas buildOpenapiDocument):
 * run as a script this prints it, or writes it to the file given as the first argument, without building the app;
 * `pnpm client` writes it to libs/client without importing the gateway.
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

/** The document as the gateway serves it at /docs/json. */
export async function openapiDocument(): Promise<Record<string, unknown>> {
  const app = await offlineApp();
  try {
    return (await app.inject({ url: '/docs/json' })).json();
  } finally {
    await app.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = `${JSON.stringify(buildOpenapiDocument(), null, 2)}\n`;
  if (process.argv[2]) writeFileSync(process.argv[2], text);
  else process.stdout.write(text);
}
