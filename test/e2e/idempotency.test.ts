import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { lastSandboxId, receivedSince } from './generation-support.js';
import { jsonOf, mcpClient } from './mcp-support.js';

/**
 * Idempotency-Key on the POSTs that create or bill: the first answer is replayed (Idempotent-Replayed),
 * the same key with another body is 422, a retry while the first runs is 409, a failed first answer (5xx)
 * leaves the key free, and nothing is stored or billed twice.
 */
let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let mcp: Client;
beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  t = await s.createTenant();
  other = await s.createTenant();
  mcp = await mcpClient(s.baseUrl, other.liveKey);
});
afterAll(async () => {
  await mcp?.close();
  await s?.stop();
});

const post = (path: string, body: unknown, key: string | undefined, tenant = t) =>
  s.api(path, { key: tenant.liveKey, body, headers: key === undefined ? {} : { 'idempotency-key': key } });
const imageCount = async (tenant = t) => (await s.api('/api/images?limit=1', { key: tenant.liveKey })).body.pagination.total;
const usageImages = async (tenant: TestTenant) =>
  (await s.api('/api/usage', { key: tenant.liveKey })).body.data.months?.[0]?.total_images ?? 0;
/**
 * The month's images of `tenant` once usage has applied every event written so far: usage applies the events in
 * order, and a marker tenant's generation, made after them, is counted.
 */
async function monthImages(tenant = t): Promise<number> {
  const marker = await s.createTenant();
  expect((await post('/api/images', { prompt: 'usage marker' }, undefined, marker)).status).toBe(200);
  await waitFor(async () => (await usageImages(marker)) === 1, { message: "usage to count the marker tenant's image" });
  return usageImages(tenant);
}

describe('Idempotency-Key', () => {
  it('replays the first answer of a generation and bills it once', async () => {
    const body = { prompt: 'an idempotent lighthouse', n: 2 };
    const first = await post('/api/images', body, 'gen-1');
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post('/api/images', body, 'gen-1');
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await imageCount()).toBe(2);
    expect(await monthImages()).toBe(2);
  });

  it('refuses the same key with a different body (422), and keeps the first answer', async () => {
    expect((await post('/api/images', { prompt: 'first body' }, 'gen-2')).status).toBe(200);
    const other = await post('/api/images', { prompt: 'second body' }, 'gen-2');
    expect(other.status).toBe(422);
    expect(other.body).toEqual({
      error: 'Idempotency-Key already used for a different request',
      details: ['send a new Idempotency-Key for a request with another method, path, query or body'],
    });
  });

  it('answers 409 to a retry while the first request is still running, then replays it', async () => {
    const body = { prompt: 'slow one [[delay:1500]]' };
    const since = await lastSandboxId(s);
    const first = post('/api/images', body, 'gen-3');
    await waitFor(async () => (await receivedSince(s, since)).length > 0, { message: 'the first request at the provider' });
    const during = await post('/api/images', body, 'gen-3');
    expect(during.status).toBe(409);
    expect(during.body.error).toBe('A request with this Idempotency-Key is still in progress');
    expect(during.headers.get('retry-after')).toBe('1');
    const done = await first;
    expect(done.status).toBe(200);
    const replay = await post('/api/images', body, 'gen-3');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body.data?.executionId ?? replay.body.executionId).toBe(done.body.data?.executionId ?? done.body.executionId);
  });

  it('leaves the key free after a failed (5xx) answer: the retry runs, and only it is billed', async () => {
    const before = await imageCount();
    const failed = await post('/api/images', { prompt: 'upstream down [[fail:500]]' }, 'gen-4');
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const retry = await post('/api/images', { prompt: 'upstream down [[fail:500]]' }, 'gen-4');
    // The same request fails the same way (the directive), but it ran again: not a replay.
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await imageCount()).toBe(before);
  });

  it('does not keep a refusal by validation: the corrected request runs under the same key', async () => {
    const bad = await post('/api/images', { prompt: 'x', n: 99 }, 'gen-5');
    expect(bad.status).toBe(400);
    const good = await post('/api/images', { prompt: 'x corrected' }, 'gen-5');
    expect(good.status).toBe(200);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
  });

  it('keys are per tenant', async () => {
    const body = { name: 'Idem style', prompt_suffix: 'in watercolour' };
    const a = await post('/api/style-presets', body, 'shared-key');
    const b = await post('/api/style-presets', body, 'shared-key', other);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    const replay = await post('/api/style-presets', body, 'shared-key');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.status).toBe(a.status);
    expect(replay.body).toEqual(a.body);
    const list = await s.api('/api/style-presets', { key: t.liveKey });
    expect(JSON.stringify(list.body).match(/Idem style/g)).toHaveLength(1);
  });

  it('refuses a malformed key with 400 in the error envelope', async () => {
    const r = await post('/api/images', { prompt: 'x' }, 'k'.repeat(256));
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      error: 'Invalid Idempotency-Key header',
      details: ['Idempotency-Key must be one value of 1-255 visible ASCII characters'],
    });
  });

  it('is ignored on requests that neither create nor bill', async () => {
    const r = await s.api('/api/images?limit=1', { key: t.liveKey, headers: { 'idempotency-key': 'read' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('MCP idempotency_key', () => {
  const call = (name: string, args: Record<string, unknown>) => mcp.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });

  it('is published on the tools that create or bill, and only there', async () => {
    const { tools } = await mcp.listTools();
    const props = (n: string) => Object.keys((tools.find((x) => x.name === n)?.inputSchema.properties ?? {}) as object);
    expect(props('generate_image')).toContain('idempotency_key');
    expect(props('create_style_preset')).toContain('idempotency_key');
    expect(props('list_images')).not.toContain('idempotency_key');
  });

  it('returns the first result again for the same call, and bills it once', async () => {
    const before = await imageCount(other);
    const args = { prompt: 'an idempotent tool call', idempotency_key: 'mcp-1' };
    const first = await call('generate_image', args);
    expect(first.isError).toBeFalsy();
    const again = await call('generate_image', args);
    expect(again._meta?.['imagegen/idempotent-replayed']).toBe(true);
    expect(jsonOf(again)).toEqual(jsonOf(first));
    expect(await imageCount(other)).toBe(before + 1);
  });

  it('refuses the same key with other arguments (422) and a malformed key (400)', async () => {
    expect((await call('create_style_preset', { name: 'MCP idem', idempotency_key: 'mcp-2' })).isError).toBeFalsy();
    const other = await call('create_style_preset', { name: 'MCP idem 2', idempotency_key: 'mcp-2' });
    expect(other.isError).toBe(true);
    expect(other._meta?.['imagegen/error']).toMatchObject({ status: 422, error: 'Idempotency-Key already used for a different request' });
    const bad = await call('create_style_preset', { name: 'x', idempotency_key: 'has space' });
    expect(bad._meta?.['imagegen/error']).toMatchObject({ status: 400, error: 'Invalid request payload' });
  });

  it('is separate from the REST keys of the same tenant', async () => {
    const rest = await post('/api/style-presets', { name: 'Shared key REST' }, 'mcp-and-rest', other);
    expect(rest.status).toBe(200);
    const tool = await call('create_style_preset', { name: 'Shared key MCP', idempotency_key: 'mcp-and-rest' });
    expect(tool.isError).toBeFalsy();
    expect(tool._meta?.['imagegen/idempotent-replayed']).toBeUndefined();
  });
});
