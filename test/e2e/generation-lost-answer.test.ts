/**
 * The answer of a generation lost with its replica (README, "Faults, retries and billing"): a generation replica
 * that dies after it completed the execution (images listed and billed) and before its answer reached the caller.
 * The whole stack runs in this process; the callers under test (a second gateway and a second MCP server, the same
 * code as the stack's) reach generation through two "replicas": gRPC servers that forward every call to the real
 * generation service, each behind a TCP front the test can kill as a SIGKILL would (every connection dropped at once,
 * the caller sees UNAVAILABLE 'Connection dropped'). A replica armed with a fault dies:
 * - after-answer: once the real call answered, before passing the answer on (the window this closes);
 * - in-flight: while the real call runs (the real call is cancelled as a dead caller's would be, so generation ends
 *   the execution failed, as the orphan reaper does for a dead replica).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import {
  type GenerateImagesResponse,
  GenerationServiceService,
  type UploadForEditingResponse,
} from '@imagegen/contracts/generation/v1/generation';
import { characterImageJson, editImageJson, generatedImageJson, uploadForEditingJson } from '@imagegen/operations';
import {
  bind,
  createClient,
  createLogger,
  type Handlers,
  type RunningGrpcServer,
  type ServiceContext,
  startGrpcServer,
} from '@imagegen/platform';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../services/gateway/src/app.js';
import { start as startMcp } from '../../services/mcp/src/service.js';
import { type Api, createApi } from '../support/api.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { receivedSince } from './generation-support.js';
import { callTool, mcpClient } from './mcp-support.js';

type Fault = { kind: 'none' } | { kind: 'after-answer' } | { kind: 'in-flight'; atProvider: string };
type Waited = 'generateImages' | 'editImage' | 'uploadForEditing';

/** What a replica armed with a fault did: the execution it named and, for after-answer, the answer it never sent. */
interface Fired {
  method: Waited;
  executionId: string | undefined;
  answer?: unknown;
  error?: unknown;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let s: TestStack;
let t: TestTenant;
let gatewayApp: FastifyInstance;
let gateway: Api;
let mcp: { httpUrl?: string; stop(): Promise<void> };
/** The generation target of the callers under test: the two live replicas of the current test. */
let target = '';
let replicas: Replica[] = [];
/** The fault the next GenerateImages / EditImage / UploadForEditing meets (on whichever replica takes it), and what it did. */
let fault: Fault = { kind: 'none' };
let fired: Fired | undefined;
/** Execution ids the callers under test sent, per method. */
const sentIds: { method: string; executionId: string | undefined }[] = [];

interface Replica {
  address: string;
  dead: boolean;
  kill(): void;
  stop(): Promise<void>;
}

/** A TCP front to `to` whose kill() drops every connection at once and refuses new ones (a process gone). */
async function tcpFront(to: number): Promise<{ port: number; kill(): void }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(to, '127.0.0.1');
    for (const x of [inbound, outbound]) {
      sockets.add(x);
      x.on('close', () => sockets.delete(x));
      x.on('error', () => {});
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    kill() {
      server.close();
      for (const x of sockets) x.destroy();
    },
  };
}

