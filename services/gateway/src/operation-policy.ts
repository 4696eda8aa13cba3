import { OPERATIONS, type OperationSpec, requestSchemas } from '@imagegen/api-schemas';
import type { RouteOptions } from 'fastify';

/** How a route is protected and counted; the catalogue's (OPERATIONS) for every catalogued route. */
export type RouteAuth = OperationSpec['auth'];

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set from the catalogue for catalogued routes; uncatalogued routes (docs, files, proxies) set it themselves. */
    auth?: RouteAuth;
    /** An Idempotency-Key is honoured (POSTs that create or bill). */
    idempotent?: boolean;
    /** The tenant rate-limit bucket besides 'api'. */
    rate?: OperationSpec['rate'];
    /** The per-tenant cap it counts against while it runs: open event streams, calls that wait for generation. */
    concurrency?: 'stream' | 'generation';
  }
}

/** The catalogue entry of a route (HEAD answers as its GET), or undefined. */
export function operationOf(method: string, url: string): OperationSpec | undefined {
  return OPERATIONS[`${method === 'HEAD' ? 'GET' : method} ${url}`];
}

/**
 * onRoute hook: a catalogued route takes its auth, idempotency and rate-limit class and its request schemas (what
 * fastify validates its params, query and body with) from OPERATIONS, the same entry the OpenAPI document is built
 * from, so what the gateway enforces is what the document says. A route that declares any of them itself (or a
 * summary, description or tags: the document is the catalogue's) fails at start: the catalogue is the one place.
 */
export function applyOperationPolicy(route: RouteOptions): void {
  if (typeof route.method !== 'string') return;
  const spec = operationOf(route.method, route.url);
  const own = (route.config ?? {}) as Record<string, unknown>;
  if (!spec) {
    // Tenant and admin paths are the catalogue's; anything else (docs, files, proxies) states its auth or is open.
    if (/^\/(api|admin)(\/|$)/.test(route.url)) throw new Error(`${route.method} ${route.url} is not in the operation catalogue`);
    return;
  }
  const policy = {
    auth: spec.auth,
    idempotent: spec.idempotent === true,
    rate: spec.rate,
    concurrency: spec.ok.media === 'text/event-stream' ? 'stream' : spec.rate ? 'generation' : undefined,
  } as const;
  for (const [k, v] of Object.entries(policy)) {
    // (fastify's HEAD twin of a GET arrives with the GET's config, already set from the catalogue)
    if (own[k] !== undefined && own[k] !== v)
      throw new Error(`${route.method} ${route.url}: '${k}' is the catalogue's (libs/api-schemas operations.ts)`);
  }
  route.config = { ...own, ...policy } as typeof route.config;
  // The request schemas are made once per operation: a HEAD twin arriving with its GET's has the same objects.
  const request = requestSchemas(spec) as Record<string, unknown>;
  const ownSchema = (route.schema ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(ownSchema)) {
    if (k !== 'response' && v !== undefined && v !== request[k])
      throw new Error(`${route.method} ${route.url}: schema '${k}' is the catalogue's (libs/api-schemas operations.ts)`);
  }
  route.schema = { ...ownSchema, ...request };
}
