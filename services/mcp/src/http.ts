import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '@imagegen/platform';
import { ALL_SCOPES, httpLogger, refuseWhileClosing } from '@imagegen/platform';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { type Authenticator, AuthFailure, type McpAuth } from './auth.js';
import { type Extra, missingScopes, registerTools, type ToolDeps } from './tools/framework.js';
import { ALL_TOOLS } from './tools/index.js';

export const SERVER_INFO = { name: 'imagegen', version: '1.0.0' };
const INSTRUCTIONS =
  'Image generation and management for one imagegen tenant. Pass the same session_id to group related operations; ' +
  'use generate_image with async=true and wait_for_execution for slow models.';

const CORS_HEADERS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, x-api-key, mcp-session-id, mcp-protocol-version, last-event-id',
  'access-control-expose-headers': 'mcp-session-id, mcp-protocol-version, www-authenticate',
  'access-control-max-age': '86400',
};

type RawWithAuth = IncomingMessage & { auth?: AuthInfo };

const TOOLS_BY_NAME = new Map(ALL_TOOLS.map((t) => [t.name, t]));
/** The SDK transport's own cap on a request body (DEFAULT_MAX_REQUEST_BODY_SIZE). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

const jsonRpcError = (status: number, code: number, message: string) => ({
  status,
  body: { jsonrpc: '2.0', error: { code, message }, id: null },
});

/** Reads a JSON request body as the SDK transport would (same cap, same errors), for a look before the transport. */
async function readJsonBody(raw: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; status: number; body: unknown }> {
  if (Number(raw.headers['content-length']) > MAX_BODY_BYTES) {
    return { ok: false, ...jsonRpcError(413, -32000, `Payload Too Large: Request body must not exceed ${MAX_BODY_BYTES} bytes`) };
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of raw) {
    total += (chunk as Buffer).length;
    if (total > MAX_BODY_BYTES) {
      return { ok: false, ...jsonRpcError(413, -32000, `Payload Too Large: Request body must not exceed ${MAX_BODY_BYTES} bytes`) };
    }
    chunks.push(chunk as Buffer);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, ...jsonRpcError(400, -32700, 'Parse error: Invalid JSON') };
  }
}

/**
 * The scopes an OAuth token lacks for the tools/call messages of a body (one message or a batch), or
 * undefined when it lacks none (or the body calls no tool it knows; the tool answers those itself).
 */
export function scopesLackedFor(body: unknown, granted: readonly string[]): { tool: string; missing: string[] } | undefined {
  for (const m of Array.isArray(body) ? body : [body]) {
    if (!m || typeof m !== 'object' || (m as { method?: unknown }).method !== 'tools/call') continue;
    const name = (m as { params?: { name?: unknown } }).params?.name;
    const tool = typeof name === 'string' ? TOOLS_BY_NAME.get(name) : undefined;
    const missing = tool ? missingScopes(tool, granted) : undefined;
    if (tool && missing) return { tool: tool.name, missing };
  }
  return undefined;
}

function authInfoOf(auth: McpAuth, token: string): AuthInfo {
  return { token, clientId: auth.clientId ?? auth.kind, scopes: auth.scopes ?? [...ALL_SCOPES], extra: { mcpAuth: auth } };
}

const authOfExtra = (extra: Extra): McpAuth => {
  const a = extra.authInfo?.extra?.mcpAuth as McpAuth | undefined;
  if (!a) throw new Error('request without authentication');
  return a;
};

/** One McpServer with the 50 tools; stateless /mcp builds one per request, /sse one per connection. */
export function createMcpServer(deps: ToolDeps): McpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: {}, logging: {} }, instructions: INSTRUCTIONS });
  registerTools(server, ALL_TOOLS, deps, authOfExtra);
  return server;
}

export interface McpAppDeps {
  tools: ToolDeps;
  authenticator: Authenticator;
  logger: Logger;
  /** One log line per request (LOG_REQUESTS). */
  logRequests?: boolean;
}

/**
 * The mcp service's HTTP server (behind the gateway):
 *   POST /mcp            streamable HTTP, stateless (no Mcp-Session-Id; each request is self-contained,
 *                        initialize is answered for clients that send it); responses stream as SSE so
 *                        progress notifications reach the client. POST / ({mcp_url}) is the same.
 *   POST /sse            the same stateless handling; with ?sessionId= of an open legacy stream, a message
 *                        of that stream (like POST /messages).
 *   GET/DELETE /mcp      405 (no server-initiated stream in stateless mode)
 *   GET /sse             legacy HTTP+SSE transport; the endpoint event names POST /messages?sessionId=...
 *   POST /messages       legacy transport messages (same credentials as the stream's tenant)
 */
