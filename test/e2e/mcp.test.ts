import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { callTool, jsonOf, mcpClient, mintTokens } from './mcp-support.js';

/**
 * The MCP endpoint through the gateway with the official SDK client (streamable HTTP and legacy SSE):
 * the 50 tools and their schemas, every tool's success and error path, scopes per tool, API key and
 * OAuth authentication, session continuity, async generation and progress notifications.
 */

const TOOL_NAMES = [
  'generate_image',
  'edit_image',
  'get_image_info',
  'list_images',
  'delete_image',
  'delete_images',
  'upload_image_for_editing',
  'download_images',
  'list_characters',
  'get_character',
  'create_character',
  'update_character',
  'delete_character',
  'generate_character_image',
  'generate_multi_character_image',
  'list_products',
  'get_product',
  'create_product',
  'update_product',
  'delete_product',
  'generate_product_image',
  'list_scenes',
  'get_scene',
  'create_scene',
  'update_scene',
  'delete_scene',
  'list_style_presets',
  'get_style_preset',
  'create_style_preset',
  'update_style_preset',
  'delete_style_preset',
  'list_search_presets',
  'create_search_preset',
  'delete_search_preset',
  'run_search_preset',
  'list_sessions',
  'get_session',
  'get_session_logs',
  'list_active_executions',
  'get_execution',
  'wait_for_execution',
  'cancel_execution',
  'get_usage',
  'get_profile',
  'list_webhooks',
  'create_webhook',
  'update_webhook',
  'delete_webhook',
  'list_models',
  'get_image_credentials',
];

const ANALYTICS_TOOLS = ['get_usage', 'get_profile', 'list_webhooks', 'create_webhook', 'update_webhook', 'delete_webhook'];
const ALL_SCOPES = [
  'images:generate',
  'images:edit',
  'images:read',
  'images:delete',
  'characters:manage',
  'characters:read',
  'products:manage',
  'products:read',
  'styles:manage',
  'styles:read',
  'sessions:read',
  'analytics:read',
];

let stack: TestStack;
let a: TestTenant;
let b: TestTenant;
let mcp: Client;
let mcpB: Client;

const call = callTool;

async function expectOk(client: Client, name: string, args: Record<string, unknown> = {}) {
  const r = await call(client, name, args);
  expect(r.ok, `${name}: ${r.text}`).toBe(true);
  return r;
}

async function expectError(client: Client, name: string, args: Record<string, unknown>, text: string | RegExp) {
  const r = await call(client, name, args);
  expect(r.ok, `${name} should fail`).toBe(false);
  if (typeof text === 'string') expect(r.text).toContain(text);
  else expect(r.text).toMatch(text);
  return r;
}

beforeAll(async () => {
  // With Redis, as deployed: rate limits (REST and MCP in one count per tenant) and idempotency records live there.
  stack = await startTestStack({ env: process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {} });
  // generous per-tenant limits: this file makes far more than 60 tool calls a minute
  [a, b] = await Promise.all([stack.createTenant({ rate_limit_per_minute: 1000 }), stack.createTenant({ rate_limit_per_minute: 1000 })]);
  mcp = await mcpClient(stack.baseUrl, a.liveKey);
  mcpB = await mcpClient(stack.baseUrl, b.liveKey);
});

afterAll(async () => {
  await mcp?.close();
  await mcpB?.close();
  await stack?.stop();
});

