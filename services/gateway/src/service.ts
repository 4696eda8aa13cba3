import type { StartService } from '@imagegen/platform';
import { buildApp } from './app.js';

/** The public door: REST /api/*, /admin/*, /health, /docs, /files/*, and the proxied OAuth and MCP paths. */
export const start: StartService = async (ctx) => {
  const app = await buildApp(ctx);
  const address = await app.listen({ port: ctx.config.port, host: ctx.config.host });
  const port = Number(new URL(address).port);
  return {
    httpUrl: `http://127.0.0.1:${port}`,
    stop: async () => {
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
  };
};
