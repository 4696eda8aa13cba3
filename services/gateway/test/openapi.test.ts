import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OPERATIONS } from '@imagegen/api-schemas';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkAnswer, closeObjects } from '../../../test/support/contract.js';
import { offlineApp, openapiDocument } from '../scripts/openapi.js';

type Json = Record<string, any>;
let doc: Json;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  doc = await openapiDocument();
  // The checker of the end-to-end suite reads /docs/json from a gateway: serve this document the same way.
  server = createServer((req, res) => {
    if (req.url === '/docs/json') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** A response object, read through components.responses when it is a $ref. */
const resp = (op: Json, status: string): Json => {
  const r = op.responses[status];
  return r?.$ref ? doc.components.responses[r.$ref.split('/').pop()] : r;
};

const operations = () =>
  Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method: method.toUpperCase(), op: op as Json })),
  );

describe('the OpenAPI document (/docs/json)', () => {
  test('is OpenAPI 3.1 with every operation named, tagged and secured, operationIds unique', () => {
    expect(doc.openapi).toBe('3.1.0');
    const ids = operations().map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of operations()) {
      expect(op.tags?.length, `${method} ${path} tags`).toBeGreaterThan(0);
      expect(Array.isArray(op.security), `${method} ${path} security`).toBe(true);
      if (path.startsWith('/api/')) expect(op.security, `${method} ${path}`).toEqual([{ apiKey: [] }, { bearer: [] }]);
    }
  });

  test('every gateway route has a catalogue entry and every entry a route', () => {
    const documented = new Set(
      operations()
        .filter((o) => o.path.startsWith('/api/') || o.path.startsWith('/admin/') || o.path === '/health')
        .map((o) => `${o.method} ${o.path.replace(/\{([^}]+)\}/g, ':$1')}`),
    );
    expect([...documented].sort()).toEqual(Object.keys(OPERATIONS).sort());
  });

  test('every operation declares a success answer with its body, and the error answers with the envelope', () => {
    let withSchema = 0;
    for (const { path, method, op } of operations()) {
      const statuses = Object.keys(op.responses);
      const success = statuses.filter((s) => /^[23]/.test(s));
      expect(success.length, `${method} ${path}`).toBeGreaterThan(0);
      if (success.some((s) => resp(op, s).content)) withSchema++;
      if (!path.startsWith('/api/') && !path.startsWith('/admin/')) continue;
      for (const s of ['400', '429', '500', '503']) expect(statuses, `${method} ${path}`).toContain(s);
      expect(resp(op, '429').content['application/json'].schema.required).toEqual(['error', 'retryAfter']);
      expect(resp(op, '429').headers['Retry-After'].required).toBe(true);
      expect(resp(op, '503').headers['Retry-After'].required).toBe(true);
      for (const s of statuses.filter((x) => /^[45]/.test(x))) {
        expect(resp(op, s).content['application/json'].schema.required, `${method} ${path} ${s}`).toContain('error');
      }
      if (path.startsWith('/api/')) {
        expect(statuses, `${method} ${path}`).toContain('401');
        expect(op.responses['200' in op.responses ? '200' : (success[0] as string)].headers['X-RateLimit-Remaining']).toBeDefined();
      }
    }
    // Only DELETE /api/images/{id} (204) and GET /oauth/authorize (303) answer without a body.
    expect(withSchema).toBe(operations().length - 2);
  });

  test('DELETE /api/images/{id} answers 204; generating can answer 402 QUOTA_EXCEEDED', () => {
    const del = doc.paths['/api/images/{id}'].delete;
    expect(Object.keys(del.responses)).toContain('204');
    expect(del.responses['200']).toBeUndefined();
    const gen = resp(doc.paths['/api/images'].post, '402').content['application/json'];
    expect(gen.schema.properties.code).toEqual({ type: 'string', const: 'QUOTA_EXCEEDED' });
  });

  test('the POSTs that create or bill take Idempotency-Key and document 409, 422 and Idempotent-Replayed', () => {
    const idempotent = Object.entries(OPERATIONS).filter(([, spec]) => spec.idempotent);
    expect(idempotent.length).toBeGreaterThanOrEqual(12);
    for (const [key] of idempotent) {
      const url = key.replace(/^POST /, '');
      const op = doc.paths[url.replace(/:(\w+)/g, '{$1}')].post;
      expect(
        op.parameters.some((p: Json) => p.name === 'Idempotency-Key' && p.in === 'header'),
        url,
      ).toBe(true);
      expect(Object.keys(op.responses), url).toEqual(expect.arrayContaining(['409', '422']));
      const ok = Object.keys(op.responses).find((s) => /^2/.test(s)) as string;
      expect(op.responses[ok].headers['Idempotent-Replayed'], url).toBeDefined();
    }
  });

  test('request schemas are as strict as the server: required fields, enums, bounds', () => {
    const body = (path: string, method = 'post') => doc.paths[path][method].requestBody.content['application/json'].schema;
    const gen = body('/api/images');
    expect(gen.required).toContain('prompt');
    expect(gen.additionalProperties).toBe(false);
    expect(gen.properties.n).toMatchObject({ type: 'integer', minimum: 1, maximum: 4 });
    expect(gen.properties.model_id.enum).toContain('provA-flash-lite-image');
    expect(body('/api/search-presets').required).toEqual(['presetName', 'filters']);
    expect(body('/api/characters').required).toEqual(expect.arrayContaining(['character_name', 'base_prompt']));
  });

  test('the quota webhook, /health, the OAuth endpoints and /mcp are described', () => {
    const hook = doc.webhooks.quotaThreshold.post;
    expect(hook.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['event', 'threshold', 'tenant_id', 'billing_period', 'current_usage_mb', 'quota_mb', 'timestamp']),
    );
    expect(hook.parameters.map((p: Json) => p.name)).toEqual([
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'X-Webhook-Signature',
      'X-Webhook-Timestamp',
    ]);
    expect(doc.paths['/health'].get.responses['200'].content['application/json'].schema.required).toEqual([
      'status',
      'timestamp',
      'version',
      'commit',
    ]);
    for (const p of ['/oauth/authorize', '/oauth/token', '/oauth/register', '/.well-known/oauth-protected-resource', '/mcp']) {
      expect(doc.paths[p], p).toBeDefined();
    }
  });

  test('every schema in it compiles', () => {
    const ajv = new Ajv({ strict: false });
    addFormats(ajv);
    const seen = new Set<string>();
    let n = 0;
    const walk = (v: unknown) => {
      if (!v || typeof v !== 'object') return;
      const o = v as Json;
      if (o.schema && typeof o.schema === 'object') {
        n++;
        const text = JSON.stringify(o.schema);
        if (!seen.has(text)) ajv.compile(closeObjects(o.schema) as object);
        seen.add(text);
      }
      for (const x of Object.values(o)) walk(x);
    };
    walk(doc.paths);
    walk(doc.webhooks);
    walk(doc.components);
    expect(n).toBeGreaterThan(150);
  });
});

