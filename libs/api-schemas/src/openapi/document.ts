import { OPERATIONS, type OperationSpec } from '../operations.js';
import { outlinePaths, webhookEntries } from './outline.js';
import { requestSchemas } from './request-schemas.js';
import { errorResponses, responsesOf, schemaOf } from './responses.js';

/**
 * The gateway's OpenAPI 3.1 document, built from the operation catalogue alone (no gateway, no fastify): every
 * operation with its operationId, tag, summary, security, parameters and body (the schemas its route validates
 * with, `requestSchemas`; a body its route checks only in part is shown with every rule) and one response per
 * status it can answer; then the OAuth endpoints, /mcp and the webhooks (outline.ts). The gateway serves it
 * at /docs/json, `pnpm client` writes it to libs/client/openapi.json, and test/support/contract.ts holds every
 * answer of the end-to-end suite to it.
 */

type Json = Record<string, unknown>;

const SECURITY: Record<OperationSpec['auth'], Json[]> = {
  none: [],
  tenant: [{ apiKey: [] }, { bearer: [] }],
  admin: [{ bearer: [] }, { adminToken: [] }],
  super_admin: [{ bearer: [] }, { adminToken: [] }],
};

const HEADER_PARAMS: Record<string, Json> = {
  preferAsync: {
    name: 'Prefer',
    in: 'header',
    required: false,
    description:
      'respond-async (RFC 7240, extension): answer 202 at once with the queued job (its execution) instead of waiting for the images; ' +
      'GET /api/executions/{executionId} carries the result once completed.',
    schema: { type: 'string' },
  },
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
  signature: {
    name: 'X-Signature',
    in: 'header',
    required: false,
    description:
      "Required for an API key whose signatureRequired is on (extension of SPEC 5.8): hex HMAC-SHA256, keyed with the key's " +
      'signing secret, over the X-Timestamp value, the method, the path with its query, each followed by a newline, then the raw ' +
      'body (README, "Signed requests")',
    schema: { type: 'string', pattern: '^[0-9a-fA-F]{64}$' },
  },
  timestamp: {
    name: 'X-Timestamp',
    in: 'header',
    required: false,
    description: 'With X-Signature: milliseconds since the epoch, within 5 minutes of the server time',
    schema: { type: 'string', pattern: '^[0-9]{1,16}$' },
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

/** One parameter per property of a params or query schema (a path parameter is always required). */
function parametersOf(where: 'path' | 'query', schema: Json | undefined): Json[] {
  if (!schema) return [];
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = (schema.required ?? []) as string[];
  return Object.entries(properties).map(([name, { description, ...rest }]) => ({
    schema: rest,
    in: where,
    name,
    required: where === 'path' || required.includes(name),
    ...(description ? { description } : {}),
  }));
}

const jsonBody = (schema: Json): Json => ({ required: true, content: { 'application/json': { schema } } });

/**
 * The operation object of a catalogue entry. Its keys come in the order the document has had since
 * @fastify/swagger assembled it from the routes (a body the route validates before the responses, one it checks by
 * hand after the security), so the committed document and client did not change when it moved here.
 */
function operationObject(method: string, url: string, spec: OperationSpec): Json {
  const request = requestSchemas(spec);
  const shownBody = spec.body && (spec.validate || !request.body ? schemaOf(spec.body) : request.body);
  const op: Json = { summary: spec.summary };
  if (spec.description) op.description = spec.description;
  if (request.body && shownBody) op.requestBody = jsonBody(shownBody);
  const parameters = [...parametersOf('query', request.querystring), ...parametersOf('path', request.params)];
  if (parameters.length) op.parameters = parameters;
  op.responses = responsesOf(method, url, spec);
  op.operationId = spec.operationId;
  op.tags = [spec.tag];
  op.security = SECURITY[spec.auth];
  if (spec.auth === 'super_admin') op.description = [op.description, 'Needs the super_admin role.'].filter(Boolean).join(' ');
  if (!request.body && shownBody) op.requestBody = jsonBody(shownBody);
  const example = REQUEST_EXAMPLES[spec.operationId];
  if (example && op.requestBody)
    ((op.requestBody as { content: Record<string, Json> }).content['application/json'] as Json).example = example;
  if (spec.idempotent) parameters.push(HEADER_PARAMS.idempotencyKey);
  if (spec.upstream && spec.auth === 'tenant') parameters.push(HEADER_PARAMS.sessionId);
  if (spec.conditional) parameters.push(HEADER_PARAMS.ifNoneMatch);
  if (spec.async) parameters.push(HEADER_PARAMS.preferAsync);
  if (spec.auth === 'tenant') parameters.push(HEADER_PARAMS.signature, HEADER_PARAMS.timestamp);
  if (parameters.length) op.parameters = parameters;
  return op;
}

/** The document, as JSON (a fresh copy on every call). */
export function buildOpenapiDocument(): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const [key, spec] of Object.entries(OPERATIONS)) {
    const [method, url] = key.split(' ') as [string, string];
    const names = [...url.matchAll(/:(\w+)/g)].map((m) => m[1]);
    const declared = Object.keys((requestSchemas(spec).params?.properties ?? {}) as Json);
    if (names.join() !== declared.join()) throw new Error(`${key}: params must declare ${names.join(', ') || 'nothing'}`);
    const path = url.replace(/:(\w+)/g, '{$1}');
    paths[path] = { ...paths[path], [method.toLowerCase()]: operationObject(method, url, spec) };
  }
  // Marked x-proxied: described as far as OpenAPI can, served by the oauth and mcp services.
  for (const [path, item] of Object.entries(outlinePaths())) {
    for (const op of Object.values(item)) (op as Json)['x-proxied'] = path === '/mcp' ? 'mcp' : 'oauth';
    paths[path] = item as Record<string, Json>;
  }
  const doc = {
    openapi: '3.1.0',
    info: {
      title: 'imagegen API',
      version: '1.0.0',
      description:
        'Multi-tenant image generation and management. Tenant routes take X-API-Key (or Authorization: Bearer <key>); admin routes an admin session token (Authorization: Bearer) or the legacy X-Admin-Token. Every error is {error, details?}. The domain events other systems can subscribe to are described in /docs/asyncapi.yaml.',
    },
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
      schemas: {},
      responses: errorResponses(),
    },
    paths,
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
    webhooks: webhookEntries(),
  };
  // A copy: nothing shares an object with the schemas the gateway validates and serializes with.
  return JSON.parse(JSON.stringify(doc));
}
