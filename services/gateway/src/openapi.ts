import SerializerSelector, { type Serializer, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { SwaggerOptions } from '@fastify/swagger';
import {
  ErrorBody,
  jsonSchema,
  OPERATIONS,
  type OperationSpec,
  QuotaExceeded,
  QuotaWebhookPayload,
  RateLimited,
} from '@imagegen/api-schemas';
import { ALL_SCOPES } from '@imagegen/platform';
import type { RouteOptions } from 'fastify';

/**
 * The OpenAPI 3.1 document at /docs/json: @fastify/swagger collects the routes and their request schemas
 * (what fastify validates), then `transformObject` gives every operation its operationId, tag, security
 * requirement and one response per status it can answer, from the operation catalogue of
 * @imagegen/api-schemas; the OAuth endpoints, /mcp and the quota webhook are added as far as OpenAPI can
 * describe them. test/support/contract.ts holds every answer of the end-to-end suite to this document.
 */

type Json = Record<string, unknown>;

/** The JSON Schema of a zod schema, made once: the document and the serializers share the same objects. */
type Zod = NonNullable<OperationSpec['body']>;
const schemaCache = new WeakMap<Zod, Json>();
function schemaOf(zod: Zod): Json {
  let out = schemaCache.get(zod);
  if (!out) {
    out = jsonSchema(zod);
    schemaCache.set(zod, out);
  }
  return out;
}

const errorSchema = schemaOf(ErrorBody);
/** The body of an error answer: QUOTA_EXCEEDED (402), the rate-limit 429 with retryAfter, else {error, details}. */
const errorBodySchema = (status: number): Json =>
  status === 402 ? schemaOf(QuotaExceeded) : status === 429 ? schemaOf(RateLimited) : errorSchema;
const errorContent = (schema: Json = errorSchema, example?: Json) => ({
  'application/json': { schema, ...(example ? { example } : {}) },
});

const intHeader = (description: string) => ({ description, schema: { type: 'integer' } });
const RATE_HEADERS = {
  'X-RateLimit-Limit': intHeader('Requests allowed in the current window'),
  'X-RateLimit-Remaining': intHeader('Requests left in the current window'),
  'X-RateLimit-Reset': intHeader('When the window resets (unix seconds)'),
};
const RETRY_AFTER = { 'Retry-After': { ...intHeader('Seconds to wait before retrying'), required: true } };
const REQUEST_ID = { 'X-Request-Id': { description: 'The request id (echoes a valid X-Request-Id sent)', schema: { type: 'string' } } };

const ERROR_TEXT: Record<number, string> = {
  400: 'Invalid request ({error, details})',
  401: 'Missing or invalid credential',
  403: 'Tenant inactive, or the admin role is insufficient',
  404: 'Not found',
  409: 'Conflict (a duplicate name, or a request with the same Idempotency-Key still running)',
  410: 'Expired or already used',
  413: 'Request body too large',
  414: 'Request URI too long',
  415: 'Unsupported media type: send application/json',
  422: 'Idempotency-Key already used for a different request',
  423: 'Account locked after failed sign-ins',
  500: 'Internal server error ({error, requestId})',
  502: 'The image provider or the fetched URL failed',
  504: 'The image provider did not answer in time',
};

/** `Error404` (admin and public routes) or `TenantError404` (tenant routes, which also carry the rate-limit headers). */
const errorResponseName = (status: number, tenant: boolean) => `${tenant ? 'Tenant' : ''}Error${status}`;

const ERROR_EXAMPLES: Record<number, Json> = {
  400: { error: 'Invalid request payload', details: ['prompt is required'] },
  401: { error: 'Invalid or missing API key' },
  402: { error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' },
  403: { error: 'Tenant account is inactive' },
  404: { error: 'Image not found' },
  429: { error: 'Rate limit exceeded. Try again in 42 seconds.', retryAfter: 42 },
  500: { error: 'Internal server error', requestId: '6f1c2a4e-0d3b-4f7a-9a57-2c1de0b5e8a1' },
  503: { error: 'Service temporarily unavailable' },
};

/** The shared error responses (components.responses), referenced by every operation that can answer them. */
function errorResponses(): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const tenant of [false, true]) {
    const headers = { ...REQUEST_ID, ...(tenant ? RATE_HEADERS : {}) };
    for (const status of [400, 401, 402, 403, 404, 409, 410, 413, 414, 415, 422, 423, 429, 500, 502, 503, 504]) {
      const schema = errorBodySchema(status);
      const retry = status === 429 || status === 503;
      out[errorResponseName(status, tenant)] = {
        description:
          status === 402
            ? 'Monthly storage quota exceeded'
            : status === 429
              ? 'Rate limit exceeded; retry after Retry-After seconds'
              : status === 503
                ? 'A dependency is unavailable; retry after Retry-After seconds'
                : (ERROR_TEXT[status] ?? 'Error'),
        headers: { ...headers, ...(retry ? RETRY_AFTER : {}) },
        content: errorContent(schema, ERROR_EXAMPLES[status]),
      };
    }
  }
  return out;
}

