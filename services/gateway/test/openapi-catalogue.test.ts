import { buildOpenapiDocument, OPERATIONS, requestSchemas } from '@imagegen/api-schemas';
import Fastify, { type RouteOptions } from 'fastify';
import { describe, expect, test } from 'vitest';
import { offlineApp } from '../scripts/openapi.js';
import { applyOperationPolicy } from '../src/operation-policy.js';

/**
 * One operation catalogue: the gateway serves the document built from it alone (the one `pnpm client` writes),
 * and its routes validate with the request schemas of the same entries, stating none of their own.
 */

describe('the document at /docs/json', () => {
  test('is the catalogue document, every operation of it has a route, and /docs still serves the UI', async () => {
    const app = await offlineApp();
    try {
      const json = await app.inject({ url: '/docs/json' });
      expect(json.statusCode).toBe(200);
      expect(json.json()).toEqual(buildOpenapiDocument());
      const ui = await app.inject({ url: '/docs/' });
      expect(ui.statusCode).toBe(200);
      expect(ui.headers['content-type']).toMatch(/^text\/html/);
      // What the document states is served: every operation of the catalogue has its route.
      const missing = Object.keys(OPERATIONS).filter((key) => {
        const [method, url] = key.split(' ') as [string, string];
        return !app.hasRoute({ method: method as 'GET', url });
      });
      expect(missing).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

describe('the request schemas of a catalogued route (operation-policy.ts)', () => {
  const handler = async () => ({});
  function appWithPolicy() {
    const app = Fastify();
    const seen = new Map<string, RouteOptions['schema']>();
    app.addHook('onRoute', applyOperationPolicy);
    app.addHook('onRoute', (r) => {
      seen.set(`${r.method} ${r.url}`, r.schema);
    });
    return { app, seen };
  }

  test('come from the catalogue, for the route and its HEAD twin alike', async () => {
    const { app, seen } = appWithPolicy();
    app.get('/api/images', handler);
    app.patch('/api/characters/:identifier', handler);
    await app.ready();
    const list = requestSchemas(OPERATIONS['GET /api/images']);
    expect(seen.get('GET /api/images')).toMatchObject({ querystring: list.querystring });
    expect(seen.get('HEAD /api/images')).toMatchObject({ querystring: list.querystring });
    const patch = requestSchemas(OPERATIONS['PATCH /api/characters/:identifier']);
    const own = seen.get('PATCH /api/characters/:identifier') as Record<string, unknown>;
    expect(Object.keys(own)).toEqual(['params', 'body']);
    expect(own.params).toBe(patch.params);
    expect(own.body).toBe(patch.body);
    await app.close();
  });

  test('a route that states its own (or a summary) fails at start', () => {
    const { app } = appWithPolicy();
    expect(() => app.get('/api/images', { schema: { querystring: { type: 'object' } } }, handler)).toThrow(
      /GET \/api\/images: schema 'querystring' is the catalogue's/,
    );
    expect(() => app.get('/api/profile', { schema: { summary: 'mine' } }, handler)).toThrow(/schema 'summary' is the catalogue's/);
  });

  test('a body validated in part is documented with every rule; one the route checks by hand is not validated', () => {
    const doc = buildOpenapiDocument() as { paths: Record<string, Record<string, any>> };
    const body = (path: string, method: string) => doc.paths[path][method].requestBody.content['application/json'].schema;
    // POST /api/images checks the JSON types only (the service checks every rule): the document shows the rules.
    expect(requestSchemas(OPERATIONS['POST /api/images']).body?.properties).toMatchObject({ n: { type: 'integer' } });
    expect(body('/api/images', 'post').properties.n).toMatchObject({ minimum: 1, maximum: 4 });
    expect(requestSchemas(OPERATIONS['POST /api/scenes']).body).toBeUndefined();
    expect(body('/api/scenes', 'post').required).toEqual(['scene_name']);
    // Keywords zod cannot state are validated and documented alike.
    expect(body('/api/webhooks/{id}', 'patch')).toMatchObject({ minProperties: 1 });
    expect(requestSchemas(OPERATIONS['PATCH /api/webhooks/:id']).body).toMatchObject({ minProperties: 1 });
    expect(body('/admin/tenants', 'post').properties.allowed_models.uniqueItems).toBe(true);
  });
});