/** One generation "replica": every call forwarded to the real service; GenerateImages / EditImage / UploadForEditing meet `fault`. */
async function startReplica(upstreamAddress: string): Promise<Replica> {
  const upstream = createClient(GenerationServiceService, upstreamAddress);
  let replica: Replica;
  const forwarded = Object.fromEntries(
    Object.keys(GenerationServiceService).map((name) => [
      name,
      (req: unknown, ctx: { principal: never; deadline?: Date; signal: AbortSignal }) =>
        (upstream as unknown as Record<string, (r: unknown, p: unknown, o: unknown) => Promise<unknown>>)[name](req, ctx.principal, {
          timeoutMs: ctx.deadline ? ctx.deadline.getTime() - Date.now() : undefined,
          signal: ctx.signal,
        }),
    ]),
  ) as unknown as Handlers<typeof GenerationServiceService>;
  const faulty =
    (method: Waited) =>
    async (req: { executionId?: string }, ctx: Parameters<Handlers<typeof GenerationServiceService>['generateImages']>[1]) => {
      sentIds.push({ method, executionId: req.executionId });
      const f = fault;
      fault = { kind: 'none' };
      if (f.kind === 'none') return (forwarded[method] as (r: unknown, c: unknown) => Promise<never>)(req, ctx);
      const cancel = new AbortController();
      ctx.signal.addEventListener('abort', () => cancel.abort());
      const real = (forwarded[method] as (r: unknown, c: unknown) => Promise<unknown>)(req, { ...ctx, signal: cancel.signal });
      fired = { method, executionId: req.executionId };
      const record = fired;
      if (f.kind === 'after-answer') {
        await real.then(
          (answer) => {
            record.answer = answer;
          },
          (error) => {
            record.error = error;
          },
        );
      } else {
        // Mid-work: the provider has the call (its prompt contains f.atProvider).
        await waitFor(async () => (await receivedSince(s, 0)).some((q) => q.prompt.includes(f.atProvider)), {
          message: `the call with '${f.atProvider}' at the provider`,
          interval: 50,
        });
        cancel.abort(); // the replica's own work dies with it
        real.catch(() => {});
      }
      replica.kill();
      return new Promise<never>(() => {}); // never answers: its process is gone
    };
  const handlers = {
    ...forwarded,
    generateImages: faulty('generateImages'),
    editImage: faulty('editImage'),
    uploadForEditing: faulty('uploadForEditing'),
  };
  const server: RunningGrpcServer = await startGrpcServer({
    logger: createLogger('replica', 'silent'),
    services: [bind(GenerationServiceService, handlers as unknown as Handlers<typeof GenerationServiceService>)],
  });
  // Callers reach the replica through its TCP front only (the front's address is no in-process server, so the
  // calls go over the socket, as between processes).
  const front = await tcpFront(server.port);
  replica = {
    address: `127.0.0.1:${front.port}`,
    dead: false,
    kill() {
      this.dead = true;
      front.kill();
    },
    async stop() {
      front.kill();
      await server.stop(0);
      upstream.close();
    },
  };
  return replica;
}

/** Two fresh replicas as the callers' generation target (a killed one stays dead, as a pod until it restarts). */
async function freshReplicas(): Promise<void> {
  await Promise.all(replicas.map((r) => r.stop()));
  const real = s.stack.ctx.resolve('generation');
  replicas = await Promise.all([startReplica(real), startReplica(real)]);
  target = `ipv4:${replicas.map((r) => r.address).join(',')}`;
  fault = { kind: 'none' };
  fired = undefined;
}

beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  t = await s.createTenant();
  const ctx: ServiceContext = {
    ...s.stack.ctx,
    resolve: (name) => (name === 'generation' ? target : s.stack.ctx.resolve(name)),
  };
  gatewayApp = await buildApp(ctx);
  await gatewayApp.listen({ port: 0, host: '127.0.0.1' });
  gateway = createApi(`http://127.0.0.1:${(gatewayApp.server.address() as { port: number }).port}`, s.adminToken);
  mcp = await startMcp({ ...ctx, config: { ...ctx.config, httpPort: 0 } });
  await freshReplicas();
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await gatewayApp?.close();
  await mcp?.stop();
  await s?.stop();
});

const imagesOfSession = async (sessionId: string) => {
  const r = await s.api(`/api/images?sessionId=${encodeURIComponent(sessionId)}&limit=100`, { key: t.liveKey });
  expect(r.status).toBe(200);
  return (r.body.data as { id: number }[]).map((i) => i.id).sort((a, b) => a - b);
};

const executionOf = async (executionId: string) => {
  const r = await s.api(`/api/executions/${executionId}`, { key: t.liveKey });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.execution;
};