const SECURITY: Record<OperationSpec['auth'], Json[]> = {
  none: [],
  tenant: [{ apiKey: [] }, { bearer: [] }],
  admin: [{ bearer: [] }, { adminToken: [] }],
  super_admin: [{ bearer: [] }, { adminToken: [] }],
};

/** Every status an operation can answer, with its response object. */
const ETAG_HEADER: Json = {
  description: 'Names this answer: send it back as If-None-Match to get 304 while nothing changed',
  schema: { type: 'string' },
};

export function responsesOf(method: string, url: string, spec: OperationSpec): Record<string, Json> {
  const out: Record<string, Json> = {};
  const tenant = spec.auth === 'tenant';
  const idempotent = spec.idempotent === true;
  const headers = { ...REQUEST_ID, ...(tenant ? RATE_HEADERS : {}) };
  const success: Json = {
    description: spec.ok.description,
    headers: {
      ...headers,
      ...(idempotent
        ? {
            'Idempotent-Replayed': {
              description: 'true when this is the stored answer of an earlier request with the same Idempotency-Key',
              schema: { type: 'string', enum: ['true'] },
            },
          }
        : {}),
    },
  };
  if (spec.conditional) {
    (success.headers as Record<string, Json>).ETag = ETAG_HEADER;
    out['304'] = {
      description: 'Not Modified: If-None-Match held the current ETag; no body',
      headers: { ...headers, ETag: ETAG_HEADER },
    };
  }
  if (spec.ok.schema) success.content = { 'application/json': { schema: schemaOf(spec.ok.schema) } };
  else if (spec.ok.media)
    success.content = {
      [spec.ok.media]: { schema: { type: 'string', format: spec.ok.media === 'application/zip' ? 'binary' : undefined } },
    };
  out[String(spec.ok.status)] = success;
  for (const status of errorStatuses(method, url, spec)) {
    out[String(status)] = { $ref: `#/components/responses/${errorResponseName(status, tenant)}` };
  }
  return out;
}

/** Every error status an operation can answer, ascending. */
function errorStatuses(method: string, url: string, spec: OperationSpec): number[] {
  const statuses = new Set<number>([400, 500, 503, 429, ...(spec.errors ?? [])]);
  if (spec.auth !== 'none') statuses.add(401).add(403);
  if (url.includes(':')) statuses.add(404).add(414);
  if (['POST', 'PATCH', 'PUT', 'DELETE'].includes(method)) statuses.add(413).add(415);
  if (spec.bills) statuses.add(402);
  if (spec.upstream) statuses.add(502).add(504);
  if (spec.idempotent) statuses.add(409).add(422);
  return [...statuses].sort();
}

/**
 * fastify's `schema.response` of a catalogued operation: the JSON body of its success and of each error status,
 * the very schemas its responses in the document show. fast-json-stringify serializes the answers with them
 * (faster than JSON.stringify) and writes only declared fields, so nothing undeclared leaks. An answer of
 * another media type (ZIP, SSE, 204) has no success schema; a status outside the list falls back to
 * JSON.stringify.
 */
