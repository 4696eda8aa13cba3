import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { callTool, mcpClient } from './mcp-support.js';

/**
 * What a demanding MCP client sees beyond "the tool works": annotations that tell it which tools reach the
 * outside world, unknown arguments refused (not silently dropped), and results and errors identical to the
 * REST answers of the same operation.
 */

let stack: TestStack;
let a: TestTenant;
let b: TestTenant;
let mcp: Client;
let mcpB: Client;

const call = callTool;

async function ok(client: Client, name: string, args: Record<string, unknown> = {}) {
  const r = await call(client, name, args);
  expect(r.ok, `${name}: ${r.text}`).toBe(true);
  return r.json;
}

async function fails(client: Client, name: string, args: Record<string, unknown>) {
  const r = await call(client, name, args);
  expect(r.ok, `${name} should fail: ${r.text}`).toBe(false);
  return r;
}

const rest = (path: string, init: { method?: string; body?: unknown } = {}) => stack.api(path, { ...init, key: a.liveKey });

beforeAll(async () => {
  stack = await startTestStack();
  [a, b] = await Promise.all([stack.createTenant({ rate_limit_per_minute: 1000 }), stack.createTenant({ rate_limit_per_minute: 1000 })]);
  mcp = await mcpClient(stack.baseUrl, a.liveKey);
  mcpB = await mcpClient(stack.baseUrl, b.liveKey);
});

afterAll(async () => {
  await mcp?.close();
  await mcpB?.close();
  await stack?.stop();
});

describe('tool metadata', () => {
  it('declares openWorldHint on every tool: true only where the tool reaches outside the platform', async () => {
    const { tools } = await mcp.listTools();
    const openWorld = tools.filter((t) => t.annotations?.openWorldHint === true).map((t) => t.name);
    expect(openWorld.sort()).toEqual(
      [
        'generate_image',
        'edit_image',
        'upload_image_for_editing',
        'generate_character_image',
        'generate_multi_character_image',
        'create_product',
        'generate_product_image',
        'create_scene',
        'update_scene', // reference_image_urls are fetched
        'create_webhook',
      ].sort(),
    );
    for (const t of tools) expect(typeof t.annotations?.openWorldHint, t.name).toBe('boolean');
    for (const t of tools.filter((x) => x.annotations?.readOnlyHint)) expect(t.annotations?.destructiveHint, t.name).toBeUndefined();
  });

  it('refuses arguments a tool does not know, in the REST wording, instead of dropping them', async () => {
    const r = await fails(mcp, 'generate_image', { prompt: 'a fox', negativ_prompt: 'blur' });
    expect(r.text).toBe('Invalid request payload\n- negativ_prompt is not allowed');
    const two = await fails(mcp, 'list_images', { limt: 5, ofset: 1 });
    expect(two.error.details).toEqual(['limt is not allowed', 'ofset is not allowed']);
    // an empty required string reads as REST's 'cannot be empty'
    expect((await fails(mcp, 'edit_image', { image_id: 1, prompt: '' })).text).toContain('prompt cannot be empty');
  });
});

