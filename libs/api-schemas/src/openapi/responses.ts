import { ErrorBody, QuotaExceeded, RateLimited } from '../common.js';
import { jsonSchema } from '../json-schema.js';
import { OPERATIONS, type OperationSpec } from '../operations.js';
import { JobAccepted } from '../resources.js';

/**
 * What a catalogued operation answers, for the OpenAPI document (its responses and the shared error responses)
 * and for the gateway, which serializes every answer with the same schemas (`responseSchemas`).
 */

type Json = Record<string, unknown>;

/** The JSON Schema of a zod schema, made once: the document and the gateway's serializers share the same objects. */
const schemaCache = new WeakMap<object, Json>();
export function schemaOf(zod: Parameters<typeof jsonSchema>[0]): Json {
  let out = schemaCache.get(zod);
  if (!out) {
    out = jsonSchema(zod);
    schemaCache.set(zod, out);
  }
  return out;
}

export const errorSchema = schemaOf(ErrorBody);
/** The body of an error answer: QUOTA_EXCEEDED (402), the rate-limit 429 with retryAfter, else {error, details}. */
const errorBodySchema = (status: number): Json =>
  status === 402 ? schemaOf(QuotaExceeded) : status === 429 ? schemaOf(RateLimited) : errorSchema;
export const errorContent = (schema: Json = errorSchema, example?: Json) => ({
  'application/json': { schema, ...(example ? { example } : {}) },
});

const intHeader = (description: string) => ({ description, schema: { type: 'integer' } });
const RATE_HEADERS = {
  'X-RateLimit-Limit': intHeader('Requests allowed in the current window'),
  'X-RateLimit-Remaining': intHeader('Requests left in the current window'),
  'X-RateLimit-Reset': intHeader('When the window resets (unix seconds)'),
};
const RETRY_AFTER = { 'Retry-After': { ...intHeader('Seconds to wait before retrying'), required: true } };
const REQUEST_ID = {
  'X-Request-Id': { description: 'The request id (echoes a valid X-Request-Id sent)', schema: { type: 'string' } },
  traceresponse: {
    description: "W3C Trace Context Level 2: this answer's trace id and the gateway's span (find the request's trace with it)",
    schema: { type: 'string', pattern: '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' },
  },
};

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
export function errorResponses(): Record<string, Json> {
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

const ETAG_HEADER: Json = {
  description: 'Names this answer: send it back as If-None-Match to get 304 while nothing changed',
  schema: { type: 'string' },
};

/** Every status an operation can answer, with its response object. */
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
  if (spec.async) out['202'] = jobAcceptedResponse(headers);
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
 * The gateway's `schema.response` of a catalogued operation: the JSON body of its success and of each error
 * status, the very schemas its responses in the document show. An answer of another media type (ZIP, SSE, 204)
 * has no success schema.
 */
export function responseSchemas(method: string, url: string): Record<number, Json> | undefined {
  const spec = OPERATIONS[`${method} ${url}`];
  if (!spec) return undefined;
  const out: Record<number, Json> = {};
  if (spec.ok.schema) out[spec.ok.status] = schemaOf(spec.ok.schema);
  if (spec.async) out[202] = schemaOf(JobAccepted);
  for (const status of errorStatuses(method, url, spec)) out[status] = errorBodySchema(status);
  return out;
}

/** The 202 of an operation asked to respond async (extension, issue 37). */
function jobAcceptedResponse(headers: Record<string, Json>): Json {
  return {
    description: 'Prefer: respond-async was sent: the job is queued (follow statusUrl, streamUrl; cancel with cancelUrl)',
    headers: {
      ...headers,
      Location: { description: 'The execution (statusUrl)', schema: { type: 'string' }, required: true },
      'Preference-Applied': { description: 'respond-async', schema: { type: 'string', enum: ['respond-async'] }, required: true },
    },
    content: { 'application/json': { schema: schemaOf(JobAccepted) } },
  };
}