export async function buildMcpApp(deps: McpAppDeps): Promise<{ app: FastifyInstance; closeSessions(): Promise<void> }> {
  const app = Fastify({
    loggerInstance: httpLogger(deps.logger, 'mcp-http'),
    logController: new LogController({ disableRequestLogging: !deps.logRequests }),
    trustProxy: false,
    // Fastify's own 503 while closing has no Retry-After: refuseWhileClosing answers instead.
    return503OnClosing: false,
  });
  refuseWhileClosing(app);
  // The SDK transports read the request bodies themselves.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null));

  const sseSessions = new Map<string, { transport: SSEServerTransport; server: McpServer; tenantId: string; ping: NodeJS.Timeout }>();

  const credentialOf = (req: FastifyRequest) => {
    const k = req.headers['x-api-key'];
    if (typeof k === 'string' && k.trim()) return k.trim();
    return /^bearer\s+(.+)$/i.exec(String(req.headers.authorization ?? ''))?.[1]?.trim() ?? '';
  };

  /** Authenticates or answers 401/403 (with WWW-Authenticate) itself; returns undefined when it answered. */
  const authenticate = async (req: FastifyRequest, reply: FastifyReply): Promise<McpAuth | undefined> => {
    try {
      return await deps.authenticator.authenticate(req.headers);
    } catch (err) {
      if (err instanceof AuthFailure) {
        reply
          .headers({ ...CORS_HEADERS, ...err.headers })
          .status(err.status)
          .send(err.body);
        return undefined;
      }
      const status = (err as { status?: number }).status;
      deps.logger.error({ err }, 'mcp: authentication failed');
      reply
        .headers(CORS_HEADERS)
        .status(status === 503 ? 503 : 500)
        .send({ error: status === 503 ? 'Service temporarily unavailable' : 'Internal server error' });
      return undefined;
    }
  };

  const methodNotAllowed = (reply: FastifyReply) =>
    reply
      .headers({ ...CORS_HEADERS, allow: 'POST, OPTIONS' })
      .status(405)
      .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this server is stateless, use POST /mcp' }, id: null });

  app.get('/health', async () => ({ status: 'ok', timestamp: new Date().toISOString() }));
  app.options('/mcp', (_req, reply) => reply.headers(CORS_HEADERS).status(204).send());
  app.options('/sse', (_req, reply) => reply.headers(CORS_HEADERS).status(204).send());
  app.options('/messages', (_req, reply) => reply.headers(CORS_HEADERS).status(204).send());

  /**
   * MCP authorization (step-up): a tools/call with an OAuth token that lacks the tool's scope is answered at
   * the HTTP level, 403 with `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`, so clients
   * (the MCP SDK's transport) ask the tenant for more and retry. The scope named is what the token holds plus
   * what the tool needs, so the new token keeps what the old one could do. Returns the body the transport
   * should take (already read), or undefined when it answered.
   */
  const checkScopes = async (
    req: FastifyRequest,
    reply: FastifyReply,
    auth: McpAuth,
    path: string,
  ): Promise<{ body?: unknown } | undefined> => {
    const granted = auth.scopes;
    const accept = String(req.headers.accept ?? '');
    const json = /^application\/json\s*(;|$)/i.test(String(req.headers['content-type'] ?? ''));
    // API keys hold every scope; requests the transport refuses anyway (Accept, Content-Type) are left to it.
    if (!granted || !json || !accept.includes('application/json') || !accept.includes('text/event-stream')) return {};
    const read = await readJsonBody(req.raw);
    if (!read.ok) {
      reply.headers(CORS_HEADERS).status(read.status).send(read.body);
      return undefined;
    }
    const lacked = scopesLackedFor(read.value, granted);
    if (!lacked) return { body: read.value };
    const scope = [...new Set([...granted, ...lacked.missing])].join(' ');
    const metadata = `${deps.tools.publicBaseUrl.replace(/\/+$/, '')}/.well-known/oauth-protected-resource${path}`;
    const description = `${lacked.tool} requires ${lacked.missing.join(' ')}`;
    reply
      .headers({
        ...CORS_HEADERS,
        'www-authenticate': `Bearer error="insufficient_scope", scope="${scope}", resource_metadata="${metadata}", error_description="${description}"`,
      })
      .status(403)
      .send({ error: 'insufficient_scope', error_description: `Insufficient scope: ${description}`, required_scopes: lacked.missing });
    return undefined;
  };

  /** A stateless streamable HTTP request (a JSON-RPC body such as tools/list or tools/call). */
  const streamable = async (req: FastifyRequest, reply: FastifyReply, auth: McpAuth, path: string) => {
    const checked = await checkScopes(req, reply, auth, path);
    if (!checked) return reply;
    const raw = req.raw as RawWithAuth;
    raw.auth = authInfoOf(auth, credentialOf(req));
    // Requests of a newer (stateless) protocol revision are served like any stateless request.
    const version = raw.headers['mcp-protocol-version'];
    if (
      typeof version === 'string' &&
      !SUPPORTED_PROTOCOL_VERSIONS.includes(version) &&
      /^\d{4}-\d{2}-\d{2}$/.test(version) &&
      version > LATEST_PROTOCOL_VERSION
    ) {
      raw.headers['mcp-protocol-version'] = LATEST_PROTOCOL_VERSION;
      // the SDK's Node adapter builds its Request from rawHeaders
      for (let i = 0; i < raw.rawHeaders.length; i += 2) {
        if (raw.rawHeaders[i].toLowerCase() === 'mcp-protocol-version') raw.rawHeaders[i + 1] = LATEST_PROTOCOL_VERSION;
      }
    }
    const server = createMcpServer(deps.tools);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    reply.hijack();
    const res = reply.raw as ServerResponse;
    for (const [k, v] of Object.entries(CORS_HEADERS)) res.setHeader(k, v);
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(raw, res, checked.body);
    } catch (err) {
      deps.logger.error({ err }, 'mcp: request failed');
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null }));
      }
    }
  };

  /** A message of the legacy HTTP+SSE transport, for the open stream `sessionId` of the same tenant. */
  const legacyMessage = async (req: FastifyRequest, reply: FastifyReply, auth: McpAuth, sessionId: string) => {
    const session = sseSessions.get(sessionId);
    if (!session || session.tenantId !== auth.tenantId) {
      return reply.headers(CORS_HEADERS).status(404).send({ error: 'Session not found' });
    }
    const raw = req.raw as RawWithAuth;
    raw.auth = authInfoOf(auth, credentialOf(req));
    reply.hijack();
    const res = reply.raw as ServerResponse;
    for (const [k, v] of Object.entries(CORS_HEADERS)) res.setHeader(k, v);
    try {
      await session.transport.handlePostMessage(raw, res);
    } catch (err) {
      deps.logger.warn({ err }, 'mcp: SSE message refused');
      if (!res.headersSent) res.writeHead(400).end();
    }
  };

  // SPEC 4.10: POST {mcp_url} (also /mcp, legacy /sse) with a JSON-RPC body answers with the tool results.
  for (const path of ['/mcp', '/']) {
    app.post(path, async (req, reply) => {
      const auth = await authenticate(req, reply);
      if (!auth) return reply;
      return streamable(req, reply, auth, path === '/' ? '' : path);
    });
  }
  app.options('/', (_req, reply) => reply.headers(CORS_HEADERS).status(204).send());
  // POST /sse: with ?sessionId= of an open legacy stream it is that stream's message endpoint (like
  // /messages); without one it is served as a stateless request, like POST /mcp.
  app.post('/sse', async (req, reply) => {
    const auth = await authenticate(req, reply);
    if (!auth) return reply;
    const sessionId = (req.query as { sessionId?: string }).sessionId;
    if (sessionId) return legacyMessage(req, reply, auth, sessionId);
    return streamable(req, reply, auth, '/sse');
  });

  app.get('/mcp', async (req, reply) => {
    if (!(await authenticate(req, reply))) return reply;
    return methodNotAllowed(reply);
  });
  app.delete('/mcp', async (req, reply) => {
    if (!(await authenticate(req, reply))) return reply;
    return methodNotAllowed(reply);
  });

  app.get('/sse', async (req, reply) => {
    const auth = await authenticate(req, reply);
    if (!auth) return reply;
    reply.hijack();
    const res = reply.raw as ServerResponse;
    for (const [k, v] of Object.entries(CORS_HEADERS)) res.setHeader(k, v);
    res.setHeader('x-accel-buffering', 'no');
    const transport = new SSEServerTransport('/messages', res);
    const server = createMcpServer(deps.tools);
    const ping = setInterval(() => {
      if (!res.writableEnded) res.write(': ping\n\n');
    }, 25_000);
    ping.unref();
    sseSessions.set(transport.sessionId, { transport, server, tenantId: auth.tenantId, ping });
    let closed = false;
    transport.onclose = () => {
      if (closed) return;
      closed = true;
      clearInterval(ping);
      sseSessions.delete(transport.sessionId);
      void server.close();
    };
    try {
      await server.connect(transport);
    } catch (err) {
      deps.logger.error({ err }, 'mcp: SSE connection failed');
      clearInterval(ping);
      sseSessions.delete(transport.sessionId);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });

  app.post('/messages', async (req, reply) => {
    const auth = await authenticate(req, reply);
    if (!auth) return reply;
    return legacyMessage(req, reply, auth, (req.query as { sessionId?: string }).sessionId ?? '');
  });

  return {
    app: app as unknown as FastifyInstance,
    async closeSessions() {
      for (const s of [...sseSessions.values()]) {
        clearInterval(s.ping);
        await s.transport.close().catch(() => {});
      }
      sseSessions.clear();
    },
  };
}
