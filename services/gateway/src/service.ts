import { type StartService, startSteps } from '@imagegen/platform';
import { buildApp } from './app.js';

/** The public door: REST /api/*, /admin/*, /health, /docs, /files/*, and the proxied OAuth and MCP paths. */
export const start: StartService = (ctx) =>
  startSteps({ logger: ctx.logger }, async (step) => {
    const app = await step(
      'http app',
      () => buildApp(ctx),
      async (app) => {
        // close() waits for every open connection; a keep-alive connection whose request was in flight at
        // close time turns idle only afterwards and would hold the stop until its keep-alive timeout. Its
        // answer is sent first, then the idle connection is closed.
        const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
        try {
          await app.close();
        } finally {
          clearInterval(sweep);
        }
      },
    );
    const address = await step('listen', () => app.listen({ port: ctx.config.port, host: ctx.config.host }));
    return { httpUrl: `http://127.0.0.1:${Number(new URL(address).port)}` };
  });
