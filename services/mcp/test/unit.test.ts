import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { AppError, createLogger } from '@imagegen/platform';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AuthFailure, createAuthenticator } from '../src/auth.js';
import { createToolLimiter } from '../src/rate-limit.js';
import { errorOf, formatIssue, formatIssues, toolError } from '../src/tools/framework.js';
import { ALL_TOOLS } from '../src/tools/index.js';

const logger = createLogger('mcp-test', 'silent');

describe('tool set', () => {
  it('has 50 uniquely named tools, each with a one-line description and a scope rule', () => {
    expect(ALL_TOOLS).toHaveLength(50);
    expect(new Set(ALL_TOOLS.map((t) => t.name)).size).toBe(50);
    for (const t of ALL_TOOLS) {
      expect(t.description.length, t.name).toBeGreaterThan(10);
      expect(t.description).not.toContain('\n');
      expect(t.scopes.length + (t.anyScopes?.length ?? 0), t.name).toBeGreaterThan(0);
    }
  });
});

describe('argument errors use the REST wording', () => {
  const schema = z.object({
    prompt: z.string().min(1),
    n: z.number().int().min(1).max(4).optional(),
    ids: z.array(z.number()).min(1).max(2).optional(),
    mode: z.enum(['a', 'b']).optional(),
  });
  const details = (v: unknown) => {
    const r = schema.safeParse(v);
    return r.success ? [] : r.error.issues.map(formatIssue);
  };
  it('formats each problem', () => {
    expect(details({})).toEqual(['prompt is required']);
    expect(details({ prompt: 3 })).toEqual(['prompt must be a string']);
    expect(details({ prompt: '' })).toEqual(['prompt cannot be empty']);
    expect(details({ prompt: 'x', n: 9 })).toEqual(['n must be <= 4']);
    expect(details({ prompt: 'x', n: 1.5 })).toEqual(['n must be an integer']);
    expect(details({ prompt: 'x', ids: [] })).toEqual(['ids must have at least 1 item']);
    expect(details({ prompt: 'x', ids: [1, 'a'] })).toEqual(['ids[1] must be a number']);
    expect(details({ prompt: 'x', mode: 'c' })).toEqual(['mode must be one of: a, b']);
  });
  it('names each unknown argument as the REST API does (strict schemas)', () => {
    const r = schema.strict().safeParse({ prompt: 'x', negativ_prompt: 'y', nn: 2 });
    expect(r.success).toBe(false);
    expect(formatIssues(r.success ? [] : r.error.issues)).toEqual(['negativ_prompt is not allowed', 'nn is not allowed']);
  });
  it('tool errors carry the text, details and status', () => {
    const r = toolError(400, { error: 'Invalid request payload', details: ['prompt is required'] });
    expect(r.isError).toBe(true);
    expect(r.content[0]).toEqual({ type: 'text', text: 'Invalid request payload\n- prompt is required' });
    // No structuredContent: the SDK client would validate it against the tool's outputSchema.
    expect(r.structuredContent).toBeUndefined();
    expect(errorOf(r)).toEqual({ status: 400, error: 'Invalid request payload', details: ['prompt is required'] });
  });
});

describe('per-tenant tool limits', () => {
  const settings = { disabled: false, defaultPerMinute: 60, generationsPerMinute: 2, uploadsPerMinute: 1, windowMs: 60_000 };
  it('counts API requests and generations separately, scaled with the tenant rate', async () => {
    const { limiter: limit, close } = await createToolLimiter(settings, { namespace: 'unit:rl:', logger });
    try {
      expect((await limit('t1', 60, 'generation')).allowed).toBe(true);
      expect((await limit('t1', 60, 'generation')).allowed).toBe(true);
      const refused = await limit('t1', 60, 'generation');
      expect(refused.allowed).toBe(false);
      expect(!refused.allowed && refused.retryAfter).toBeGreaterThan(0);
      expect((await limit('t1', 60, undefined)).allowed).toBe(true);
      expect((await limit('t2', 60, 'generation')).allowed).toBe(true);
      for (let i = 0; i < 3; i++) expect((await limit('t3', 3, undefined)).allowed).toBe(true);
      expect((await limit('t3', 3, undefined)).allowed).toBe(false);
    } finally {
      await close();
    }
    const off = await createToolLimiter({ ...settings, disabled: true }, { namespace: 'unit:rl:', logger });
    for (let i = 0; i < 5; i++) expect((await off.limiter('t', 1, 'generation')).allowed).toBe(true);
  });

  it('without Redis, limiters of one deployment in one process share the counters (another deployment has its own)', async () => {
    const namespace = `unit-${randomUUID().slice(0, 8)}:rl:`;
    const [a, b, other] = await Promise.all([
      createToolLimiter(settings, { namespace, logger }),
      createToolLimiter(settings, { namespace, logger }),
      createToolLimiter(settings, { namespace: `${namespace}other:`, logger }),
    ]);
    try {
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push((await (i % 2 ? a : b).limiter('shared', 5, undefined)).allowed);
      expect(answers).toEqual([true, true, true, true, true, false]);
      expect((await other.limiter('shared', 5, undefined)).allowed).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close(), other.close()]);
    }
  });

  it.runIf(process.env.REDIS_URL)('two mcp processes share one tenant limit through Redis (and the gateway keys)', async () => {
    const namespace = `unit-${randomUUID().slice(0, 8)}:rl:`;
    const opts = { redisUrl: process.env.REDIS_URL, namespace, logger };
    const [a, b] = await Promise.all([createToolLimiter(settings, opts), createToolLimiter(settings, opts)]);
    const redis = new Redis(process.env.REDIS_URL as string);
    try {
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push((await (i % 2 ? a : b).limiter('shared', 5, undefined)).allowed);
      expect(answers).toEqual([true, true, true, true, true, false]);
      // One counter for the tenant's API bucket, under the gateway's namespace and key (tenantRateBuckets).
      const keys = await redis.keys(`${namespace}*`);
      expect(keys).toHaveLength(1);
      expect(keys[0].endsWith('-api:shared')).toBe(true);
      expect(Number(await redis.get(keys[0]))).toBe(6);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await redis.quit();
    }
  });
});