export function responseSchemas(method: string, url: string): Record<number, Json> | undefined {
  const spec = OPERATIONS[`${method} ${url}`];
  if (!spec) return undefined;
  const out: Record<number, Json> = {};
  if (spec.ok.schema) out[spec.ok.status] = schemaOf(spec.ok.schema);
  for (const status of errorStatuses(method, url, spec)) out[status] = errorBodySchema(status);
  return out;
}

/** onRoute hook: gives a catalogued route its `schema.response` (a route that declares its own keeps it). */
export function declareResponses(route: RouteOptions): void {
  if (typeof route.method !== 'string' || route.schema?.response) return;
  const response = responseSchemas(route.method, route.url);
  if (response) route.schema = { ...route.schema, response };
}

/**
 * fastify's serializer builder (fast-json-stringify, as by default) with one serializer per schema object: the
 * catalogue's ~80 schemas are each compiled once per app instead of once per route and status (~700, which
 * added about 2 s to every gateway start).
 */
export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = SerializerSelector()(externalSchemas, options);
  const serializers = new WeakMap<object, Serializer>();
  return (route) => {
    const schema = route.schema as object;
    let serialize = serializers.get(schema);
    if (!serialize) {
      serialize = compile(route);
      serializers.set(schema, serialize);
    }
    return serialize;
  };
};

const HEADER_PARAMS: Record<string, Json> = {
  idempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes the request safe to retry: the first answer (success or error) is stored for 24 h and replayed with Idempotent-Replayed: true; the same key with another method, path or body answers 422, while the first is still running 409.',
    schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
  },
  ifNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description: 'ETags of answers already held: 304 without a body when one of them is still current',
    schema: { type: 'string' },
  },
  sessionId: {
    name: 'X-Session-Id',
    in: 'header',
    required: false,
    description: 'Application session id (1-200 characters) that groups operations; a new one is generated when absent',
    schema: { type: 'string', minLength: 1, maxLength: 200 },
  },
};

/** Request examples of the operations a client starts with. */
const REQUEST_EXAMPLES: Record<string, Json> = {
  generateImages: { prompt: 'a red fox in snow', aspect_ratio: 'landscape', n: 2, model_id: 'provA-flash-lite-image' },
  editImage: { image_id: 42, prompt: 'make the sky stormy' },
  uploadForEditing: { image_url: 'https://example.com/photo.png', file_name: 'photo.png' },
  createCharacter: { character_name: 'Captain Zoe', base_prompt: 'a tall pilot with a red scarf and goggles', tags: ['hero'] },
  createStylePreset: { name: 'Watercolour', prompt: 'soft watercolour painting,', aspect_ratio: '4:3' },
  createSearchPreset: { presetName: 'Big landscapes', filters: { aspectRatio: '16:9', minSize: 1000000, sortBy: 'largest' } },
  createProduct: { product_name: 'Red Mug', product_url: 'https://example.com/mug.png', tags: 'kitchen,red' },
  createScene: { scene_name: 'Dark Forest', scene_prompt: 'a misty forest at night', default_reference_mode: 'style' },
  createWebhook: { url: 'https://hooks.example.com/imagegen', events: ['quota.warning', 'quota.exceeded'] },
  createTenant: {
    tenant_id: 'acme',
    tenant_name: 'Acme',
    contact_email: 'ops@acme.example',
    provider_credentials: { provA: 'provA-key' },
    monthly_quota_mb: 10240,
  },
};

const toFastifyUrl = (path: string) => path.replace(/\{([^}]+)\}/g, ':$1');

/** What the gateway answers itself, before proxying, to a request it refuses (the spec's envelope). */
const REFUSED = 'refused by the gateway before it reaches the service (a malformed query or body: {error, details})';

