import { OPERATIONS, type OperationSpec } from '@imagegen/api-schemas';
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
 * onRoute hook: a catalogued route takes its auth, idempotency and rate-limit class from OPERATIONS, the same entry
 * the OpenAPI document states them from, so what the gateway enforces is what the document says. A route that
 * declares any of them itself fails at start: the catalogue is the one place.
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
}
