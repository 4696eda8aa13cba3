import SerializerSelector, { type Serializer, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { FastifyStaticSwaggerOptions } from '@fastify/swagger';
import { buildOpenapiDocument, responseSchemas } from '@imagegen/api-schemas';
import type { RouteOptions } from 'fastify';

/**
 * The OpenAPI 3.1 document at /docs/json is built from the operation catalogue alone (@imagegen/api-schemas
 * `buildOpenapiDocument`, which `pnpm client` also writes to libs/client): @fastify/swagger serves it as a static
 * document, the routes only register handlers (their request schemas come from the same catalogue entry,
 * operation-policy.ts). Here: the answers' serializers, from the same catalogue.
 */

export { responseSchemas };

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

/** Options for @fastify/swagger: the catalogue's document, served as it is. */
export function swaggerOptions(): FastifyStaticSwaggerOptions {
  return { mode: 'static', specification: { document: buildOpenapiDocument() as never } };
}
