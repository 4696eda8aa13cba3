import { randomUUID } from 'node:crypto';
import { GenerationServiceService } from '@imagegen/contracts/generation/v1/generation';
import { type AppError, createClient, type Principal } from '@imagegen/platform';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { jsonOf, mcpClient, textOf } from './mcp-support.js';

/**
 * MCP generation tools follow exactly their own execution: they choose its id (GenerateImages/EditImage
 * execution_id) instead of looking for it among the session's executions, where another call of the same
 * tool in the same session (running, or finished a moment ago) could be taken for it.
 */

let stack: TestStack;
let a: TestTenant;
let b: TestTenant;
let mcp: Client;
let generation: ReturnType<typeof createClient<typeof GenerationServiceService>>;

beforeAll(async () => {
  stack = await startTestStack();
  [a, b] = await Promise.all([stack.createTenant({ rate_limit_per_minute: 1000 }), stack.createTenant({ rate_limit_per_minute: 1000 })]);
  mcp = await mcpClient(stack.baseUrl, a.liveKey);
  generation = createClient(GenerationServiceService, () => stack.stack.ctx.resolve('generation'));
});

afterAll(async () => {
  await mcp?.close();
  generation?.close();
  await stack?.stop();
});

async function tool(name: string, args: Record<string, unknown>) {
  const result = await mcp.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
  expect(result.isError, `${name}: ${textOf(result)}`).toBeFalsy();
  return jsonOf(result);
}

/** Starts generate_image with async=true; returns its execution id. */
async function startAsync(prompt: string, sessionId: string): Promise<string> {
  const started = await tool('generate_image', { prompt, async: true, session_id: sessionId });
  expect(started.status).toBe('queued');
  return started.executionId as string;
}

/** The MCP tool wait_for_execution (the server waits; no polling here). */
async function waitForExecution(executionId: string) {
  const done = await tool('wait_for_execution', { execution_id: executionId, timeout_seconds: 30 });
  expect(done.done).toBe(true);
  return done;
}

const principal = (tenantId: string): Principal => ({ requestId: randomUUID(), tenantId, keyType: 'live', source: 'tenant_api' });

describe('MCP async generation tracks its own execution', () => {
  it('is not confused by a call of the same tool in the same session that just finished', async () => {
    const session = `mcp-async-${randomUUID()}`;
    const first = await tool('generate_image', { prompt: 'a finished heron', session_id: session });
    const id = await startAsync('a slow kingfisher [[delay:1500]]', session);
    expect(id).not.toBe(first.executionId);
    const done = await waitForExecution(id);
    expect(done.execution).toMatchObject({ executionId: id, status: 'completed', toolName: 'generate_image', toolSource: 'mcp' });
    expect(done.result.executionId).toBe(id);
    expect(done.result.images).toHaveLength(1);
    expect(done.result.images[0].prompt).toContain('kingfisher');
  });

  it('two concurrent calls of the same tool in one session each get their own execution and result', async () => {
    const session = `mcp-async-${randomUUID()}`;
    const [x, y] = await Promise.all([
      startAsync('a slow otter [[delay:1200]]', session),
      startAsync('a slow badger [[delay:600]]', session),
    ]);
    expect(x).not.toBe(y);
    const [dx, dy] = await Promise.all([waitForExecution(x), waitForExecution(y)]);
    expect(dx.result.executionId).toBe(x);
    expect(dy.result.executionId).toBe(y);
    expect(dx.result.images[0].prompt).toContain('otter');
    expect(dy.result.images[0].prompt).toContain('badger');
    for (const id of [x, y]) {
      const e = await tool('get_execution', { execution_id: id });
      expect(e.execution).toMatchObject({ executionId: id, sessionId: session, toolName: 'generate_image', status: 'completed' });
    }
  });
});