describe('authenticator', () => {
  const KEY = `sk_live_${'a'.repeat(40)}`;
  const INACTIVE = `sk_test_${'b'.repeat(40)}`;
  const tenancy = {
    authenticateApiKey: async ({ keyHash }: { keyHash: string }) => {
      const { createHash } = await import('node:crypto');
      const h = (k: string) => createHash('sha256').update(k).digest('hex');
      if (keyHash === h(KEY))
        return { tenantId: 'acme', keyType: 'live', keyName: 'k', tenantActive: true, rateLimitPerMinute: 60, keyId: 'k1' };
      if (keyHash === h(INACTIVE))
        return { tenantId: 'sleepy', keyType: 'test', keyName: 'k', tenantActive: false, rateLimitPerMinute: 60, keyId: 'k2' };
      throw new AppError(401, 'Invalid or missing API key');
    },
    recordApiKeyUsage: async () => ({}),
  };

  async function withIntrospection(fn: (url: string) => Promise<void>) {
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const { token } = JSON.parse(body);
        const r =
          token === 'good-token'
            ? {
                active: true,
                tenant_id: 'acme',
                tenant_active: true,
                scope: 'images:read',
                client_id: 'c1',
                exp: Math.floor(Date.now() / 1000) + 60,
              }
            : token === 'inactive-tenant'
              ? { active: true, tenant_id: 'sleepy', tenant_active: false, scope: 'images:read', exp: Math.floor(Date.now() / 1000) + 60 }
              : { active: false };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(r));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      await fn(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    } finally {
      server.close();
    }
  }

  it('tells API keys from access tokens and maps the refusals', async () => {
    await withIntrospection(async (oauthUrl) => {
      const auth = createAuthenticator({
        tenancy: tenancy as never,
        oauthUrl: () => oauthUrl,
        resourceMetadataUrl: 'https://api.example/.well-known/oauth-protected-resource',
        apiKeyCacheTtlMs: 1000,
        logger,
      });
      try {
        const byKey = await auth.authenticate({ 'x-api-key': KEY, authorization: 'Bearer good-token' });
        expect(byKey).toMatchObject({ kind: 'api_key', tenantId: 'acme' });
        expect(byKey.scopes).toBeUndefined();
        expect(await auth.authenticate({ authorization: `Bearer ${KEY}` })).toMatchObject({ kind: 'api_key', keyType: 'live' });
        expect(await auth.authenticate({ authorization: 'Bearer good-token' })).toMatchObject({
          kind: 'oauth',
          tenantId: 'acme',
          scopes: ['images:read'],
          keyType: 'live',
        });
        const fail = async (h: Record<string, string>): Promise<AuthFailure> =>
          auth.authenticate(h).then(
            () => {
              throw new Error('expected a refusal');
            },
            (e) => e as AuthFailure,
          );
        const none = await fail({});
        expect(none).toBeInstanceOf(AuthFailure);
        expect(none.status).toBe(401);
        expect(none.headers['www-authenticate']).toBe(
          'Bearer resource_metadata="https://api.example/.well-known/oauth-protected-resource"',
        );
        expect((await fail({ 'x-api-key': 'sk_live_short' })).body).toEqual({ error: 'Invalid or missing API key' });
        expect((await fail({ 'x-api-key': `sk_live_${'z'.repeat(40)}` })).status).toBe(401);
        expect((await fail({ 'x-api-key': INACTIVE })).body).toEqual({ error: 'Tenant account is inactive' });
        const bad = await fail({ authorization: 'Bearer nope' });
        expect(bad.status).toBe(401);
        expect(bad.headers['www-authenticate']).toContain('error="invalid_token"');
        expect((await fail({ authorization: 'Bearer inactive-tenant' })).status).toBe(403);
      } finally {
        await auth.stop();
      }
    });
  });
});