describe('protocol', () => {
  it('lists exactly the 50 tools with valid JSON schemas and one-line descriptions (streamable HTTP and SSE)', async () => {
    const sse = await mcpClient(stack.baseUrl, a.testKey, 'sse');
    try {
      for (const client of [mcp, sse]) {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name)).toEqual(TOOL_NAMES);
        const ajv = new AjvJsonSchemaValidator();
        for (const t of tools) {
          expect(t.description, t.name).toBeTruthy();
          expect(t.description).not.toContain('\n');
          expect(t.inputSchema.type).toBe('object');
          expect(() => ajv.getValidator(t.inputSchema as never), t.name).not.toThrow();
          expect(t.outputSchema?.type, `${t.name} outputSchema`).toBe('object');
          expect(() => ajv.getValidator(t.outputSchema as never), t.name).not.toThrow();
        }
        const gen = tools.find((t) => t.name === 'generate_image')!;
        const validate = ajv.getValidator(gen.inputSchema as never);
        expect(validate({ prompt: 'x' }).valid).toBe(true);
        expect(validate({}).valid).toBe(false);
        expect(Object.keys(gen.inputSchema.properties ?? {})).toEqual(
          expect.arrayContaining([
            'prompt',
            'scene_name',
            'scene_id',
            'async',
            'session_id',
            'model_id',
            'character_ids',
            'image_to_edit_id',
          ]),
        );
      }
    } finally {
      await sse.close();
    }
  });

  it("the SDK client holds real results to each tool's outputSchema: successes pass, errors carry _meta only", async () => {
    const own = await stack.createTenant({ rate_limit_per_minute: 1000 }); // its own presets: the other tests count tenant a's
    const client = await mcpClient(stack.baseUrl, own.liveKey);
    try {
      await client.listTools(); // from here on the client validates every structuredContent it receives
      const ok = async (name: string, args: Record<string, unknown> = {}) => {
        const r = await client.callTool({ name, arguments: args });
        expect(r.isError, `${name}: ${JSON.stringify(r.content)}`).toBeFalsy();
        expect(r.structuredContent, name).toBeTypeOf('object');
        return r.structuredContent as any;
      };
      expect((await ok('get_profile')).tenant.tenantId).toBe(own.tenantId);
      expect((await ok('list_models')).models).toHaveLength(6);
      expect((await ok('get_usage')).data.quota).toBeTypeOf('object');
      const created = await ok('create_style_preset', { name: 'schema-check', prompt: 'ink,', idempotency_key: 'schema-check-1' });
      const replay = await client.callTool({
        name: 'create_style_preset',
        arguments: { name: 'schema-check', prompt: 'ink,', idempotency_key: 'schema-check-1' },
      });
      expect(replay._meta?.['imagegen/idempotent-replayed']).toBe(true);
      expect(replay.structuredContent).toEqual(created);
      expect((await ok('get_style_preset', { identifier: created.data.id })).data.name).toBe('schema-check');
      expect((await ok('list_style_presets')).data.map((p: { name: string }) => p.name)).toContain('schema-check');
      expect((await ok('list_images')).pagination).toBeTypeOf('object');

      for (const [name, args, status, text] of [
        ['get_style_preset', { identifier: 'no-such-preset' }, 404, 'not found'],
        ['delete_image', { image_id: 99999999 }, 404, 'Image not found'],
        ['create_style_preset', { name: 'x', colour: 'red' }, 400, 'Invalid request payload'],
      ] as const) {
        const r = await client.callTool({ name, arguments: args });
        expect(r.isError, name).toBe(true);
        expect(r.structuredContent, name).toBeUndefined();
        expect(r._meta?.['imagegen/error'], name).toMatchObject({ status, error: expect.stringContaining(text) });
      }
    } finally {
      await client.close();
    }
  });

  it('serves stateless requests without initialize, also for the 2026-07-28 revision; GET /mcp is 405', async () => {
    const res = await fetch(`${stack.baseUrl}/mcp`, {
      method: 'POST',
      headers: {
        'x-api-key': a.liveKey,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    const body = await res.text();
    const data = body
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)));
    expect(data[0].id).toBe(7);
    expect(data[0].result.tools).toHaveLength(50);
    const get = await fetch(`${stack.baseUrl}/mcp`, { headers: { 'x-api-key': a.liveKey, accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
  });

  it('answers a JSON-RPC POST on {mcp_url} and on the legacy /sse path too (SPEC 4.10)', async () => {
    const rpc = (url: string, headers: Record<string, string> = { 'x-api-key': a.liveKey }) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
      });
    const dataOf = async (res: Response) =>
      (await res.text())
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6)));
    // the mcp service's own address ({mcp_url} in the distributed shape), the public base URL and /sse
    // through the gateway
    const mcpUrl = stack.stack.ctx.resolve('mcp').replace(/\/+$/, '');
    for (const url of [`${mcpUrl}/`, `${stack.baseUrl}/`, `${stack.baseUrl}/sse`]) {
      const res = await rpc(url);
      expect(res.status, url).toBe(200);
      const [msg] = await dataOf(res);
      expect(msg.id).toBe(3);
      expect(msg.result.tools).toHaveLength(50);
      const anonymous = await rpc(url, {});
      expect(anonymous.status, url).toBe(401);
      expect(((await anonymous.json()) as any).error).toBe('Invalid or missing API key');
    }
    // a tool call over POST /sse keeps the tenant scoping
    const call = await fetch(`${stack.baseUrl}/sse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-api-key': b.liveKey },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: 'get_session', arguments: { session_id: 'mcp-s1' } },
      }),
    });
    const [res] = await dataOf(call);
    expect(res.result.isError).toBe(true);
    expect(res.result.content[0].text).toBe('Session not found');
  });

  it('authenticates API keys (X-API-Key wins) and refuses missing, invalid and inactive credentials', async () => {
    const post = (headers: Record<string, string>) =>
      fetch(`${stack.baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
    const none = await post({});
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('resource_metadata="');
    expect(((await none.json()) as any).error).toBe('Invalid or missing API key');
    expect((await post({ 'x-api-key': a.liveKey, authorization: 'Bearer sk_live_bad' })).status).toBe(200);
    expect((await post({ 'x-api-key': 'sk_live_short' })).status).toBe(401);

    const c = await stack.createTenant({ rate_limit_per_minute: 1000 }); // polled below
    const token = await mintTokens(stack.baseUrl, c.liveKey, 'images:read');
    expect((await post({ authorization: `Bearer ${token.access_token}` })).status).toBe(200);
    const patch = await stack.api(`/admin/tenants/${c.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: false } });
    expect(patch.status).toBe(200);
    // Refused once the key and token caches (API_KEY_CACHE_TTL_MS, introspection: at most 5 s) let the change through.
    const refused = (headers: Record<string, string>, what: string) =>
      waitFor(
        async () => {
          const r = await post(headers);
          const body = (await r.json().catch(() => undefined)) as any;
          return r.status === 403 && body;
        },
        { message: `${what} refused (403)`, interval: 200 },
      );
    expect(await refused({ 'x-api-key': c.liveKey }, "the inactive tenant's API key")).toMatchObject({
      error: 'Tenant account is inactive',
    });
    await refused({ authorization: `Bearer ${token.access_token}` }, "the inactive tenant's token");
  });

  it('checks each tool’s scope for OAuth tokens (API keys have all scopes)', async () => {
    const analyticsOnly = await mintTokens(stack.baseUrl, a.liveKey, 'analytics:read');
    const allButAnalytics = await mintTokens(stack.baseUrl, a.liveKey, ALL_SCOPES.filter((s) => s !== 'analytics:read').join(' '));
    const c1 = await mcpClient(stack.baseUrl, analyticsOnly.access_token);
    const c2 = await mcpClient(stack.baseUrl, allButAnalytics.access_token);
    try {
      for (const name of TOOL_NAMES) {
        const refusedBy = ANALYTICS_TOOLS.includes(name) ? c2 : c1;
        // HTTP 403 insufficient_scope before the tool runs (MCP authorization spec: clients step up from it).
        const r = await refusedBy.callTool({ name, arguments: {} }).catch((e) => e);
        expect(r.code, name).toBe(403);
        expect(String(r.message), name).toContain(`Insufficient scope: ${name} requires `);
      }
      // allowed with the right scope
      expect((await call(c1, 'get_profile')).ok).toBe(true);
      expect((await call(c2, 'list_models')).ok).toBe(true);
    } finally {
      await c1.close();
      await c2.close();
    }
  });

  it('limits tool calls per tenant like the REST API (rate_limit_per_minute)', async () => {
    const slow = await stack.createTenant({ rate_limit_per_minute: 3 });
    const client = await mcpClient(stack.baseUrl, slow.liveKey);
    try {
      for (let i = 0; i < 3; i++) await expectOk(client, 'list_models');
      const r = await expectError(client, 'list_models', {}, /^Rate limit exceeded\. Try again in \d+ seconds\.$/);
      expect(r.error).toMatchObject({ status: 429, retryAfter: expect.any(Number) });
    } finally {
      await client.close();
    }
  });

  it.runIf(process.env.REDIS_URL)('counts REST requests and tool calls in one per-tenant limit (shared through Redis)', async () => {
    await expectOneLimitForRestAndMcp(stack);
  });

  it('counts REST requests and tool calls in one per-tenant limit in one process without Redis (pnpm start)', async () => {
    const memoryOnly = await startTestStack({});
    try {
      await expectOneLimitForRestAndMcp(memoryOnly);
    } finally {
      await memoryOnly.stop();
    }
  });
});

/** A tenant at 4 requests a minute: two REST requests and two tool calls use it up, the fifth is refused by either way. */
async function expectOneLimitForRestAndMcp(on: TestStack): Promise<void> {
  const t = await on.createTenant({ rate_limit_per_minute: 4 });
  const client = await mcpClient(on.baseUrl, t.liveKey);
  try {
    for (let i = 0; i < 2; i++) expect((await on.api('/api/webhooks', { key: t.liveKey })).status).toBe(200);
    for (let i = 0; i < 2; i++) await expectOk(client, 'list_models');
    // The fifth request of the minute, by either way, is refused.
    await expectError(client, 'list_models', {}, /^Rate limit exceeded\. Try again in \d+ seconds\.$/);
    const rest = await on.api('/api/webhooks', { key: t.liveKey });
    expect(rest.status).toBe(429);
    expect(rest.body.error).toMatch(/^Rate limit exceeded\. Try again in \d+ seconds\.$/);
  } finally {
    await client.close();
  }
}

describe('images', () => {
  let imageId: number;
  let executionId: string;
  let fullUrl: string;

  it('generate_image: images with thumbnails, session continuity, progress notifications; payload errors', async () => {
    const progress: number[] = [];
    const result = await mcp.callTool(
      { name: 'generate_image', arguments: { prompt: 'a red fox in snow [[delay:800]]', session_id: 'mcp-s1', n: 2 } },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    );
    expect(result.isError).toBeFalsy();
    const data = jsonOf(result);
    expect(data.images).toHaveLength(2);
    expect(data.images[0]).toMatchObject({ format: 'png', width: 1024, height: 1024 });
    // The REST form of a generated image (one definition, generatedImageJson): SPEC 2's fields plus the same extras.
    expect(Object.keys(data.images[0]).sort()).toEqual(
      [
        'created_at',
        'format',
        'full_url',
        'has_synthid',
        'height',
        'negative_prompt',
        'prompt',
        'record_id',
        'size_bytes',
        'thumbnail_url',
        'width',
        'mime_type',
        'aspect_ratio',
        'model_id',
        'resolution_tier',
        'parent_image_id',
      ].sort(),
    );
    expect(data.metadata).toEqual({ requested: 2, generated: 2, session_id: 'mcp-s1' });
    expect(typeof data.executionId).toBe('string');
    const images = (result.content as { type: string; data?: string; mimeType?: string }[]).filter((c) => c.type === 'image');
    expect(images).toHaveLength(2);
    expect(images[0].mimeType).toMatch(/^image\//);
    expect(Buffer.from(images[0].data as string, 'base64').length).toBeGreaterThan(100);
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.at(-1)).toBe(100);
    imageId = data.images[0].record_id;
    executionId = data.executionId;
    fullUrl = data.images[0].full_url;

    const bad = await expectError(mcp, 'generate_image', { n: 9 }, 'Invalid request payload');
    expect(bad.text).toContain('prompt is required');
    expect(bad.text).toContain('n must be <= 4');
    await expectError(
      mcp,
      'generate_image',
      { prompt: 'x', model_id: 'provA-flash-lite-image', resolution_tier: '4k' },
      'Invalid request payload',
    );
  });

  it('generate_image async + wait_for_execution', async () => {
    const started = await expectOk(mcp, 'generate_image', { prompt: 'a slow owl [[delay:1500]]', async: true, session_id: 'mcp-async' });
    expect(started.json.status).toBe('queued');
    expect(started.json.position).toBeGreaterThanOrEqual(1);
    expect(started.json.session_id).toBe('mcp-async');
    const done = await expectOk(mcp, 'wait_for_execution', { execution_id: started.json.executionId, timeout_seconds: 30 });
    expect(done.json.done).toBe(true);
    expect(done.json.execution).toMatchObject({
      executionId: started.json.executionId,
      status: 'completed',
      toolName: 'generate_image',
      toolSource: 'mcp',
    });
    expect(done.json.result.images).toHaveLength(1);
    expect(done.images).toHaveLength(1);
    await expectError(mcp, 'wait_for_execution', { execution_id: 'no-such-execution' }, 'Execution not found');
  });

  it('cancel_execution: a queued job ends cancelled and never runs; a finished one is refused', async () => {
    const slow = await expectOk(mcp, 'generate_image', { prompt: 'a slow heron [[delay:1500]]', async: true });
    const cancelled = await expectOk(mcp, 'cancel_execution', { execution_id: slow.json.executionId });
    expect(cancelled.json.execution.executionId).toBe(slow.json.executionId);
    expect(['cancelled', 'running']).toContain(cancelled.json.execution.status);
    await expectError(mcp, 'wait_for_execution', { execution_id: slow.json.executionId, timeout_seconds: 30 }, 'Execution cancelled');
    await expectError(mcp, 'cancel_execution', { execution_id: slow.json.executionId }, 'Execution already cancelled');
    await expectError(mcpB, 'cancel_execution', { execution_id: slow.json.executionId }, 'Execution not found');
  });

  it('edit_image keeps the session; unknown images are refused', async () => {
    const r = await expectOk(mcp, 'edit_image', { image_id: imageId, prompt: 'make it night', session_id: 'mcp-s1' });
    expect(r.json).toMatchObject({ parentImageId: imageId, sessionId: 'mcp-s1' });
    expect(r.images).toHaveLength(1);
    await expectError(mcp, 'edit_image', { image_id: 99999999, prompt: 'x' }, 'Image not found');
  });

  it('get_image_info, list_images; other tenants see nothing', async () => {
    const info = await expectOk(mcp, 'get_image_info', { image_id: imageId, include_thumbnail: true });
    expect(info.json).toMatchObject({ id: imageId, sessionId: 'mcp-s1', operation: 'generate' });
    expect(info.json.editHistory.edits).toHaveLength(1);
    expect(info.images).toHaveLength(1);
    await expectError(mcpB, 'get_image_info', { image_id: imageId }, 'Image not found');

    const list = await expectOk(mcp, 'list_images', { session_id: 'mcp-s1' });
    expect(list.json.data).toHaveLength(3);
    expect(list.json.pagination).toMatchObject({ total: 3, limit: 20, offset: 0 });
    expect((await expectOk(mcpB, 'list_images')).json.data).toHaveLength(0);
    await expectError(mcp, 'list_images', { limit: 101 }, 'limit must be <= 100');
    // numbers beyond the gRPC wire ranges (int32 paging, int64 ids and sizes) are refused, not internal errors
    await expectError(mcp, 'list_images', { offset: 3_000_000_000 }, 'offset must be <= 2147483647');
    await expectError(mcp, 'list_images', { min_size: 1e20 }, 'min_size must be <= 9007199254740991');
    await expectError(mcp, 'get_image_info', { image_id: 1e20 }, 'image_id must be <= 9007199254740991');
  });

  it('get_image_credentials (extension): the validated manifest store; other tenants see nothing', async () => {
    const c = await expectOk(mcp, 'get_image_credentials', { image_id: imageId });
    expect(c.json).toMatchObject({ imageId, present: true, validationState: 'Trusted', issuer: 'imagegen development' });
    expect(Object.keys(c.json.manifestStore.manifests)).toHaveLength(1);
    await expectError(mcpB, 'get_image_credentials', { image_id: imageId }, 'Image not found');
    await expectError(mcp, 'get_image_credentials', { image_id: 1e20 }, 'image_id must be <= 9007199254740991');
  });

  it('upload_image_for_editing fetches a public URL; bad URLs are refused', async () => {
    const r = await expectOk(mcp, 'upload_image_for_editing', { image_url: fullUrl, file_name: 'fox.png', session_id: 'mcp-s1' });
    expect(r.json).toMatchObject({ mime_type: 'image/png', session_id: 'mcp-s1' });
    expect(typeof r.json.image_id).toBe('number');
    expect(r.images).toHaveLength(1);
    const bad = await call(mcp, 'upload_image_for_editing', { image_url: 'ftp://example.com/a.png' });
    expect(bad.ok).toBe(false);
    expect(bad.error.status).toBe(400);
  });

  it('download_images returns image content; unknown ids are refused', async () => {
    const r = await expectOk(mcp, 'download_images', { image_ids: [imageId] });
    expect(r.images).toHaveLength(1);
    expect(r.json.images[0]).toMatchObject({ id: imageId, mimeType: 'image/png' });
    const thumbs = await expectOk(mcp, 'download_images', { image_ids: [imageId], thumbnails: true });
    expect(thumbs.images).toHaveLength(1);
    const missing = await expectError(mcp, 'download_images', { image_ids: [imageId, 99999999] }, 'Image not found');
    expect(missing.text).toContain('99999999');
    await expectError(mcpB, 'download_images', { image_ids: [imageId] }, 'Image not found');
  });

  it('delete_image and delete_images', async () => {
    const list = (await expectOk(mcp, 'list_images', { session_id: 'mcp-s1' })).json.data as { id: number }[];
    const [first, second] = list.map((i) => i.id).filter((id) => id !== imageId);
    await expectError(mcpB, 'delete_image', { image_id: first }, 'Image not found');
    expect((await expectOk(mcp, 'delete_image', { image_id: first })).json).toEqual({ deleted: true, id: first });
    await expectError(mcp, 'delete_image', { image_id: first }, 'Image not found');
    const bulk = await expectOk(mcp, 'delete_images', { image_ids: [second, 99999999] });
    expect(bulk.json.deleted).toEqual([second]);
    expect(bulk.json.failed.map((f: { id: number }) => f.id)).toEqual([99999999]);
    expect(bulk.json.summary).toEqual({ total: 2, succeeded: 1, failed: 1 });
    await expectError(mcp, 'delete_images', { image_ids: [] }, 'image_ids must have at least 1 item');
  });

  it('sessions and executions', async () => {
    const sessions = await expectOk(mcp, 'list_sessions');
    expect(sessions.json.data.map((s: { sessionId: string }) => s.sessionId)).toEqual(expect.arrayContaining(['mcp-s1', 'mcp-async']));
    await expectError(mcp, 'list_sessions', { limit: 0 }, 'limit must be >= 1');
    const s = await expectOk(mcp, 'get_session', { session_id: 'mcp-s1' });
    expect(s.json.data.session).toMatchObject({ session_id: 'mcp-s1', tenant_id: a.tenantId });
    await expectError(mcpB, 'get_session', { session_id: 'mcp-s1' }, 'Session not found');
    const logs = await expectOk(mcp, 'get_session_logs', { session_id: 'mcp-s1' });
    expect(logs.json).toMatchObject({ success: true, sessionId: 'mcp-s1' });
    expect(logs.json.executions.length).toBeGreaterThanOrEqual(2);
    expect(logs.json.executions[0].logEntries.length).toBeGreaterThan(0);
    await expectError(mcp, 'get_session_logs', { session_id: 'no-such-session' }, 'Session not found');
    const active = await expectOk(mcp, 'list_active_executions');
    expect(active.json).toMatchObject({ success: true, total: 0, executions: [] });
    const e = await expectOk(mcp, 'get_execution', { execution_id: executionId });
    expect(e.json.execution).toMatchObject({ executionId, sessionId: 'mcp-s1', status: 'completed', toolSource: 'mcp' });
    await expectError(mcpB, 'get_execution', { execution_id: executionId }, 'Execution not found');
  });

  it('list_sessions pages by cursor and refuses a bad one (issue 16)', async () => {
    const ids = (r: { json: { data: { sessionId: string }[] } }) => r.json.data.map((x) => x.sessionId);
    const all = await expectOk(mcp, 'list_sessions', { limit: 100 });
    const expected = ids(all);
    expect(expected.length).toBeGreaterThan(1);
    expect(all.json.pagination).toEqual({ total: expected.length, limit: 100, offset: 0, totalIsExact: true, nextCursor: null });
    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await expectOk(mcp, 'list_sessions', cursor ? { limit: 1, cursor } : { limit: 1 });
      paged.push(...ids(r));
      cursor = r.json.pagination.nextCursor;
    } while (cursor);
    expect(paged).toEqual(expected);
    const first = (await expectOk(mcp, 'list_sessions', { limit: 1 })).json.pagination.nextCursor as string;
    const changed = `${first.slice(0, 3)}${first[3] === 'A' ? 'B' : 'A'}${first.slice(4)}`;
    await expectError(mcp, 'list_sessions', { cursor: changed }, 'cursor is invalid');
    await expectError(mcpB, 'list_sessions', { cursor: first }, 'cursor is invalid');
    await expectError(mcp, 'list_sessions', { cursor: first, offset: 1 }, 'cursor and offset cannot be combined');
  });

  it('works over the legacy SSE transport too', async () => {
    const sse = await mcpClient(stack.baseUrl, a.liveKey, 'sse');
    try {
      const r = await expectOk(sse, 'generate_image', { prompt: 'a teapot', session_id: 'mcp-sse' });
      expect(r.images).toHaveLength(1);
      expect((await expectOk(sse, 'get_session', { session_id: 'mcp-sse' })).json.data.images).toHaveLength(1);
      await expectError(sse, 'get_image_info', { image_id: 99999999 }, 'Image not found');
    } finally {
      await sse.close();
    }
  });
});

describe('saved assets', () => {
  let refImageUrl: string;
  let refImageId: number;

  beforeAll(async () => {
    const g = await expectOk(mcp, 'generate_image', { prompt: 'reference picture', session_id: 'mcp-assets' });
    refImageUrl = g.json.images[0].full_url;
    refImageId = g.json.images[0].record_id;
  });

  it('characters', async () => {
    const c = await expectOk(mcp, 'create_character', {
      character_name: 'Captain Nova',
      base_prompt: 'a space captain with a silver jacket',
      tags: ['space'],
      reference_image_ids: [refImageId],
    });
    expect(c.json.data).toMatchObject({ character_name: 'Captain Nova', times_used: 0, last_used_at: null });
    await expectError(
      mcp,
      'create_character',
      { character_name: 'Short', base_prompt: 'tiny' },
      'Base prompt must be between 10 and 2000 characters',
    );
    const second = await expectOk(mcp, 'create_character', { character_name: 'Robo', base_prompt: 'a friendly little robot' });
    expect((await expectOk(mcp, 'list_characters', { sort_by: 'name' })).json.data).toHaveLength(2);
    // Cursor paging (issue 16): the same two characters one per page, and a changed or foreign cursor is refused.
    const first = await expectOk(mcp, 'list_characters', { sort_by: 'name', limit: 1 });
    expect(first.json.pagination).toEqual({ total: 2, limit: 1, offset: 0, hasMore: true, nextCursor: expect.any(String) });
    const next = await expectOk(mcp, 'list_characters', { sort_by: 'name', limit: 1, cursor: first.json.pagination.nextCursor });
    expect([...first.json.data, ...next.json.data].map((x: { character_name: string }) => x.character_name)).toEqual([
      'Captain Nova',
      'Robo',
    ]);
    expect(next.json.pagination).toMatchObject({ hasMore: false, nextCursor: null });
    const cursor = first.json.pagination.nextCursor as string;
    await expectError(
      mcp,
      'list_characters',
      { cursor: `${cursor.slice(0, 5)}${cursor[5] === 'A' ? 'B' : 'A'}${cursor.slice(6)}` },
      'cursor is invalid',
    );
    await expectError(mcpB, 'list_characters', { cursor }, 'cursor is invalid');
    await expectError(mcp, 'list_scenes', { cursor }, 'cursor is invalid');
    await expectError(mcp, 'list_characters', { cursor, offset: 1 }, 'cursor and offset cannot be combined');
    await expectError(mcp, 'list_characters', { sort_by: 'size' }, 'sort_by must be one of');
    expect((await expectOk(mcp, 'get_character', { identifier: 'Captain Nova' })).json.data.reference_images).toHaveLength(1);
    await expectError(mcpB, 'get_character', { identifier: c.json.data.id }, 'Character not found');
    const upd = await expectOk(mcp, 'update_character', { identifier: c.json.data.id, description: 'brave' });
    expect(upd.json.data.description).toBe('brave');
    await expectError(mcp, 'update_character', { identifier: 'Nobody', description: 'x' }, 'Character not found');

    await expectError(mcp, 'generate_character_image', { identifier: 'Nobody', scene_prompt: 'on a ship' }, 'Character not found');
    await expectError(
      mcp,
      'generate_multi_character_image',
      { character_ids: [c.json.data.id], scene_prompt: 'two friends on a ship' },
      'character_ids must have at least 2 items',
    );
    const gen = await call(mcp, 'generate_character_image', {
      identifier: 'Captain Nova',
      scene_prompt: 'on the bridge of a ship',
      session_id: 'mcp-assets',
    });
    const multi = await call(mcp, 'generate_multi_character_image', {
      character_ids: [c.json.data.id, second.json.data.id],
      scene_prompt: 'two friends on a ship deck',
    });
    expect((await expectOk(mcp, 'delete_character', { identifier: second.json.data.id })).json.data).toEqual({ deleted: true });
    await expectError(mcp, 'delete_character', { identifier: second.json.data.id }, 'Character not found');
    expect(gen.ok, gen.text).toBe(true);
    expect(gen.json.data).toMatchObject({ sessionId: 'mcp-assets', message: 'Generated an image of Captain Nova' });
    expect(gen.images).toHaveLength(1);
    expect(multi.ok, multi.text).toBe(true);
    expect(multi.json.data.characterCount).toBe(2);
  });

  it('products', async () => {
    const p = await expectOk(mcp, 'create_product', { product_name: 'Mug', product_url: refImageUrl, tags: 'kitchen,ceramic' });
    expect(p.json.data).toMatchObject({ productName: 'Mug', message: 'Product created successfully' });
    await expectError(
      mcp,
      'create_product',
      { product_name: 'Bad', product_url: 'ftp://example.com/x.png' },
      'Product URL must be a valid HTTP or HTTPS URL',
    );
    expect((await expectOk(mcp, 'list_products')).json.pagination).toMatchObject({ page: 1, pageSize: 20, total: 1 });
    await expectError(mcp, 'list_products', { page_size: 500 }, 'page_size must be <= 100');
    expect((await expectOk(mcp, 'get_product', { identifier: 'Mug' })).json.data.id).toBe(p.json.data.id);
    await expectError(mcpB, 'get_product', { identifier: 'Mug' }, 'Product not found');
    expect(
      (await expectOk(mcp, 'update_product', { identifier: 'Mug', product_description: 'A blue mug' })).json.data.productDescription,
    ).toBe('A blue mug');
    await expectError(mcp, 'update_product', { identifier: 'Cup', tags: 'x' }, 'Product not found');
    await expectError(mcp, 'generate_product_image', { identifier: 'Cup', scene_prompt: 'on a table' }, 'Product not found');
    const gen = await call(mcp, 'generate_product_image', { identifier: 'Mug', scene_prompt: 'on a wooden table', number_of_images: 2 });
    expect((await expectOk(mcp, 'delete_product', { identifier: 'Mug' })).json.data).toEqual({ deleted: true });
    await expectError(mcp, 'delete_product', { identifier: 'Mug' }, 'Product not found');
    expect(gen.ok, gen.text).toBe(true);
    expect(gen.json.data.images).toHaveLength(2);
    expect(gen.images).toHaveLength(2);
  });

  it('scenes (and generate_image with scene_name)', async () => {
    const sc = await expectOk(mcp, 'create_scene', {
      scene_name: 'Beach',
      scene_prompt: 'a sunny beach',
      preferred_aspect_ratio: '16:9',
      reference_image_ids: [refImageId],
    });
    expect(sc.json.data).toMatchObject({ sceneName: 'Beach', preferredAspectRatio: '16:9' });
    await expectError(mcp, 'create_scene', { scene_name: 'Empty' }, 'Invalid scene preset payload');
    expect((await expectOk(mcp, 'list_scenes')).json.data[0]).toMatchObject({ sceneName: 'Beach', imageCount: 1 });
    await expectError(mcp, 'list_scenes', { limit: 1000 }, 'limit must be <= 100');
    expect((await expectOk(mcp, 'get_scene', { identifier: 'Beach' })).json.data.referenceImages).toHaveLength(1);
    await expectError(mcpB, 'get_scene', { identifier: sc.json.data.id }, 'not found for this tenant');
    expect((await expectOk(mcp, 'update_scene', { identifier: 'Beach', description: 'summer' })).json.data.description).toBe('summer');
    await expectError(
      mcp,
      'update_scene',
      { identifier: 'Beach', scene_prompt: null, reference_image_ids: [] },
      'Scene preset must include at least a prompt or reference images',
    );
    await expectError(mcp, 'generate_image', { prompt: 'x', scene_name: 'Nowhere' }, 'not found for this tenant');
    const gen = await call(mcp, 'generate_image', { prompt: 'a sandcastle', scene_name: 'Beach' });
    // scene_name is a name only: a scene named after Beach's id is that scene, not Beach.
    const numericName = String(sc.json.data.id);
    const tall = await expectOk(mcp, 'create_scene', {
      scene_name: numericName,
      scene_prompt: 'a tall lighthouse',
      preferred_aspect_ratio: '9:16',
    });
    const byName = await call(mcp, 'generate_image', { prompt: 'a lighthouse', scene_name: numericName });
    expect(byName.ok, byName.text).toBe(true);
    expect(byName.json.images[0].height).toBeGreaterThan(byName.json.images[0].width); // 9:16, not Beach's 16:9
    await expectOk(mcp, 'delete_scene', { identifier: String(tall.json.data.id) });
    const del = await expectOk(mcp, 'delete_scene', { identifier: 'Beach' });
    expect(del.json.data).toMatchObject({ deleted: true, sceneName: 'Beach', imageCount: 1 });
    await expectError(mcp, 'delete_scene', { identifier: 'Beach' }, 'not found for this tenant');
    expect(gen.ok, gen.text).toBe(true);
    expect(gen.json.images[0].width).toBeGreaterThan(gen.json.images[0].height); // the scene's 16:9
  });

  it('style presets', async () => {
    const p = await expectOk(mcp, 'create_style_preset', { name: 'Noir', prompt: 'black and white film noir', aspect_ratio: '3:2' });
    expect(p.json.data).toMatchObject({ name: 'Noir', aspect_ratio: '3:2', negative_prompt: null });
    await expectError(mcp, 'create_style_preset', { name: '' }, 'Preset name must be between 1 and 128 characters');
    await expectError(mcp, 'create_style_preset', { name: 'Noir' }, 'Style preset with name Noir already exists');
    expect((await expectOk(mcp, 'list_style_presets')).json.pagination.total).toBe(1);
    await expectError(mcp, 'list_style_presets', { offset: -1 }, 'offset must be >= 0');
    expect((await expectOk(mcp, 'get_style_preset', { identifier: p.json.data.id })).json.data.name).toBe('Noir');
    await expectError(mcpB, 'get_style_preset', { identifier: p.json.data.id }, 'Style preset not found');
    const upd = await expectOk(mcp, 'update_style_preset', { identifier: p.json.data.id, new_name: 'Film Noir', aspect_ratio: null });
    expect(upd.json.data).toMatchObject({ name: 'Film Noir', aspect_ratio: null });
    await expectError(mcp, 'update_style_preset', { identifier: 99999999, prompt: 'x' }, 'Style preset not found');
    expect((await expectOk(mcp, 'delete_style_preset', { identifier: p.json.data.id })).json.data).toEqual({ deleted: true });
    await expectError(mcp, 'delete_style_preset', { identifier: p.json.data.id }, 'Style preset not found');
  });

  it('search presets', async () => {
    const p = await expectOk(mcp, 'create_search_preset', { preset_name: 'Foxes', filters: { search: 'fox', sortBy: 'newest' } });
    expect(p.json.data).toMatchObject({ presetName: 'Foxes', filters: { search: 'fox', sortBy: 'newest' }, tenantId: a.tenantId });
    await expectError(mcp, 'create_search_preset', { preset_name: '', filters: {} }, 'presetName cannot be empty');
    expect((await expectOk(mcp, 'list_search_presets')).json.data).toHaveLength(1);
    expect((await expectOk(mcpB, 'list_search_presets')).json.data).toHaveLength(0);
    const run = await expectOk(mcp, 'run_search_preset', { id: p.json.data.id });
    expect(run.json.preset.presetName).toBe('Foxes');
    expect(run.json.data.length).toBeGreaterThanOrEqual(1);
    await expectError(mcpB, 'run_search_preset', { id: p.json.data.id }, 'Preset not found');
    expect((await expectOk(mcp, 'delete_search_preset', { id: p.json.data.id })).json.data).toEqual({ deleted: true });
    await expectError(mcp, 'delete_search_preset', { id: p.json.data.id }, 'Preset not found');
  });
});

describe('account', () => {
  it('usage and profile', async () => {
    const u = await expectOk(mcp, 'get_usage', { limit: 3 });
    expect(u.json.data.quota).toMatchObject({ monthlyQuotaMb: 10240, rateLimitPerMinute: 1000 });
    expect(u.json.data.months.length).toBeLessThanOrEqual(3);
    await expectError(mcp, 'get_usage', { limit: 25 }, 'Invalid limit');
    const p = await expectOk(mcp, 'get_profile');
    expect(p.json).toEqual({
      tenant: {
        tenantId: a.tenantId,
        tenantName: `Tenant ${a.tenantId}`,
        quotas: expect.any(Object),
        allowedModels: expect.any(Array),
        modelId: expect.any(String),
      },
    });
    expect(p.json.tenant.allowedModels).toContain(p.json.tenant.modelId);
  });

  it('webhooks', async () => {
    await expectError(mcp, 'create_webhook', { url: 'http://example.com/hook' }, 'Webhook URL must use HTTPS');
    const w = await expectOk(mcp, 'create_webhook', { url: 'https://127.0.0.1:9/hook', events: ['quota.warning'] });
    expect(w.json.data).toMatchObject({ url: 'https://127.0.0.1:9/hook', events: ['quota.warning'], enabled: true });
    expect(w.json.data.secret).toMatch(/^whsec_/);
    expect((await expectOk(mcp, 'list_webhooks')).json.data).toHaveLength(1);
    expect((await expectOk(mcpB, 'list_webhooks')).json.data).toHaveLength(0);
    await expectError(mcpB, 'delete_webhook', { id: w.json.data.id }, 'Webhook not found');
    expect((await expectOk(mcp, 'delete_webhook', { id: w.json.data.id })).json.data).toEqual({ deleted: true, id: w.json.data.id });
  });

  it('models', async () => {
    const m = await expectOk(mcp, 'list_models');
    expect(m.json.models).toHaveLength(6);
    expect(m.json.defaultModel).toBe('provA-flash-lite-image');
    const t = await stack.createTenant({ allowed_models: ['provA-flash-lite-image'] });
    const client = await mcpClient(stack.baseUrl, t.liveKey);
    try {
      const r = await expectOk(client, 'list_models');
      expect(r.json.models.filter((x: { allowed: boolean }) => x.allowed).map((x: { model_id: string }) => x.model_id)).toEqual([
        'provA-flash-lite-image',
      ]);
      await expectError(client, 'generate_image', { prompt: 'x', model_id: 'provB-image-2' }, 'Invalid request payload');
    } finally {
      await client.close();
    }
  });
});