describe('GenerateImages / EditImage execution_id', () => {
  it('creates the execution with the caller’s id', async () => {
    const executionId = randomUUID();
    const res = await generation.generateImages({ prompt: 'a chosen id', n: 1, executionId }, principal(a.tenantId));
    expect(res.executionId).toBe(executionId);
    const e = await generation.getExecution({ executionId, includeLogs: false }, principal(a.tenantId));
    expect(e).toMatchObject({ executionId, status: 'completed', sessionId: res.sessionId });

    const editId = randomUUID().toUpperCase();
    const edited = await generation.editImage(
      { imageId: res.images[0].recordId, prompt: 'at night', executionId: editId },
      principal(a.tenantId),
    );
    expect(edited.executionId).toBe(editId.toLowerCase());
  });

  it('refuses ids that are not UUIDs (400) and ids already used, also by another tenant (409)', async () => {
    const err = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: AppError) => ({ status: e.status, body: e.body }),
      );
    for (const bad of ['', 'abc', `${randomUUID()}x`, '00000000000000000000000000000000']) {
      expect(await err(generation.generateImages({ prompt: 'x', executionId: bad }, principal(a.tenantId)))).toEqual({
        status: 400,
        body: { error: 'Invalid request payload', details: ['execution_id must be a UUID'] },
      });
    }
    expect(await err(generation.editImage({ imageId: 1, prompt: 'x', executionId: 'nope' }, principal(a.tenantId)))).toMatchObject({
      status: 400,
    });

    const used = randomUUID();
    await generation.generateImages({ prompt: 'first use', n: 1, executionId: used }, principal(a.tenantId));
    const conflict = { status: 409, body: { error: `Execution ${used} already exists` } };
    expect(await err(generation.generateImages({ prompt: 'second use', n: 1, executionId: used }, principal(a.tenantId)))).toEqual(
      conflict,
    );
    // Another tenant cannot take it either, and learns nothing about the execution.
    expect(await err(generation.generateImages({ prompt: 'other tenant', n: 1, executionId: used }, principal(b.tenantId)))).toEqual(
      conflict,
    );
    expect(await err(generation.getExecution({ executionId: used, includeLogs: false }, principal(b.tenantId)))).toMatchObject({
      status: 404,
    });

    // Two calls racing with one new id: one execution, the other call refused.
    const racing = randomUUID();
    const outcomes = await Promise.allSettled([
      generation.generateImages({ prompt: 'race one [[delay:300]]', n: 1, executionId: racing }, principal(a.tenantId)),
      generation.generateImages({ prompt: 'race two [[delay:300]]', n: 1, executionId: racing }, principal(a.tenantId)),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    const rejected = outcomes.filter((o) => o.status === 'rejected') as PromiseRejectedResult[];
    expect(rejected.map((r) => (r.reason as AppError).status)).toEqual([409]);
  });
});

describe('UploadForEditing execution_id', () => {
  const err = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: AppError) => ({ status: e.status, body: e.body }),
    );
  /** A public URL to upload: an image of the stack's own storage (the test stack allows loopback fetches). */
  const imageUrl = async () => (await generation.generateImages({ prompt: 'to upload', n: 1 }, principal(a.tenantId))).images[0].fullUrl;

  it('creates the execution with the caller’s id, which records the uploaded image', async () => {
    const url = await imageUrl();
    const executionId = randomUUID().toUpperCase();
    const res = await generation.uploadForEditing({ imageUrl: url, fileName: 'chosen.png', executionId }, principal(a.tenantId));
    expect(res.executionId).toBe(executionId.toLowerCase());
    const e = await generation.getExecution({ executionId: res.executionId, includeLogs: false }, principal(a.tenantId));
    expect(e).toMatchObject({
      executionId: res.executionId,
      status: 'completed',
      toolName: 'upload_for_editing',
      sessionId: res.sessionId,
      imageIds: [res.imageId],
      imagesRequested: 1,
    });
  });

  it('refuses ids that are not UUIDs (400) and ids already used, by an upload or a generation, also by another tenant (409)', async () => {
    const url = await imageUrl();
    for (const bad of ['', 'abc', `${randomUUID()}x`]) {
      expect(await err(generation.uploadForEditing({ imageUrl: url, executionId: bad }, principal(a.tenantId)))).toEqual({
        status: 400,
        body: { error: 'Invalid request payload', details: ['execution_id must be a UUID'] },
      });
    }

    const used = randomUUID();
    await generation.uploadForEditing({ imageUrl: url, executionId: used }, principal(a.tenantId));
    const conflict = { status: 409, body: { error: `Execution ${used} already exists` } };
    expect(await err(generation.uploadForEditing({ imageUrl: url, executionId: used }, principal(a.tenantId)))).toEqual(conflict);
    expect(await err(generation.uploadForEditing({ imageUrl: url, executionId: used }, principal(b.tenantId)))).toEqual(conflict);
    expect(await err(generation.generateImages({ prompt: 'after an upload', n: 1, executionId: used }, principal(a.tenantId)))).toEqual(
      conflict,
    );
    const generated = (await generation.generateImages({ prompt: 'before an upload', n: 1 }, principal(a.tenantId))).executionId;
    expect(await err(generation.uploadForEditing({ imageUrl: url, executionId: generated }, principal(a.tenantId)))).toEqual({
      status: 409,
      body: { error: `Execution ${generated} already exists` },
    });
  });
});
