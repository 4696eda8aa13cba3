import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { createClients } from '@imagegen/operations';
import {
  AppError,
  buildInfo,
  DEPENDENCY_RETRY_AFTER_S,
  httpLogger,
  type Logger,
  lazyChildLogger,
  type Principal,
  refuseWhileClosing,
  type ServiceContext,
  traceResponse,
  transportFailure,
} from '@imagegen/platform';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { registerAudit } from './audit.js';
import { registerAuth } from './auth.js';
import { registerConsole } from './console.js';
import { FAVICON_ICO } from './favicon.js';
import { clientErrorHandler, frameworkErrors, registerInputGuards } from './hostile-input.js';
import { registerIdempotency } from './idempotency.js';
import { cachedSerializers, declareResponses, swaggerOptions } from './openapi.js';
import { applyOperationPolicy } from './operation-policy.js';
import { registerRateLimits } from './rate-limit.js';
import { routeModules } from './routes/index.js';
import { registerTenantConcurrency } from './tenant-concurrency.js';
import type { GatewayDeps } from './types.js';
import { formatValidationErrors } from './validation.js';

export type { GatewayDeps, RouteAuth, RouteModule } from './types.js';

/**
 * Body validators are strict (no type coercion, every problem reported); query and params are
 * coerced from strings as usual.
 */
function validatorCompiler() {
  const common = { allErrors: true, useDefaults: true, strict: false } as const;
  const bodyAjv = new Ajv({ ...common, coerceTypes: false, removeAdditional: false });
  const queryAjv = new Ajv({ ...common, coerceTypes: 'array', removeAdditional: false });
  for (const a of [bodyAjv, queryAjv]) addFormats(a);
  return ({ schema, httpPart }: { schema: object; httpPart?: string }) => (httpPart === 'body' ? bodyAjv : queryAjv).compile(schema);
}

/**
 * The /docs page (Swagger UI): its scripts and styles are files under /docs/static (no inline script), the
 * document is fetched from /docs/json; nothing may frame it.
 */
export const DOCS_CSP =
  "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; " +
  "frame-ancestors 'none'; img-src 'self' data:; object-src 'none'; script-src 'self'; script-src-attr 'none'; " +
  "style-src 'self' 'unsafe-inline'";
/** Any other HTML answer (e.g. one proxied from a service that set no policy of its own): never framed. */
const HTML_FALLBACK_CSP = "frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/** Fixed texts for the framework's own 4xx answers (their messages may echo the URL or a header). */
const FRAMEWORK_4XX: Record<string, { status: number; error: string }> = {
  FST_ERR_BAD_URL: { status: 400, error: 'Invalid request payload' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, error: 'Unsupported Media Type: send application/json' },
  FST_ERR_CTP_INVALID_TYPE: { status: 400, error: 'Invalid Content-Type header' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, error: 'Request body size did not match Content-Length' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, error: 'Request body too large' },
};

