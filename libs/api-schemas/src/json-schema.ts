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
 * The JSON schema a route validates a body, query or path with, from its one zod definition. A nullable field is
 * written as a type list (`{type: ['string', 'null'], maxLength: 500}`) rather than the `anyOf` zod-to-json-schema
 * emits for constrained types, so ajv reports its problems in the SPEC's words ('description must be at most 500
 * characters') instead of 'must match a schema in anyOf'.
 */
export function wireSchema(schema: z.ZodTypeAny): Json {
  return mergeTypeUnions(jsonSchema(schema)) as Json;
}

function mergeTypeUnions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(mergeTypeUnions);
  if (node === null || typeof node !== 'object') return node;
  const out = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, mergeTypeUnions(v)])) as Json;
  const members = out.anyOf as Json[] | undefined;
  if (!Array.isArray(members)) return out;
  // Mergeable: every member names its own types and no keyword but `type` appears twice (type-specific
  // keywords such as maxLength and maxItems then apply to their own type only); an enum admits null only.
  const types: string[] = [];
  const merged: Json = {};
  for (const m of members) {
    if (m.type === undefined) return out;
    for (const t of [m.type].flat() as string[]) if (!types.includes(t)) types.push(t);
    for (const [k, v] of Object.entries(m)) {
      if (k === 'type') continue;
      if (k in merged) return out;
      merged[k] = v;
    }
  }
  if (Array.isArray(merged.enum)) {
    if (types.some((t) => t !== 'null' && t !== types[0])) return out;
    if (types.includes('null')) merged.enum = [...merged.enum, null];
  }
  const { anyOf: _, ...rest } = out;
  return { ...rest, ...merged, type: types.length === 1 ? types[0] : types };
}

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
