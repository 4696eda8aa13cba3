import type { z } from 'zod';
import { zodToJsonSchema } from 'zod-to-json-schema';

/**
 * The JSON Schema (2020-12 compatible, no $refs) of a zod schema: what fastify validates with, what the
 * OpenAPI 3.1 document shows and what the MCP SDK publishes.
 */
export function jsonSchema(schema: z.ZodTypeAny): Record<string, unknown> {
  const out = zodToJsonSchema(schema, { $refStrategy: 'none', target: 'jsonSchema7' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

type Json = Record<string, unknown>;

/**
 * The JSON types of a body schema and nothing else: every field optional, null only where the schema allows it
 * (there it counts as absent; elsewhere it is refused, as the document says), no bounds, enums or formats, except
 * that ids keep their wire bounds (+-2^53-1: a larger number cannot be encoded). Routes whose rules are checked by
 * a service (which lists every problem at once, with the SPEC's texts) validate with this; the document shows the
 * full schema.
 */
export function typesOnly(schema: z.ZodTypeAny): Json {
  const full = jsonSchema(schema);
  const props = (full.properties ?? {}) as Record<string, Json>;
  const loose = (p: Json): Json => {
    const type = p.type === undefined && Array.isArray(p.enum) ? 'string' : p.type;
    const types = Array.isArray(type) ? type : [type];
    const nonNull = types.filter((t) => t !== 'null');
    // `nullable` (not a type list) keeps ajv's type errors as the SPEC words them: 'x must be a string'.
    const out: Json = { type: nonNull.length === 1 ? nonNull[0] : nonNull };
    if (types.includes('null') || (Array.isArray(p.anyOf) && (p.anyOf as Json[]).some((m) => m.type === 'null'))) out.nullable = true;
    if (p.description) out.description = p.description;
    if (types.includes('integer') && p.maximum === Number.MAX_SAFE_INTEGER)
      Object.assign(out, { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER });
    if (types.includes('array') && p.items) {
      const item = loose(p.items as Json);
      delete item.nullable;
      delete item.description;
      out.items = item;
    }
    return out;
  };
  return {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(Object.entries(props).map(([k, p]) => [k, loose(p)])),
  };
}