describe('results and errors match REST', () => {
  it('get_usage with a bad limit answers REST’s "Invalid limit"', async () => {
    const restRes = await rest('/api/usage?limit=25');
    expect(restRes.status).toBe(400);
    for (const limit of [25, 0, 1.5]) {
      const r = await fails(mcp, 'get_usage', { limit });
      expect(r.text).toBe(restRes.body.error);
      expect(r.error.status).toBe(400);
    }
  });

  it('create_webhook and delete_webhook answer the REST forms', async () => {
    const viaRest = await rest('/api/webhooks', { body: { url: 'https://127.0.0.1:9/rest', events: ['quota.warning'] } });
    expect(viaRest.status).toBe(201);
    const viaMcp = await ok(mcp, 'create_webhook', { url: 'https://127.0.0.1:9/mcp', events: ['quota.warning'] });
    expect(Object.keys(viaMcp.data).sort()).toEqual(Object.keys(viaRest.body.data).sort());
    expect(viaMcp.data).toMatchObject({ url: 'https://127.0.0.1:9/mcp', events: ['quota.warning'], enabled: true });
    expect(viaMcp.data.secret).toMatch(/^whsec_/);

    await fails(mcpB, 'delete_webhook', { id: viaMcp.data.id });
    const del = await ok(mcp, 'delete_webhook', { id: viaMcp.data.id });
    const delRest = await rest(`/api/webhooks/${viaRest.body.data.id}`, { method: 'DELETE' });
    expect(del).toEqual({ data: { deleted: true, id: viaMcp.data.id } });
    expect(del.data).toEqual({ ...delRest.body.data, id: viaMcp.data.id });
  });

  it('edit_image, upload_image_for_editing and delete_images carry every field of their REST answer', async () => {
    const gen = await ok(mcp, 'generate_image', { prompt: 'a parity fox', n: 3, session_id: 'parity' });
    const [first, second, third] = gen.images as { record_id: number; full_url: string }[];

    const editRest = await rest('/api/edit-image', { body: { image_id: first.record_id, prompt: 'at night' } });
    expect(editRest.status).toBe(200);
    const editMcp = await ok(mcp, 'edit_image', { image_id: first.record_id, prompt: 'at night' });
    expect(Object.keys(editMcp).sort()).toEqual(Object.keys(editRest.body).sort());
    expect(editMcp.aspectRatio).toBe(editRest.body.aspectRatio);

    const upRest = await rest('/api/upload-for-editing', { body: { image_url: first.full_url } });
    expect(upRest.status).toBe(200);
    const upMcp = await ok(mcp, 'upload_image_for_editing', { image_url: first.full_url });
    expect(Object.keys(upMcp).sort()).toEqual(Object.keys(upRest.body).sort());
    expect(typeof upMcp.execution_id).toBe('string');

    const bulkRest = await rest('/api/images/delete-bulk', { body: { ids: [second.record_id, second.record_id] } });
    const bulkMcp = await ok(mcp, 'delete_images', { image_ids: [third.record_id, third.record_id] });
    expect(bulkRest.body.data.summary).toEqual({ total: 1, succeeded: 1, failed: 0 });
    expect(bulkMcp.summary).toEqual(bulkRest.body.data.summary);
    expect(bulkMcp.deleted).toEqual([third.record_id]);
  });

  it('get_session answers exactly what GET /api/sessions/:id answers (the images as the library rendered them)', async () => {
    await ok(mcp, 'generate_image', { prompt: 'a "quoted" parity owl \\ ünïcode', n: 2, session_id: 'parity-get' });
    await ok(mcp, 'generate_image', { prompt: 'a second parity owl', negative_prompt: 'blurry', session_id: 'parity-get' });
    const viaRest = await rest('/api/sessions/parity-get');
    expect(viaRest.status).toBe(200);
    expect(viaRest.body.data.images).toHaveLength(3);
    // Twice: the second answer is the library's kept rendering of the unchanged session.
    for (let i = 0; i < 2; i++) expect(await ok(mcp, 'get_session', { session_id: 'parity-get' })).toEqual(viaRest.body);
    expect((await fails(mcpB, 'get_session', { session_id: 'parity-get' })).text).toContain('Session not found');
  });

  it('list_images names the argument the model passed in filter errors; list_active_executions pages like REST', async () => {
    const bad = await fails(mcp, 'list_images', { date_from: 'garbage' });
    expect(bad.text).toMatch(/^Invalid request payload\n- date_from /);
    expect(bad.text).not.toContain('dateFrom');
    const tier = await fails(mcp, 'list_images', { resolution_tier: 'zz' });
    expect(tier.text).toContain('- resolution_tier must be');
    expect((await fails(mcp, 'list_images', { aspect_ratio: 'x'.repeat(21) })).text).toContain(
      'aspect_ratio must be at most 20 characters',
    );

    const active = await ok(mcp, 'list_active_executions', { limit: 200 });
    expect(active).toMatchObject({ success: true, total: expect.any(Number) });
    expect((await fails(mcp, 'list_active_executions', { limit: 201 })).text).toContain('limit must be <= 200');
  });

  it('generate_image with an unknown or another tenant’s scene_id answers the scene’s not-found error', async () => {
    const sceneB = await ok(mcpB, 'create_scene', { scene_name: 'b-scene', scene_prompt: 'a misty forest' });
    for (const id of [424242, sceneB.data.id]) {
      const r = await fails(mcp, 'generate_image', { prompt: 'a fox', scene_id: id });
      expect(r.text).toBe(`Scene preset with ID ${id} not found for this tenant`);
      expect(r.error.status).toBe(404);
    }
    const sceneA = await ok(mcp, 'create_scene', { scene_name: 'a-scene', scene_prompt: 'a misty forest' });
    const g = await ok(mcp, 'generate_image', { prompt: 'a fox', scene_id: sceneA.data.id });
    expect(g.images).toHaveLength(1);
  });
});