describe('a generation replica that dies before its answer is sent', () => {
  it('POST /api/images names its execution and, when the replica dies after completing it, answers 200 with exactly the lost answer', async () => {
    await freshReplicas();
    // Without a fault: every call names its execution with a fresh UUID, which the answer carries.
    const plain = await gateway('/api/images', { key: t.liveKey, body: { prompt: 'a quiet harbour', n: 1 } });
    expect(plain.status).toBe(200);
    const firstSent = sentIds.at(-1);
    expect(firstSent?.executionId).toMatch(UUID);
    expect(plain.body.data.executionId).toBe(firstSent?.executionId);

    fault = { kind: 'after-answer' };
    const r = await gateway('/api/images', { key: t.liveKey, body: { prompt: 'a lighthouse in the fog', n: 2 } });
    expect(fired?.answer, 'the replica died after the real call answered').toBeDefined();
    expect(replicas.filter((x) => x.dead)).toHaveLength(1);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const lost = fired?.answer as GenerateImagesResponse;
    expect(lost.executionId).toBe(fired?.executionId);
    expect(lost.executionId).not.toBe(firstSent?.executionId);
    // Exactly what the success would have answered: same images (every field), metadata and execution id.
    expect(r.body).toEqual({
      data: {
        images: lost.images.map(generatedImageJson),
        metadata: { requested: 2, generated: 2, session_id: lost.sessionId },
        executionId: lost.executionId,
      },
    });
    expect(Object.keys(r.body.data.images[0]).sort()).toEqual(Object.keys(plain.body.data.images[0]).sort());
    // Listed (hence billed) are exactly the images the client was told of.
    expect(await imagesOfSession(lost.sessionId)).toEqual(lost.images.map((i) => i.recordId).sort((a, b) => a - b));
    expect((await executionOf(lost.executionId)).status).toBe('completed');
  });

  it('POST /api/edit-image: the same, in the edit answer shape', async () => {
    await freshReplicas();
    const source = await gateway('/api/images', { key: t.liveKey, body: { prompt: 'a red kite', n: 1 } });
    expect(source.status).toBe(200);
    const sourceId = source.body.data.images[0].record_id as number;

    fault = { kind: 'after-answer' };
    const r = await gateway('/api/edit-image', { key: t.liveKey, body: { image_id: sourceId, prompt: 'make it blue' } });
    expect(fired?.method).toBe('editImage');
    expect(fired?.executionId).toMatch(UUID);
    expect(fired?.answer).toBeDefined();
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual(editImageJson(fired?.answer as Parameters<typeof editImageJson>[0], sourceId));
    expect(r.body.parentImageId).toBe(sourceId);
  });

  it('POST /api/upload-for-editing: the same, in the upload answer shape (every field), the upload listed once', async () => {
    await freshReplicas();
    // A public URL to fetch: an image of the stack's own storage (the test stack allows loopback fetches).
    const source = await s.api('/api/images', { key: t.liveKey, body: { prompt: 'a stone bridge', n: 1 } });
    expect(source.status).toBe(200);
    const imageUrl = source.body.data.images[0].full_url as string;
    const sessionId = `lost-upload-${Date.now()}`;

    const plain = await gateway('/api/upload-for-editing', { key: t.liveKey, body: { image_url: imageUrl, file_name: 'plain.png' } });
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    expect(sentIds.at(-1)).toEqual({ method: 'uploadForEditing', executionId: plain.body.execution_id });
    expect(plain.body.execution_id).toMatch(UUID);

    fault = { kind: 'after-answer' };
    const r = await gateway('/api/upload-for-editing', {
      key: t.liveKey,
      body: { image_url: imageUrl, file_name: 'bridge.png', session_id: sessionId },
    });
    expect(fired?.method).toBe('uploadForEditing');
    expect(fired?.executionId).toMatch(UUID);
    expect(fired?.answer, 'the replica died after the real call answered').toBeDefined();
    expect(replicas.filter((x) => x.dead)).toHaveLength(1);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const lost = fired?.answer as UploadForEditingResponse;
    expect(lost.executionId).toBe(fired?.executionId);
    expect(lost.sessionId).toBe(sessionId);
    expect(r.body).toEqual(uploadForEditingJson(lost));
    expect(Object.keys(r.body).sort()).toEqual(Object.keys(plain.body).sort());
    expect(await imagesOfSession(sessionId)).toEqual([lost.imageId]);
    expect((await executionOf(lost.executionId)).status).toBe('completed');
  });

  it('POST /api/characters/:id/generate (a route composing GenerateImages): the same', async () => {
    await freshReplicas();
    const name = `Lost answer ${Date.now()}`;
    const c = await s.api('/api/characters', {
      key: t.liveKey,
      body: { character_name: name, base_prompt: 'a tall knight in silver armour' },
    });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    fault = { kind: 'after-answer' };
    const r = await gateway(`/api/characters/${c.body.data.id}/generate`, { key: t.liveKey, body: { scene_prompt: 'guarding a gate' } });
    expect(fired?.executionId).toMatch(UUID);
    expect(fired?.answer).toBeDefined();
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const lost = fired?.answer as GenerateImagesResponse;
    expect(r.body).toEqual({ data: characterImageJson(lost, name, r.body.data.thumbnailSizeBytes) });
    expect(r.body.data.thumbnailSizeBytes).toBeGreaterThan(0);
  });

  it('a replica that dies mid-work: 503 with Retry-After, the execution ends failed and nothing of it is listed', async () => {
    await freshReplicas();
    fault = { kind: 'in-flight', atProvider: 'a slow sunrise' };
    const sessionId = `lost-midwork-${Date.now()}`;
    const r = await gateway('/api/images', {
      key: t.liveKey,
      body: { prompt: 'a slow sunrise [[delay:1500]]', n: 1, session_id: sessionId },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.headers.get('retry-after')).toBeTruthy();
    const executionId = fired?.executionId as string;
    expect(executionId).toMatch(UUID);
    // The replica's work was cancelled with it: the execution ends failed, its pending image is discarded.
    const ended = await waitFor(
      async () => {
        const e = await executionOf(executionId);
        return e.status !== 'running' && e;
      },
      { message: 'the execution to end', interval: 100 },
    );
    expect(ended.status).toBe('failed');
    // Nothing of it is listed, also once the provider has answered the dead replica's call (work that went on
    // would have its image from then on).
    await waitFor(async () => (await receivedSince(s, 0)).some((q) => q.prompt.includes('a slow sunrise') && q.status !== 0), {
      message: "the provider's answer to the cancelled call",
      interval: 100,
    });
    expect(await imagesOfSession(sessionId)).toEqual([]);
  });

  it('a failed execution whose answer is lost: 503 with Retry-After, as before', async () => {
    await freshReplicas();
    fault = { kind: 'after-answer' };
    const r = await gateway('/api/images', { key: t.liveKey, body: { prompt: 'no luck [[fail:500]]', n: 1 } });
    expect(fired?.error, 'the real call failed').toBeDefined();
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.headers.get('retry-after')).toBeTruthy();
    expect((await executionOf(fired?.executionId as string)).status).toBe('failed');
  });

  it('MCP generate_image: the same recovery (one shared place), the tool result is the lost answer', async () => {
    await freshReplicas();
    const client = await mcpClient(mcp.httpUrl as string, t.liveKey);
    try {
      fault = { kind: 'after-answer' };
      const r = await callTool(client, 'generate_image', { prompt: 'a paper boat', n: 1 });
      expect(fired?.answer).toBeDefined();
      expect(r.ok, r.text).toBe(true);
      const lost = fired?.answer as GenerateImagesResponse;
      expect(r.json).toEqual({
        images: lost.images.map(generatedImageJson),
        metadata: { requested: 1, generated: 1, session_id: lost.sessionId },
        executionId: lost.executionId,
      });
      expect(r.images).toHaveLength(1); // the thumbnail, as a success sends it
    } finally {
      await client.close();
    }
  });

  it('MCP upload_image_for_editing: the same, the tool result is the lost upload answer', async () => {
    await freshReplicas();
    const source = await s.api('/api/images', { key: t.liveKey, body: { prompt: 'a windmill', n: 1 } });
    expect(source.status).toBe(200);
    const client = await mcpClient(mcp.httpUrl as string, t.liveKey);
    try {
      fault = { kind: 'after-answer' };
      const r = await callTool(client, 'upload_image_for_editing', {
        image_url: source.body.data.images[0].full_url,
        file_name: 'mill.png',
      });
      expect(fired?.method).toBe('uploadForEditing');
      expect(fired?.answer).toBeDefined();
      expect(r.ok, r.text).toBe(true);
      expect(r.json).toEqual(uploadForEditingJson(fired?.answer as UploadForEditingResponse));
      expect(r.images).toHaveLength(1); // the thumbnail, as a success sends it
    } finally {
      await client.close();
    }
  });

  it('an upload refused by the service whose answer is lost: 503 with Retry-After, the execution failed, nothing listed', async () => {
    await freshReplicas();
    const sessionId = `lost-upload-refused-${Date.now()}`;
    fault = { kind: 'after-answer' };
    // Nothing listens on port 9 of loopback: the fetch fails (a 400 the replica never passes on).
    const r = await gateway('/api/upload-for-editing', {
      key: t.liveKey,
      body: { image_url: 'http://127.0.0.1:9/missing.png', session_id: sessionId },
    });
    expect(fired?.method).toBe('uploadForEditing');
    expect(fired?.error, 'the real call failed').toBeDefined();
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.headers.get('retry-after')).toBeTruthy();
    expect((await executionOf(fired?.executionId as string)).status).toBe('failed');
    expect(await imagesOfSession(sessionId)).toEqual([]);
  });
});
