import { z } from 'zod';
import { jsonSchema } from '../json-schema.js';
import {
  GenerationWebhookPayload,
  ImageDeletedWebhookPayload,
  ImageStoredWebhookPayload,
  QuotaWebhookPayload,
  TestWebhookPayload,
} from '../resources.js';
import { QUOTA_EVENTS, SCOPES } from '../vocab.js';
import { errorContent, errorSchema } from './responses.js';

/**
 * What the document describes besides the catalogue: the OAuth 2.1 endpoints (served by the oauth service through
 * the gateway's proxy) and /mcp (JSON-RPC), as far as OpenAPI can describe them, and the webhooks the platform
 * sends to tenants' endpoints.
 */

type Json = Record<string, unknown>;

/** What the gateway answers itself, before proxying, to a request it refuses (the spec's envelope). */
const REFUSED = 'refused by the gateway before it reaches the service (a malformed query or body: {error, details})';

/** Operations OpenAPI can describe only in outline: OAuth 2.1 (served by oidc-provider) and MCP (JSON-RPC). */
export function outlinePaths(): Record<string, Json> {
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
          ['scope', false, { type: 'string', description: `space-separated: ${Object.keys(SCOPES).join(' ')}` }],
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

/** The headers of every webhook delivery: Standard Webhooks' three, and SPEC 6's two (one whsec_ secret signs both). */
const WEBHOOK_HEADERS: Json[] = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: "The event's id (the body's `id`): the same on every attempt, endpoint and replay of the event; deduplicate on it",
    schema: { type: 'string' },
  },
  {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'Unix seconds of this attempt; reject deliveries older than 5 minutes',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      'Standard Webhooks: v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>", keyed with the base64-decoded ' +
      'part of the secret after whsec_> (any Standard Webhooks library verifies it with the secret as shown)',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/]{43}=$' },
  },
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
];

const EXAMPLE_IDS = { tenant_id: 'acme', timestamp: '2026-11-25T12:00:00.000Z' };
const BASE = 'https://imagegen.example.com';

/** The webhook entries: per event type (the quota pair in one), what is sent, with which headers. */
const WEBHOOKS: { key: string; events: string[]; summary: string; schema: z.ZodTypeAny; example: Json }[] = [
  {
    key: 'quotaThreshold',
    events: [...QUOTA_EVENTS],
    summary: 'quota.warning (80%) or quota.exceeded (100%): sent at most once per billing period per threshold',
    schema: QuotaWebhookPayload.required({ id: true }),
    example: {
      id: '0f6a9c1e-5a2b-4d7e-9a51-3c2d1e0f9b8a',
      event: 'quota.warning',
      threshold: 80,
      ...EXAMPLE_IDS,
      billing_period: '2026-11',
      current_usage_mb: 8192.5,
      quota_mb: 10240,
    },
  },
  ...(['completed', 'failed', 'cancelled'] as const).map((status) => ({
    key: `generation${status[0]?.toUpperCase()}${status.slice(1)}`,
    events: [`generation.${status}`],
    summary: `generation.${status}: an execution (generate, edit, a character, product or scene generation) ${
      status === 'completed' ? 'completed, with its images' : status === 'failed' ? 'failed, with its error' : 'was cancelled'
    }`,
    schema: GenerationWebhookPayload.extend({
      event: z.literal(`generation.${status}` as const),
      status: z.literal(status),
      ...(status === 'failed' ? {} : { error: z.null() }),
    }),
    example: {
      id: '5b1e7c3a-2f4d-4e8b-a6c9-1d0e2f3a4b5c',
      event: `generation.${status}`,
      ...EXAMPLE_IDS,
      execution_id: 'exec_8c1d3f2a',
      session_id: 'sess_4e5f6a7b',
      tool_name: 'generate_image',
      status,
      duration_ms: 5230,
      image_ids: status === 'completed' ? [1042] : [],
      execution_url: `${BASE}/api/executions/exec_8c1d3f2a`,
      image_urls: status === 'completed' ? [`${BASE}/api/images/1042`] : [],
      error: status === 'failed' ? 'Upstream provider error' : null,
    },
  })),
  {
    key: 'imageStored',
    events: ['image.stored'],
    summary: 'image.stored: an image was stored and listed (generated, edited, uploaded, a reference)',
    schema: ImageStoredWebhookPayload,
    example: {
      id: '7d2c4e6f-8a1b-4c3d-9e0f-a1b2c3d4e5f6',
      event: 'image.stored',
      ...EXAMPLE_IDS,
      image_id: 1042,
      session_id: 'sess_4e5f6a7b',
      operation: 'generate',
      image_url: `${BASE}/api/images/1042`,
    },
  },
  {
    key: 'imageDeleted',
    events: ['image.deleted'],
    summary: 'image.deleted: an image was deleted',
    schema: ImageDeletedWebhookPayload,
    example: {
      id: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b',
      event: 'image.deleted',
      ...EXAMPLE_IDS,
      image_id: 1042,
      image_url: `${BASE}/api/images/1042`,
    },
  },
  {
    key: 'webhookTest',
    events: ['webhook.test'],
    summary: 'webhook.test: sent by POST /api/webhooks/:id/test (whatever the endpoint subscribes to)',
    schema: TestWebhookPayload.required({ id: true }),
    example: { id: '3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f', event: 'webhook.test', ...EXAMPLE_IDS, webhook_id: 7 },
  },
];

/**
 * The OpenAPI `webhooks` section: one entry per event type a tenant's endpoint can receive (`x-webhook-events` names
 * the types it carries), with the JSON Schema of its body (resources.ts) and the signature headers.
 */
export function webhookEntries(): Json {
  return Object.fromEntries(
    WEBHOOKS.map((w) => [
      w.key,
      {
        post: {
          operationId: `${w.key}Webhook`,
          tags: ['Webhooks'],
          summary: w.summary,
          'x-webhook-events': w.events,
          parameters: WEBHOOK_HEADERS,
          requestBody: {
            required: true,
            content: { 'application/json': { schema: jsonSchema(w.schema), example: w.example } },
          },
          responses: {
            '2XX': {
              description: 'Received; any other answer (or none within the timeout) is retried; 5 consecutive failures disable the webhook',
            },
          },
        },
      },
    ]),
  );
}
