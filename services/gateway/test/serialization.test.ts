import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { offlineApp } from '../scripts/openapi.js';
import { cachedSerializers, declareResponses, responseSchemas } from '../src/openapi.js';

/**
 * Answers are serialized with the operation catalogue's schemas (openapi.ts declareResponses): declared fields
 * are written, undeclared ones dropped, error bodies keep their envelope (details as array or object, the 429's
 * retryAfter, the 402's code).
 */

const TS = '2026-11-25T12:00:00.000Z';
const profile = {
  tenant: {
    tenantId: 't1',
    tenantName: 'T1',
    quotas: { monthlyQuotaMb: 10, monthlyUsedMb: 1, monthlyRemainingMb: 9, rateLimitPerMinute: 60 },
    allowedModels: ['provA-flash-lite-image'],
    modelId: 'provA-flash-lite-image',
  },
};

describe('response serialization from the catalogue', () => {
  const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: cachedSerializers } } });
  beforeAll(async () => {
    app.addHook('onRoute', declareResponses);
    // Catalogued routes whose handlers answer what the test asks for (?as=<case>).
    app.get('/api/profile', async (req, reply) => {
      const as = (req.query as { as?: string }).as;
      if (as === 'leak') return { ...profile, apiKeyHash: 'x', tenant: { ...profile.tenant, internal: true } };
      if (as === '429')
        return reply.status(429).send({ error: 'Too many concurrent streams', details: ['at most 2'], retryAfter: 5, extra: 1 });
      if (as === '400') return reply.status(400).send({ error: 'Content blocked', code: 'CONTENT_BLOCKED', details: { reason: 'x' } });
      if (as === '500') return reply.status(500).send({ error: 'Internal server error', requestId: 'r-1', stack: 'at ...' });
      return profile;
    });
    app.post('/api/images', async (_req, reply) =>
      reply.status(402).send({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED', usedMb: 12 }),
    );
    app.get('/not-catalogued', async () => ({ anything: 1, goes: TS }));
    await app.ready();
  });
  afterAll(() => app.close());

  const get = async (url: string) => {
    const r = await app.inject({ method: 'GET', url });
    return { status: r.statusCode, body: r.json() };
  };

  it('writes the declared fields and drops the undeclared ones', async () => {
    expect(await get('/api/profile')).toEqual({ status: 200, body: profile });
    expect(await get('/api/profile?as=leak')).toEqual({ status: 200, body: profile });
  });

  it('keeps the error envelopes whole', async () => {
    expect(await get('/api/profile?as=429')).toEqual({
      status: 429,
      body: { error: 'Too many concurrent streams', details: ['at most 2'], retryAfter: 5 },
    });
    expect(await get('/api/profile?as=400')).toEqual({
      status: 400,
      body: { error: 'Content blocked', code: 'CONTENT_BLOCKED', details: { reason: 'x' } },
    });
    expect(await get('/api/profile?as=500')).toEqual({ status: 500, body: { error: 'Internal server error', requestId: 'r-1' } });
    const quota = await app.inject({ method: 'POST', url: '/api/images', payload: {} });
    expect(quota.json()).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
  });

  it('leaves routes outside the catalogue, and non-JSON answers, to JSON.stringify', async () => {
    expect(await get('/not-catalogued')).toEqual({ status: 200, body: { anything: 1, goes: TS } });
    expect(responseSchemas('GET', '/not-catalogued')).toBeUndefined();
    // ZIP and 204 answers: no success schema, the error statuses only.
    expect(Object.keys(responseSchemas('POST', '/api/images/download') ?? {})).not.toContain('200');
    expect(Object.keys(responseSchemas('DELETE', '/api/images/:id') ?? {})).not.toContain('204');
    expect(Object.keys(responseSchemas('GET', '/api/images/:id') ?? {})).toEqual(
      expect.arrayContaining(['200', '400', '401', '403', '404', '429', '500', '503']),
    );
  });

  it('serves the real gateway through them (health, an authentication refusal)', async () => {
    const gw = await offlineApp();
    try {
      const health = await gw.inject({ method: 'GET', url: '/health' });
      expect(Object.keys(health.json())).toEqual(['status', 'timestamp', 'version', 'commit']);
      const refused = await gw.inject({ method: 'GET', url: '/api/profile' });
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toEqual({ error: 'Invalid or missing API key' });
    } finally {
      await gw.close();
    }
  });
});