/** Operations OpenAPI can describe only in outline: OAuth 2.1 (served by oidc-provider) and MCP (JSON-RPC). */
function outlinePaths(): Record<string, Json> {
  const json = (schema: Json, description: string) => ({ description, content: { 'application/json': { schema } } });
  const oauthError = {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'string',
        // SPEC 5's five codes, then those of RFC 6749, RFC 7591 (registration), RFC 8707 (resource indicators)
        // and OpenID Connect that oidc-provider answers with the features enabled here.
        enum: [
          'invalid_request',
          'invalid_client',
          'invalid_grant',
          'unsupported_grant_type',
          'invalid_scope',
          'unauthorized_client',
          'unsupported_response_type',
          'unsupported_response_mode',
          'access_denied',
          'server_error',
          'temporarily_unavailable',
          'login_required',
          'consent_required',
          'interaction_required',
          'invalid_target',
          'invalid_redirect_uri',
          'invalid_client_metadata',
          'invalid_request_object',
          'invalid_request_uri',
          'request_not_supported',
          'request_uri_not_supported',
          'registration_not_supported',
          'invalid_token',
        ],
      },
      error_description: { type: 'string' },
      login_url: { type: 'string' },
    },
  };
  const meta = { type: 'object', additionalProperties: true };
  // What the MCP transport answers to a request it cannot take as JSON-RPC (HTTP status and a JSON-RPC error).
  const jsonRpcError = {
    type: 'object',
    required: ['jsonrpc', 'error', 'id'],
    properties: {
      jsonrpc: { const: '2.0' },
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: { code: { type: 'integer', examples: [-32700, -32600, -32000] }, message: { type: 'string' }, data: {} },
      },
      id: { type: ['string', 'integer', 'null'] },
    },
  };
  const tags = ['OAuth'];
  return {
    '/.well-known/oauth-protected-resource': {
      get: {
        operationId: 'getProtectedResourceMetadata',
        tags,
        summary: 'RFC 9728 protected resource metadata (scopes, authorization server)',
        security: [],
        responses: { 200: json(meta, 'Metadata'), 400: json(errorSchema, `A request ${REFUSED}`) },
      },
    },
    '/oauth/.well-known/openid-configuration': {
      get: {
        operationId: 'getAuthorizationServerMetadata',
        tags,
        summary: 'Authorization server metadata: endpoints, grants, scopes',
        security: [],
        responses: { 200: json(meta, 'Metadata'), 400: json(errorSchema, `A request ${REFUSED}`) },
      },
    },
    '/oauth/authorize': {
      get: {
        operationId: 'authorize',
        tags,
        summary: 'Authorization code request with PKCE (S256)',
        security: [],
        parameters: [
          ['response_type', true, { type: 'string', enum: ['code'] }],
          ['client_id', true, { type: 'string' }],
          ['redirect_uri', true, { type: 'string', format: 'uri' }],
          ['code_challenge', true, { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' }],
          ['code_challenge_method', true, { type: 'string', enum: ['S256'] }],
          ['scope', false, { type: 'string', description: `space-separated: ${ALL_SCOPES.join(' ')}` }],
          ['state', false, { type: 'string' }],
          ['resource', false, { type: 'string', format: 'uri' }],
        ].map(([name, required, schema]) => ({ name, in: 'query', required, schema })),
        responses: {
          303: { description: 'Redirect to redirect_uri with code and state, or (browsers without a session) to the sign-in page' },
          400: json({ oneOf: [oauthError, errorSchema] }, `Invalid request (an OAuth error), or ${REFUSED}`),
          401: json(oauthError, 'No session (non-HTML clients): login_required with login_url'),
        },
      },
    },
    '/oauth/token': {
      post: {
        operationId: 'token',
        tags,
        summary: 'Exchange an authorization code (with code_verifier) or rotate a refresh token; 30 per minute per client IP',
        security: [],
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': {
              schema: {
                type: 'object',
                required: ['grant_type', 'client_id'],
                properties: {
                  grant_type: { type: 'string', enum: ['authorization_code', 'refresh_token'] },
                  code: { type: 'string' },
                  code_verifier: { type: 'string', minLength: 43, maxLength: 128 },
                  redirect_uri: { type: 'string', format: 'uri' },
                  refresh_token: { type: 'string' },
                  client_id: { type: 'string' },
                },
              },
            },
          },
        },
        responses: {
          200: json(
            {
              type: 'object',
              required: ['access_token', 'token_type', 'expires_in'],
              properties: {
                access_token: { type: 'string' },
                token_type: { type: 'string', enum: ['Bearer'] },
                expires_in: { type: 'integer' },
                refresh_token: { type: 'string' },
                scope: { type: 'string', description: 'space-separated' },
              },
            },
            'Tokens',
          ),
          400: json({ oneOf: [oauthError, errorSchema] }, `An OAuth error, or ${REFUSED}`),
          401: json(oauthError, 'invalid_client'),
          429: { $ref: '#/components/responses/Error429' },
        },
      },
    },
    '/oauth/register': {
      post: {
        operationId: 'registerClient',
        tags,
        summary: 'Dynamic client registration (RFC 7591)',
        security: [],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['redirect_uris'],
                properties: {
                  client_name: { type: 'string' },
                  redirect_uris: { type: 'array', minItems: 1, items: { type: 'string', format: 'uri' } },
                  scope: { type: 'string', description: 'space-separated' },
                  token_endpoint_auth_method: { type: 'string', enum: ['none', 'client_secret_basic', 'client_secret_post'] },
                },
              },
            },
          },
        },
        responses: {
          201: json(meta, 'The registered client (client_id, ...)'),
          400: json({ oneOf: [oauthError, errorSchema] }, `Invalid client metadata (an OAuth error), or ${REFUSED}`),
        },
      },
    },
    '/mcp': {
      post: {
        operationId: 'mcp',
        tags: ['MCP'],
        summary:
          'MCP streamable HTTP (stateless): one JSON-RPC 2.0 request per POST; tools/list describes every tool with its inputSchema and outputSchema',
        description:
          'Send Accept: application/json, text/event-stream (else 406). The same endpoint answers POST / and, as the legacy transport, /sse with /messages.',
        security: [{ apiKey: [] }, { bearer: [] }],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['jsonrpc', 'method'],
                properties: {
                  jsonrpc: { const: '2.0' },
                  id: { type: ['string', 'integer'] },
                  method: { type: 'string', examples: ['initialize', 'tools/list', 'tools/call'] },
                  params: { type: 'object' },
                },
              },
              example: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
            },
          },
        },
        responses: {
          200: {
            description: 'JSON-RPC response (application/json or one text/event-stream message)',
            content: { 'application/json': { schema: meta }, 'text/event-stream': { schema: { type: 'string' } } },
          },
          202: { description: 'Accepted (a notification or response from the client)' },
          401: { description: 'No valid credential (WWW-Authenticate names the protected resource metadata)', content: errorContent() },
          403: { description: 'OAuth token without the scope a tool needs (insufficient_scope)', content: errorContent() },
          400: json(
            { oneOf: [jsonRpcError, errorSchema] },
            `Not JSON-RPC: a body that is not JSON (-32700) or not a JSON-RPC request (-32600), or ${REFUSED}`,
          ),
          406: json(jsonRpcError, 'Accept must include application/json and text/event-stream'),
          413: json(jsonRpcError, 'Body larger than the MCP server accepts'),
          415: json(jsonRpcError, 'Content-Type must be application/json'),
          429: { $ref: '#/components/responses/Error429' },
        },
      },
    },
  };
}

