import { typesOnly, wireSchema } from '../json-schema.js';
import type { OperationSpec } from '../operations.js';

type Json = Record<string, unknown>;

/** What fastify validates a catalogued route's request with (its `schema.params`, `.querystring`, `.body`). */
export interface RequestSchemas {
  params?: Json;
  querystring?: Json;
  body?: Json;
}

const made = new WeakMap<OperationSpec, RequestSchemas>();

/**
 * The JSON schemas a catalogued operation's route validates with, made once per operation (the same objects
 * for the route, its HEAD twin and the document): params and query as `wireSchema`, the body as its
 * `validate` says (operations.ts). The document shows these very schemas, except a body validated in part only,
 * for which it shows `body` with every rule.
 */
export function requestSchemas(spec: OperationSpec): RequestSchemas {
  let out = made.get(spec);
  if (out) return out;
  out = {};
  if (spec.params) out.params = wireSchema(spec.params);
  if (spec.query) out.querystring = wireSchema(spec.query);
  const body = validatedBody(spec);
  if (body) out.body = body;
  made.set(spec, out);
  return out;
}

function validatedBody({ body, validate, bodyRules }: OperationSpec): Json | undefined {
  if (!body || validate === 'none') return undefined;
  if (validate === 'types') return typesOnly(body);
  return withRules(wireSchema(validate ?? body), bodyRules);
}

/** `schema` with `rules` merged in (objects merged key by key, anything else set). */
function withRules(schema: Json, rules: Json | undefined): Json {
  if (!rules) return schema;
  const out = { ...schema };
  for (const [k, v] of Object.entries(rules)) {
    const had = out[k];
    out[k] = isObject(v) && isObject(had) ? withRules(had, v) : v;
  }
  return out;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