test('GET /docs/asyncapi.yaml serves the event catalogue next to the OpenAPI document', async () => {
  const app = await offlineApp();
  try {
    const res = await app.inject({ url: '/docs/asyncapi.yaml' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/yaml/);
    expect(res.body).toMatch(/^asyncapi: 3\.0\.0$/m);
    expect(res.body).toContain('address: imagegen.library.image_stored');
  } finally {
    await app.close();
  }
});

describe('the contract check of the end-to-end suite (test/support/contract.ts)', () => {
  const image = {
    id: 1,
    sessionId: 's',
    fullUrl: '/files/a.png',
    thumbnailUrl: '/files/a_t.png',
    width: 1,
    height: 1,
    sizeBytes: 10,
    prompt: 'p',
    negativePrompt: null,
    operation: 'generate',
    aspectRatio: '1:1',
    createdAt: '2026-11-25T10:00:00.000Z',
  };
  const page = (img: Json) => ({ data: [img], pagination: { total: 1, limit: 20, offset: 0, totalIsExact: true, nextCursor: null } });
  const json = new Headers({ 'content-type': 'application/json; charset=utf-8' });
  const answer = (path: string, status: number, body: unknown, headers = json, method = 'GET') => ({ method, path, status, headers, body });

  test('accepts an answer the document declares', async () => {
    await expect(checkAnswer(baseUrl, answer('/api/images?limit=1', 200, page(image)))).resolves.toBeUndefined();
    await expect(checkAnswer(baseUrl, answer('/api/images/7', 204, undefined, new Headers(), 'DELETE'))).resolves.toBeUndefined();
  });

  test('refuses an undeclared field, a wrong type, an undeclared status and a 429 without Retry-After', async () => {
    await expect(checkAnswer(baseUrl, answer('/api/images', 200, page({ ...image, secret: 1 })))).rejects.toThrow(/additional/);
    await expect(checkAnswer(baseUrl, answer('/api/images', 200, page({ ...image, id: '1' })))).rejects.toThrow(/integer/);
    await expect(checkAnswer(baseUrl, answer('/api/images/7', 200, undefined, new Headers(), 'DELETE'))).rejects.toThrow(
      /status not declared/,
    );
    await expect(checkAnswer(baseUrl, answer('/api/images', 429, { error: 'Rate limit exceeded.', retryAfter: 3 }))).rejects.toThrow(
      /Retry-After/,
    );
    await expect(checkAnswer(baseUrl, answer('/api/nowhere', 200, {}))).rejects.toThrow(/no operation/);
  });
});
