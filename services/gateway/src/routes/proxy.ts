import replyFrom from '@fastify/reply-from';
import type { ServiceName } from '@imagegen/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RouteModule } from '../app.js';

/**
 * Forwards the OAuth and MCP surfaces to the oauth and mcp HTTP servers (found with ctx.resolve):
 *   oauth: GET / (sign-in page), /oauth/*, /.well-known/*
 *   mcp:   /mcp and POST / (streamable HTTP), /sse and POST /messages (legacy SSE transport)
 * Bodies and responses are streamed unchanged (SSE-safe: no buffering, no idle timeout). These
 * routes use auth 'none' because both services authenticate their callers themselves.
 */
const proxy: RouteModule = async (app, { ctx }) => {
  await app.register(replyFrom, {
    disableRequestLogging: true,
    // SSE streams may stay idle between events; a long generate_image call may take minutes.
    undici: { headersTimeout: 10 * 60_000, bodyTimeout: 0, connections: 256 },
  });
  // Keep request bodies as raw streams (the upstream parses them).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

  const forward = (service: ServiceName) => (request: FastifyRequest, reply: FastifyReply) => {
    let upstream: string;
    try {
      upstream = ctx.resolve(service).replace(/\/+$/, '');
    } catch {
      return reply.status(503).send({ error: 'Service temporarily unavailable' });
    }
    return reply.from(`${upstream}${request.url}`, {
      retryDelay: () => null,
      rewriteRequestHeaders: (req, headers) => {
        const out: Record<string, string | string[] | undefined> = { ...headers };
        for (const h of Object.keys(out)) if (h.startsWith('x-forwarded-')) delete out[h];
        out['x-forwarded-for'] = req.ip;
        out['x-forwarded-proto'] = req.protocol;
        out['x-request-id'] = req.id;
        return out as typeof headers;
      },
      onError: (r, { error }) => {
        const status = (error as { statusCode?: number }).statusCode === 504 ? 504 : 503;
        request.log.warn({ err: error, service }, 'proxy: upstream failed');
        if (!r.sent) r.status(status).send({ error: status === 504 ? 'Upstream service timed out' : 'Service temporarily unavailable' });
      },
    });
  };

  const none = { config: { auth: 'none' as const }, schema: { hide: true } };
  const toOAuth = forward('oauth');
  const toMcp = forward('mcp');

  app.get('/', none, toOAuth);
  app.route({ method: ['POST', 'OPTIONS'], url: '/', ...none, handler: toMcp }); // the MCP URL itself (SPEC 4.10)
  app.all('/oauth', none, toOAuth);
  app.all('/oauth/*', none, toOAuth);
  app.all('/.well-known/*', none, toOAuth);

  app.all('/mcp', none, toMcp);
  app.all('/sse', none, toMcp);
  app.all('/messages', none, toMcp);
};

export default proxy;