export async function buildApp(ctx: ServiceContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: httpLogger(ctx.logger, 'http'),
    logController: new LogController({ disableRequestLogging: !ctx.config.logRequests }),
    // Each request's child logger is made when the request first logs something (most never do).
    childLoggerFactory: (logger, bindings, opts) => lazyChildLogger(logger as Logger, bindings, opts) as FastifyBaseLogger,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{8,128}$/.test(given) ? given : randomUUID();
    },
    bodyLimit: 32 * 1024 * 1024,
    // Session ids are up to 200 characters (URL-encoded up to 3x that) and names are path identifiers.
    routerOptions: { maxParamLength: 2048 },
    trustProxy: false,
    ajv: { plugins: [] },
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } },
    // The router's and Node's own refusals (malformed %-escapes in the path, an over-long parameter, a
    // malformed request) in the {error, details} envelope, never echoing the URL.
    frameworkErrors,
    clientErrorHandler,
    // Fastify's own 503 while closing has neither the envelope nor Retry-After: the hook below answers instead.
    return503OnClosing: false,
  });
  app.setValidatorCompiler(validatorCompiler() as never);
  // Answers are serialized with the operation catalogue's schemas, declared here for every route at once.
  app.addHook('onRoute', declareResponses);
  // Auth, idempotency and rate-limit class of every catalogued route, from the catalogue.
  app.addHook('onRoute', applyOperationPolicy);
  app.decorateRequest('principal', null as unknown as Principal);
  // Draining (SIGTERM, a rolling deploy): requests that still arrive on open keep-alive connections get the
  // dependency 503 with Retry-After and Connection: close, before any other work; clients retry elsewhere.
  refuseWhileClosing(app, { viaErrorHandler: true });

  // Fastify's JSON parser (same prototype-poisoning protection), except that an empty body on a DELETE
  // is no body: many clients send Content-Type: application/json on every request, and a bodyless
  // DELETE must not fail with 'body is not valid JSON'. Empty bodies elsewhere stay 400.
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (req.method === 'DELETE' && (body as string).trim().length === 0) return done(null, undefined);
    return defaultJson(req, body as string, done);
  });

  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    // W3C Trace Context Level 2: this answer's trace and the gateway's server span in it, which records the request id.
    const traced = traceResponse(req.raw, req.id);
    if (traced) reply.header('traceresponse', traced);
    reply.header('x-content-type-options', 'nosniff');
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.startsWith('text/html')) {
      if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', HTML_FALLBACK_CSP);
      if (!reply.hasHeader('x-frame-options')) reply.header('x-frame-options', 'DENY');
    }
    done(null, payload);
  });

  app.setErrorHandler((err: FastifyError | AppError, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
      // Every 503 says when to retry (ARCHITECTURE rule 8), also one raised without the header.
      if (err.status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', String(DEPENDENCY_RETRY_AFTER_S));
      // A service call that got no handler's answer (every replica gone or unreachable, a deadline): say which and why.
      const lost = transportFailure(err);
      if (lost) req.log.warn({ grpc: lost }, 'service call failed without an answer');
      return reply.status(err.status).send(err.body);
    }
    const fe = err as FastifyError;
    if (fe.validation) {
      return reply
        .status(400)
        .send({ error: 'Invalid request payload', details: formatValidationErrors(fe.validation, fe.validationContext) });
    }
    if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || fe instanceof SyntaxError) {
      return reply.status(400).send({ error: 'Invalid request payload', details: ['body is not valid JSON'] });
    }
    const fixed = fe.code ? FRAMEWORK_4XX[fe.code] : undefined;
    if (fixed) return reply.status(fixed.status).send({ error: fixed.error });
    if (fe.statusCode === 413) return reply.status(413).send({ error: 'Request body too large' });
    if (fe.statusCode === 429) return reply.status(429).send({ error: fe.message });
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      return reply.status(fe.statusCode).send({ error: fe.message });
    }
    req.log.error({ err }, 'unhandled error');
    return reply.status(500).send({ error: 'Internal server error', requestId: req.id });
  });
  // The method and path are not echoed back (a hostile URL is not worth reflecting).
  app.setNotFoundHandler((_req, reply) =>
    reply.status(404).send({ error: 'Route not found', details: ['no operation matches this method and path; see /docs'] }),
  );

  // The OpenAPI 3.1 document (/docs/json), built from the operation catalogue alone (openapi.ts).
  await app.register(swagger, swaggerOptions());
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: DOCS_CSP });

  app.get('/favicon.ico', { config: { auth: 'none' }, schema: { hide: true } }, async (_req, reply) =>
    reply.type('image/x-icon').header('cache-control', 'public, max-age=86400').send(FAVICON_ICO),
  );

  // The spec's {status, timestamp}, plus what this gateway runs (looked up once, here at start).
  const { version, commit } = buildInfo();
  app.get('/health', async () => ({
    status: 'ok',
    timestamp: new Date().toISOString(),
    version,
    commit,
  }));

  const deps: GatewayDeps = { ctx, clients: createClients(ctx) };
  app.addHook('onClose', () => deps.clients.close());
  // Rate limits first: their client-address buckets (admin API, OAuth token) must count requests
  // that authentication refuses; their tenant buckets run later, in preParsing (see rate-limit.ts).
  await registerRateLimits(app, deps);
  // NUL, lone surrogates, bad %-escapes, over-deep JSON: refused before authentication and the services.
  registerInputGuards(app as unknown as FastifyInstance);
  await registerAuth(app, deps);
  // The audit log: every admin write and the tenants' webhook writes, recorded before the answer leaves (audit.ts).
  registerAudit(app as unknown as FastifyInstance, deps);
  // Idempotency-Key on the POSTs that create or bill (after authentication and validation).
  await registerIdempotency(app as unknown as FastifyInstance<any, any, any, any, any>, deps);
  // Per-tenant caps on open event streams and generations in flight (429 + Retry-After), after idempotency replays.
  await registerTenantConcurrency(app as unknown as FastifyInstance<any, any, any, any, any>, deps);
  for (const mod of routeModules) await app.register(async (scope) => mod(scope as unknown as FastifyInstance, deps));
  // The web console (/console) and its session cookie (console.ts).
  await registerConsole(app as unknown as FastifyInstance, deps);
  return app as unknown as FastifyInstance;
}