function quotaWebhook(): Json {
  return {
    quotaThreshold: {
      post: {
        operationId: 'quotaThresholdWebhook',
        tags: ['Webhooks'],
        summary: 'quota.warning (80%) or quota.exceeded (100%): sent at most once per billing period per threshold',
        parameters: [
          {
            name: 'X-Webhook-Signature',
            in: 'header',
            required: true,
            description: 'sha256=<hex HMAC-SHA256 of the body with the webhook secret>',
            schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
          },
          {
            name: 'X-Webhook-Timestamp',
            in: 'header',
            required: true,
            description: 'Unix seconds; reject deliveries older than 5 minutes',
            schema: { type: 'string', pattern: '^[0-9]+$' },
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: jsonSchema(QuotaWebhookPayload),
              example: {
                event: 'quota.warning',
                threshold: 80,
                tenant_id: 'acme',
                billing_period: '2026-11',
                current_usage_mb: 8192.5,
                quota_mb: 10240,
                timestamp: '2026-11-25T12:00:00.000Z',
                webhook_id: 7,
              },
            },
          },
        },
        responses: {
          '2XX': {
            description: 'Received; any other answer (or none within the timeout) is retried; 5 consecutive failures disable the webhook',
          },
        },
      },
    },
  };
}

/** Options for @fastify/swagger. */
export function swaggerOptions(): SwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'imagegen API',
        version: '1.0.0',
        description:
          'Multi-tenant image generation and management. Tenant routes take X-API-Key (or Authorization: Bearer <key>); admin routes an admin session token (Authorization: Bearer) or the legacy X-Admin-Token. Every error is {error, details?}. The domain events other systems can subscribe to are described in /docs/asyncapi.yaml.',
      },
      tags: [
        { name: 'Images' },
        { name: 'Characters' },
        { name: 'Products' },
        { name: 'Scenes' },
        { name: 'Style presets' },
        { name: 'Search presets' },
        { name: 'Sessions' },
        { name: 'Executions' },
        { name: 'Usage' },
        { name: 'Webhooks' },
        { name: 'Admin' },
        { name: 'OAuth' },
        { name: 'MCP' },
        { name: 'Health' },
      ],
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'Tenant API key: sk_live_... or sk_test_...' },
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'A tenant API key, an admin session token, or (MCP) an OAuth access token',
          },
          adminToken: { type: 'apiKey', in: 'header', name: 'X-Admin-Token', description: 'Legacy admin token' },
        },
      },
    },
    transformObject: (documentObject) => {
      const doc = (documentObject as { openapiObject: Json }).openapiObject as Json & { paths: Record<string, Record<string, Json>> };
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const [m, op] of Object.entries(item)) {
          const method = m.toUpperCase();
          const url = toFastifyUrl(path);
          const spec = OPERATIONS[`${method} ${url}`];
          if (!spec) continue;
          op.operationId = spec.operationId;
          op.tags = [spec.tag];
          op.security = SECURITY[spec.auth];
          if (spec.auth === 'super_admin') op.description = [op.description, 'Needs the super_admin role.'].filter(Boolean).join(' ');
          op.responses = responsesOf(method, url, spec);
          if (spec.body) op.requestBody = { required: true, content: { 'application/json': { schema: schemaOf(spec.body) } } };
          const example = REQUEST_EXAMPLES[spec.operationId];
          const media = (op.requestBody as { content?: Record<string, Json> } | undefined)?.content?.['application/json'];
          if (example && media) media.example = example;
          const params = (op.parameters as Json[] | undefined) ?? [];
          if (spec.idempotent) params.push(HEADER_PARAMS.idempotencyKey as Json);
          if (spec.upstream && spec.auth === 'tenant') params.push(HEADER_PARAMS.sessionId as Json);
          if (spec.conditional) params.push(HEADER_PARAMS.ifNoneMatch as Json);
          if (params.length) op.parameters = params;
        }
      }
      // Marked x-proxied: described as far as OpenAPI can, served by the oauth and mcp services.
      for (const [path, item] of Object.entries(outlinePaths())) {
        for (const op of Object.values(item)) (op as Json)['x-proxied'] = path === '/mcp' ? 'mcp' : 'oauth';
        doc.paths[path] = item as Record<string, Json>;
      }
      (doc.components as Json).responses = errorResponses();
      doc.webhooks = quotaWebhook();
      return doc;
    },
  } as SwaggerOptions;
}
