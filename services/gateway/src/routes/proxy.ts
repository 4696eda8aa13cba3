import { Readable } from 'node:stream';
import replyFrom from '@fastify/reply-from';
import { AppError, invalidPayload, type ServiceName, withoutPropagatedHeaders } from '@imagegen/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { rawBodyProblems } from '../hostile-input.js';
import type { RouteModule } from '../types.js';

/** Bodies read and checked before they are forwarded; the limit is the gateway's own body limit. */
const CHECKED_BODY = /^\s*application\/(json|x-www-form-urlencoded|[\w.+-]+\+json)\s*(;|$)/i;
const CHECKED_BODY_LIMIT = 32 * 1024 * 1024;

/**
 * Forwards the OAuth and MCP surfaces to the oauth and mcp HTTP servers (found with ctx.resolve):
 *   oauth: GET / (sign-in page), /oauth/*, /.well-known/*
 *   mcp:   /mcp and POST / (streamable HTTP), /sse and POST /messages (legacy SSE transport)
 * Responses are streamed unchanged (SSE-safe: no buffering, no idle timeout); request bodies are forwarded as
 * sent (JSON and form bodies after the edge checks, see below). These
 * routes use auth 'none' because both services authenticate their callers themselves.
 * Trace context: the client's traceparent, tracestate and baggage are not copied; the tracing instrumentation
 * writes them on the forwarded request (the proxy span's own traceparent, a child of the client's, with the
 * client's tracestate and baggage), so the upstream joins the client's trace (issue 41).
 */
const proxy: RouteModule = async (app, { ctx }) => {
  await app.register(replyFrom, {
    disableRequestLogging: true,
    // SSE streams may stay idle between events; a long generate_image call may take minutes.
    undici: { headersTimeout: 10 * 60_000, bodyTimeout: 0, connections: 256 },
  });
  // Keep request bodies as raw streams (the upstream parses them). JSON and form bodies (OAuth registration
  // and token requests, MCP messages: small, never streamed) are read first and refused at the edge when
  // they hold NUL characters, lone surrogates, malformed escapes or over-deep nesting, then passed on as sent.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (req, payload, done) => {
    const type = String(req.headers['content-type'] ?? '');
    if (!CHECKED_BODY.test(type)) return done(null, payload);
    const chunks: Buffer[] = [];
    let size = 0;
    let finished = false;
    const finish = (err: Error | null, body?: unknown) => {
      if (finished) return;
      finished = true;
      done(err, body);
    };
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > CHECKED_BODY_LIMIT) {
        payload.destroy();
        return finish(new AppError(413, { error: 'Request body too large' }));
      }
      chunks.push(chunk);
    });
    payload.on('error', (err) => finish(err));
    payload.on('end', () => {
      const body = Buffer.concat(chunks);
      const problems = rawBodyProblems(type, body);
      if (problems.length) return finish(invalidPayload(problems));
      finish(null, Readable.from([body]));
    });
  });

  const forward = (service: ServiceName) => (request: FastifyRequest, reply: FastifyReply) => {
    let upstream: string;
    try {
      upstream = ctx.resolve(service).replace(/\/+$/, '');
    } catch {
      return reply.status(503).header('retry-after', '2').send({ error: 'Service temporarily unavailable' });
    }
    return reply.from(`${upstream}${request.url}`, {
      retryDelay: () => null,
      rewriteRequestHeaders: (req, headers) => {
        const out: Record<string, string | string[] | undefined> = { ...withoutPropagatedHeaders(headers) };
        for (const h of Object.keys(out)) if (h.startsWith('x-forwarded-')) delete out[h];
        out['x-forwarded-for'] = req.ip;
        out['x-forwarded-proto'] = req.protocol;
        out['x-request-id'] = req.id;
        return out as typeof headers;
      },
      onError: (r, { error }) => {
        const status = (error as { statusCode?: number }).statusCode === 504 ? 504 : 503;
        request.log.warn({ err: error, service }, 'proxy: upstream failed');
        if (!r.sent) {
          if (status === 503) r.header('retry-after', '2');
          r.status(status).send({ error: status === 504 ? 'Upstream service timed out' : 'Service temporarily unavailable' });
        } else if (!r.raw.destroyed) {
          // The upstream broke mid-response (e.g. an SSE stream): end this response rather than leave it hanging.
          r.raw.destroy();
        }
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
