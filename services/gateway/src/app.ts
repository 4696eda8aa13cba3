import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { AppError, httpLogger, type Logger, lazyChildLogger, type Principal, type ServiceContext } from '@imagegen/platform';
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
import { registerAuth } from './auth.js';
import { registerRateLimits } from './rate-limit.js';
import { routeModules } from './routes/index.js';
import { formatValidationErrors } from './validation.js';

/** How a route is protected; set per route as `config: { auth: ... }`. Default: 'tenant'. */
export type RouteAuth = 'none' | 'tenant' | 'admin' | 'super_admin';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
  interface FastifyRequest {
    /** Set by the auth hook for every authenticated route. */
    principal: Principal;
  }
}

/** Route modules create the gRPC clients they need with createClient(def, () => ctx.resolve(name)). */
export interface GatewayDeps {
  ctx: ServiceContext;
}

export type RouteModule = (app: FastifyInstance, deps: GatewayDeps) => Promise<void> | void;

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
  });
  app.setValidatorCompiler(validatorCompiler() as never);
  app.decorateRequest('principal', null as unknown as Principal);

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
    reply.header('x-content-type-options', 'nosniff');
    done(null, payload);
  });

  app.setErrorHandler((err: FastifyError | AppError, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
      return reply.status(err.status).send(err.body);
    }
    const fe = err as FastifyError;
    if (fe.validation) {
      return reply
        .status(400)
        .send({ error: 'Invalid request payload', details: formatValidationErrors(fe.validation, fe.validationContext) });
    }
    if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return reply.status(415).send({ error: 'Unsupported Media Type: send application/json' });
    }
    if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || fe instanceof SyntaxError) {
      return reply.status(400).send({ error: 'Invalid request payload', details: ['body is not valid JSON'] });
    }
    if (fe.statusCode === 413) return reply.status(413).send({ error: 'Request body too large' });
    if (fe.statusCode === 429) return reply.status(429).send({ error: fe.message });
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      return reply.status(fe.statusCode).send({ error: fe.message });
    }
    req.log.error({ err }, 'unhandled error');
    return reply.status(500).send({ error: 'Internal server error', requestId: req.id });
  });
  app.setNotFoundHandler((req, reply) => reply.status(404).send({ error: `Route ${req.method} ${req.url.split('?')[0]} not found` }));

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'imagegen API', version: '1.0.0', description: 'Multi-tenant image generation and management.' },
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          bearer: { type: 'http', scheme: 'bearer' },
          adminToken: { type: 'apiKey', in: 'header', name: 'X-Admin-Token' },
        },
      },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  app.get('/health', { config: { auth: 'none' }, schema: { hide: true } }, async () => ({
    status: 'ok',
    timestamp: new Date().toISOString(),
  }));

  const deps: GatewayDeps = { ctx };
  // Rate limits first: their client-address buckets (admin API, OAuth token) must count requests
  // that authentication refuses; their tenant buckets run later, in preParsing (see rate-limit.ts).
  await registerRateLimits(app, deps);
  await registerAuth(app, deps);
  for (const mod of routeModules) await app.register(async (scope) => mod(scope as unknown as FastifyInstance, deps));
  return app as unknown as FastifyInstance;
}
