import { connect, createServer, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { type Execution, type GenerateImagesResponse, UploadForEditingResponse } from '@imagegen/contracts/generation/v1/generation';
import type { ImageRecord } from '@imagegen/contracts/library/v1/library';
import {
  AppError,
  answerLost,
  bind,
  createClient,
  createLogger,
  dependencyUnavailable,
  fromServiceError,
  notFound,
  type Principal,
  type RunningGrpcServer,
  startGrpcServer,
  toServiceError,
} from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { GENERATE_DEADLINE_MS, generationCalls, toGeneratedImage, UPLOAD_DEADLINE_MS } from '../src/generation-calls.js';

/**
 * generationCalls (libs/operations generation-calls.ts): which failed calls count as a lost answer (for real, over
 * sockets), and what a caller answers from the execution it named (generation and library as test doubles).
 * The whole path through a gateway and an MCP server with replicas that die is test/e2e/generation-lost-answer.test.ts.
 */

const principal: Principal = { requestId: 'req-1', tenantId: 't1' };

// ---- answerLost, over real sockets ----

function jsonMethod(path: string): grpc.MethodDefinition<object, object> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: (v: object) => Buffer.from(JSON.stringify(v)),
    requestDeserialize: (b: Buffer) => JSON.parse(b.toString()),
    responseSerialize: (v: object) => Buffer.from(JSON.stringify(v)),
    responseDeserialize: (b: Buffer) => JSON.parse(b.toString()),
  };
}
const Svc = { hang: jsonMethod('/test.Lost/Hang'), unavailable: jsonMethod('/test.Lost/Unavailable') };

/** A server reached through a TCP front (no in-process shortcut: the calls go over the socket) that can be killed. */
async function startServer(): Promise<{ address: string; server: RunningGrpcServer; kill(): void; hanging(): number }> {
  let hanging = 0; // calls that reached the hang handler
  const server = await startGrpcServer({
    logger: createLogger('test', 'silent'),
    services: [
      bind(Svc, {
        hang: () => {
          hanging++;
          return new Promise<object>(() => {});
        },
        unavailable: async () => {
          throw dependencyUnavailable();
        },
      }),
    ],
  });
  const sockets = new Set<Socket>();
  const front = createServer((inbound) => {
    const outbound = connect(server.port, '127.0.0.1');
    for (const x of [inbound, outbound]) {
      sockets.add(x);
      x.on('close', () => sockets.delete(x));
      x.on('error', () => {});
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  return {
    address: `127.0.0.1:${(front.address() as { port: number }).port}`,
    server,
    hanging: () => hanging,
    kill() {
      front.close();
      for (const x of sockets) x.destroy();
    },
  };
}

/** The error a call ends with. */
const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (err: unknown) => err as AppError,
  );

describe('answerLost', () => {
  let s: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(async () => {
    s.kill();
    await s.server.stop(0);
  });

  test('the server process dies during the call (every connection dropped): lost, 503', async () => {
    const d = await startServer();
    const c = createClient(Svc, d.address);
    const call = failure(c.hang({}, principal));
    await waitFor(() => d.hanging() === 1, { message: 'the call in its handler' });
    d.kill();
    const err = await call;
    expect(err.status).toBe(503);
    expect(answerLost(err)).toBe(true);
    c.close();
    await d.server.stop(0);
  });

  test('the server is shut down by force during the call (its streams reset, CANCELLED): lost', async () => {
    const d = await startServer();
    const c = createClient(Svc, d.address);
    const call = failure(c.hang({}, principal));
    await waitFor(() => d.hanging() === 1, { message: 'the call in its handler' });
    await d.server.stop(0);
    const err = await call;
    expect(answerLost(err)).toBe(true);
    c.close();
    d.kill();
  });

  test('nothing listens (the call never reached a handler): lost, the execution lookup then finds none', async () => {
    const d = await startServer();
    d.kill();
    await d.server.stop(0);
    const c = createClient(Svc, d.address);
    const err = await failure(c.hang({}, principal, { timeoutMs: 3000 }));
    expect(err.status).toBe(503);
    expect(answerLost(err)).toBe(true);
    c.close();
  });

  test('not lost: the deadline passed, the caller cancelled, a handler answered 503', async () => {
    const c = createClient(Svc, s.address);
    const late = await failure(c.hang({}, principal, { timeoutMs: 150 }));
    expect(late.status).toBe(504);
    expect(answerLost(late)).toBe(false);

    const abort = new AbortController();
    const before = s.hanging();
    const cancelled = failure(c.hang({}, principal, { signal: abort.signal }));
    await waitFor(() => s.hanging() > before, { message: 'the call in its handler' });
    abort.abort();
    expect(answerLost(await cancelled)).toBe(false);

    const answered = await failure(c.unavailable({}, principal));
    expect(answered.status).toBe(503);
    expect(answered.headers['retry-after']).toBeTruthy();
    expect(answerLost(answered)).toBe(false);
    c.close();
  });

  test('only errors made by the transport: an AppError of the caller or anything else is not', () => {
    expect(answerLost(dependencyUnavailable())).toBe(false);
    expect(answerLost(new Error('Connection dropped'))).toBe(false);
    expect(answerLost(undefined)).toBe(false);
    const md = () => new grpc.Metadata();
    const transport = (code: grpc.status, details: string) =>
      answerLost(fromServiceError({ code, details, metadata: md() } as grpc.ServiceError, 'r'));
    expect(transport(grpc.status.UNAVAILABLE, 'Connection dropped')).toBe(true);
    expect(transport(grpc.status.CANCELLED, 'Call cancelled')).toBe(true);
    expect(transport(grpc.status.CANCELLED, 'Cancelled on client')).toBe(false);
    expect(transport(grpc.status.INTERNAL, 'Received RST_STREAM with code 2 (Internal server error)')).toBe(true);
    expect(transport(grpc.status.INTERNAL, 'Response message parsing error')).toBe(false);
    expect(transport(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded')).toBe(false);
    expect(transport(grpc.status.RESOURCE_EXHAUSTED, 'Received message larger than max')).toBe(false);
    // A handler's answer carries its body: never lost, whatever its code.
    const handler = toServiceError(dependencyUnavailable(), 'r') as grpc.ServiceError;
    expect(answerLost(fromServiceError(handler, 'r'))).toBe(false);
  });
});

// ---- generationCalls: what the caller answers ----

const lostError = () =>
  fromServiceError(
    { code: grpc.status.UNAVAILABLE, details: 'Connection dropped', metadata: new grpc.Metadata() } as grpc.ServiceError,
    'r',
  );

function record(id: number, over: Partial<ImageRecord> = {}): ImageRecord {
  return {
    id,
    tenantId: 't1',
    sessionId: 's1',
    objectKey: `tenants/t1/${id}.png`,
    thumbnailKey: `tenants/t1/${id}_thumb.webp`,
    fullUrl: `http://x/${id}.png`,
    thumbnailUrl: `http://x/${id}_thumb.webp`,
    width: 1024,
    height: 1024,
    sizeBytes: 1000 + id,
    thumbnailSizeBytes: 100,
    format: 'png',
    mimeType: 'image/png',
    prompt: 'a fox',
    negativePrompt: undefined,
    operation: 'generate',
    aspectRatio: '1:1',
    modelId: 'provA-flash-image',
    resolutionTier: '1k',
    parentImageId: undefined,
    stylePresetId: undefined,
    productReferenceId: undefined,
    characterId: undefined,
    referenceGroupIds: [],
    hasReferenceGroupIds: false,
    isReference: false,
    executionId: 'e1',
    hasSynthid: true,
    keyType: 'live',
    createdAt: '2026-01-01T00:00:00.000Z',
    thumbnailMimeType: 'image/webp',
    ...over,
  };
}

function execution(over: Partial<Execution>): Execution {
  return {
    executionId: 'e1',
    sessionId: 's1',
    toolName: 'generate_image',
    toolSource: 'tenant_api',
    status: 'completed',
    progressPercent: 100,
    currentStep: 'completed',
    startedAt: '2026-01-01T00:00:00.000Z',
    logEntries: [],
    modelId: 'provA-flash-image',
    logCount: 3,
    imageIds: [],
    imagesRequested: 0,
    position: 0,
    operation: '',
    presentation: '',
    cancelRequested: false,
    ...over,
  };
}

/**
 * Test doubles of generation and library. `outcomes` are the GetExecution answers in turn (the last repeats; an
 * Error is thrown); `listed` the image ids already listed; commitExecutionImages lists the ids it is given unless
 * `commitFails`.
 */
function doubles(opts: {
  call: (req: { executionId?: string }) => Promise<unknown>;
  outcomes?: (Execution | Error)[];
  listed?: number[];
  commitFails?: boolean;
}) {
  const seen = {
    calls: [] as { executionId?: string }[],
    deadlines: [] as (number | undefined)[],
    lookups: 0,
    commits: [] as { executionId: string; imageIds: number[] }[],
  };
  const listed = new Set(opts.listed ?? []);
  const outcomes = opts.outcomes ?? [];
  const answer = async (req: { executionId?: string }, _p: unknown, o?: { timeoutMs?: number }) => {
    seen.calls.push(req);
    seen.deadlines.push(o?.timeoutMs);
    return opts.call(req);
  };
  const calls = generationCalls({
    generation: {
      generateImages: answer as never,
      editImage: answer as never,
      uploadForEditing: answer as never,
      getExecution: async (req) => {
        const o = outcomes[Math.min(seen.lookups++, outcomes.length - 1)];
        if (o === undefined) throw notFound('Execution not found');
        if (o instanceof Error) throw o;
        expect(req.executionId).toBe(o.executionId);
        return o;
      },
    },
    library: {
      resolveImages: async ({ imageIds }) => ({
        images: imageIds.filter((i) => listed.has(i)).map((i) => record(i)),
        missingIds: imageIds.filter((i) => !listed.has(i)),
      }),
      commitExecutionImages: async (req) => {
        seen.commits.push({ executionId: req.executionId, imageIds: req.imageIds });
        if (opts.commitFails) throw dependencyUnavailable();
        for (const i of req.imageIds) listed.add(i);
        return { committed: req.imageIds.length };
      },
    },
    waits: { recoveryWaitMs: 800 },
  });
  return { calls, seen, list: (id: number) => listed.add(id) };
}

const completed = execution({ executionId: 'e1', imageIds: [7, 9], imagesRequested: 3 });
const rebuilt: GenerateImagesResponse = {
  images: [record(7), record(9)].map(toGeneratedImage),
  requested: 3,
  generated: 2,
  sessionId: 's1',
  executionId: 'e1',
};

describe('generationCalls', () => {
  test('a call without a deadline of its own waits as long as a generation may take, not the 30 s default', async () => {
    const ok = { images: [], requested: 1, generated: 1, sessionId: 's', executionId: 'x' };
    const d = doubles({ call: async () => ok });
    await d.calls.generateImages({ prompt: 'a' }, principal);
    await d.calls.editImage({ imageId: 1, prompt: 'b' }, principal);
    await d.calls.generateImages({ prompt: 'c' }, principal, { timeoutMs: 1234 });
    expect(d.seen.deadlines).toEqual([GENERATE_DEADLINE_MS, GENERATE_DEADLINE_MS, 1234]);
  });

  test('an upload without a deadline of its own gets the upload deadline (90 s), one with its own keeps it', async () => {
    const d = doubles({ call: async () => ({}) });
    await d.calls.uploadForEditing({ imageUrl: 'http://x/a.png' }, principal);
    await d.calls.uploadForEditing({ imageUrl: 'http://x/b.png' }, principal, { timeoutMs: 120_000 });
    expect(UPLOAD_DEADLINE_MS).toBe(90_000);
    expect(d.seen.deadlines).toEqual([UPLOAD_DEADLINE_MS, 120_000]);
  });

  test('every call names its execution: a fresh UUID each time, or the one the caller chose', async () => {
    const ok = { images: [], requested: 1, generated: 1, sessionId: 's', executionId: 'x' };
    const d = doubles({ call: async () => ok });
    expect(await d.calls.generateImages({ prompt: 'a' }, principal)).toBe(ok);
    await d.calls.editImage({ imageId: 1, prompt: 'b' }, principal);
    await d.calls.generateImages({ prompt: 'c', executionId: 'e-chosen' }, principal);
    await d.calls.uploadForEditing({ imageUrl: 'http://x/a.png' }, principal);
    await d.calls.uploadForEditing({ imageUrl: 'http://x/a.png', executionId: 'u-chosen' }, principal);
    const [a, b, c, u, v] = d.seen.calls.map((r) => r.executionId);
    expect(a).toMatch(/^[0-9a-f-]{36}$/);
    expect(b).toMatch(/^[0-9a-f-]{36}$/);
    expect(u).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set([a, b, u]).size).toBe(3);
    expect(c).toBe('e-chosen');
    expect(v).toBe('u-chosen');
    expect(d.seen.lookups).toBe(0);
  });

  test('answer lost, execution completed and its images listed: the answer a success gives', async () => {
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [completed], listed: [7, 9] });
    expect(await d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).toEqual(rebuilt);
    expect(d.seen.commits).toEqual([]);
  });

  test('edit: the edit answer of the execution`s image', async () => {
    const one = execution({ executionId: 'e1', imageIds: [9], imagesRequested: 1, toolName: 'edit_image' });
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [one], listed: [9] });
    expect(await d.calls.editImage({ imageId: 1, prompt: 'b', executionId: 'e1' }, principal)).toEqual({
      image: toGeneratedImage(record(9)),
      sessionId: 's1',
      executionId: 'e1',
    });
  });

  test('upload: the upload answer of the execution`s image, every field as the upload handler builds it', async () => {
    const one = execution({ executionId: 'u1', sessionId: 's9', imageIds: [12], imagesRequested: 1, toolName: 'upload_for_editing' });
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [one], listed: [12] });
    const r = await d.calls.uploadForEditing({ imageUrl: 'http://x/photo.png', executionId: 'u1' }, principal);
    // record(12) is what ResolveImages lists (its session is the record's own 's1'; the answer's is the execution's).
    expect(r).toEqual({
      imageId: 12,
      objectKey: 'tenants/t1/12.png',
      publicUrl: 'http://x/12.png',
      sizeBytes: 1012,
      mimeType: 'image/png',
      message: 'Image uploaded successfully. Use image_id 12 with POST /api/edit-image to edit it.',
      width: 1024,
      height: 1024,
      thumbnailUrl: 'http://x/12_thumb.webp',
      sessionId: 's9',
      executionId: 'u1',
    });
    expect(Object.keys(r).sort()).toEqual(Object.keys(UploadForEditingResponse.fromPartial({})).sort());
    expect(d.seen.commits).toEqual([]);
  });

  test('upload whose image is not listed yet: acknowledged, then answered', async () => {
    const one = execution({ executionId: 'u1', imageIds: [12], imagesRequested: 1, toolName: 'upload_for_editing' });
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [one], listed: [] });
    expect((await d.calls.uploadForEditing({ imageUrl: 'http://x/p.png', executionId: 'u1' }, principal)).imageId).toBe(12);
    expect(d.seen.commits).toEqual([{ executionId: 'u1', imageIds: [12] }]);
  });

  test('images not listed yet (the commit was lost with the replica): the caller acknowledges the completion', async () => {
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [completed], listed: [7] });
    expect(await d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).toEqual(rebuilt);
    expect(d.seen.commits).toEqual([{ executionId: 'e1', imageIds: [7, 9] }]);
  });

  test('the acknowledgement fails: waits for the library (its ExecutionFinished consumer) to list them', async () => {
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [completed], listed: [], commitFails: true });
    setTimeout(() => {
      d.list(7);
      d.list(9);
    }, 150);
    expect(await d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).toEqual(rebuilt);
    // Acknowledged again at each look that finds them missing, until they are listed.
    expect(d.seen.commits.length).toBeGreaterThanOrEqual(1);
    expect(d.seen.commits.every((c) => c.executionId === 'e1')).toBe(true);
  });

  test('images of a completed execution not listed by the end of the call`s deadline: the call`s own error stands', async () => {
    const lost = lostError();
    const d = doubles({ call: () => Promise.reject(lost), outcomes: [completed], listed: [], commitFails: true });
    const started = Date.now();
    await expect(d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal, { timeoutMs: 1500 })).rejects.toBe(lost);
    // Past the recovery bound (800 ms here): a completed execution's images are waited for as long as the call lasts.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1300);
    expect(d.seen.commits.length).toBeGreaterThan(1);
  });

  test('an execution that completes while it is read again (its last write landed late): answered', async () => {
    const running = execution({ status: 'running', progressPercent: 80 });
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [running, running, completed], listed: [7, 9] });
    expect(await d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).toEqual(rebuilt);
    expect(d.seen.lookups).toBe(3);
  });

  test('no replica answers the look-up past the recovery bound (the dead one restarting slowly): still read, then answered', async () => {
    let calls = 0;
    const d = doubles({ call: () => Promise.reject(lostError()), outcomes: [completed], listed: [7, 9] });
    const slow = generationCalls({
      generation: {
        generateImages: () => Promise.reject(lostError()),
        editImage: () => Promise.reject(lostError()),
        uploadForEditing: () => Promise.reject(lostError()),
        // Unreadable for 1.2 s, longer than the 800 ms recovery bound: a completed execution must still be found.
        getExecution: async () => {
          calls++;
          if (Date.now() - started < 1200) throw dependencyUnavailable();
          return completed;
        },
      },
      library: {
        resolveImages: async () => ({ images: [record(7), record(9)], missingIds: [] }),
        commitExecutionImages: async () => ({ committed: 0 }),
      },
      waits: { recoveryWaitMs: 800 },
    });
    const started = Date.now();
    expect(await slow.generateImages({ prompt: 'a', executionId: 'e1' }, principal, { timeoutMs: 5000 })).toEqual(rebuilt);
    expect(calls).toBeGreaterThan(1);
    expect(d.seen.lookups).toBe(0);
  });

  test('no replica answers the look-up at first (the dead one restarting): read again until it answers, then answered', async () => {
    const d = doubles({
      call: () => Promise.reject(lostError()),
      outcomes: [dependencyUnavailable(), dependencyUnavailable(), completed],
      listed: [7, 9],
    });
    expect(await d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).toEqual(rebuilt);
    expect(d.seen.lookups).toBe(3);
  });

  test('an execution that the reaper fails while it is read again: the call`s own error stands, nothing committed', async () => {
    const running = execution({ status: 'running', progressPercent: 80 });
    const failed = execution({ status: 'failed', error: 'Execution abandoned: the worker stopped' });
    const lost = lostError();
    const d = doubles({ call: () => Promise.reject(lost), outcomes: [running, running, failed], listed: [] });
    await expect(d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).rejects.toBe(lost);
    expect(d.seen.lookups).toBe(3);
    expect(d.seen.commits).toEqual([]);
  });

  test('running, failed, unknown, or the lookup fails: the call`s own error (503 + Retry-After) stands', async () => {
    const running = execution({ status: 'running' });
    const failed = execution({ status: 'failed', error: 'Execution abandoned: the worker stopped' });
    const cases: { outcomes: (Execution | Error)[]; lookups?: (n: number) => boolean }[] = [
      { outcomes: [running], lookups: (n) => n > 1 },
      { outcomes: [failed], lookups: (n) => n === 1 },
      { outcomes: [], lookups: (n) => n === 1 },
      // Not readable: read again until the call's deadline, then the error stands.
      { outcomes: [dependencyUnavailable()], lookups: (n) => n > 1 },
      // A completed execution without recorded images (finished before they were kept): nothing to answer from.
      { outcomes: [execution({ imageIds: [] })], lookups: (n) => n === 1 },
    ];
    for (const c of cases) {
      const lost = lostError();
      const d = doubles({ call: () => Promise.reject(lost), outcomes: c.outcomes, listed: [7, 9] });
      // A look-up that keeps failing is read again for as long as the call may last (here 1 s).
      const err = await failure(d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal, { timeoutMs: 1000 }));
      expect(err).toBe(lost);
      expect(err.status).toBe(503);
      expect(err.headers['retry-after']).toBeTruthy();
      expect(c.lookups?.(d.seen.lookups), JSON.stringify(c.outcomes)).toBe(true);
      expect(d.seen.commits).toEqual([]);
    }
  });

  test('upload: running, failed, unknown, or the lookup fails: the call`s own error stands', async () => {
    const upload = (over: Partial<Execution>) => execution({ toolName: 'upload_for_editing', imageIds: [12], imagesRequested: 1, ...over });
    const cases: (Execution | Error)[][] = [
      [upload({ status: 'running' })],
      [upload({ status: 'failed', imageIds: [], imagesRequested: 0, error: 'Failed to fetch image from URL: 404' })],
      [],
      [dependencyUnavailable()],
    ];
    for (const outcomes of cases) {
      const lost = lostError();
      const d = doubles({ call: () => Promise.reject(lost), outcomes, listed: [12] });
      const err = await failure(
        d.calls.uploadForEditing({ imageUrl: 'http://x/p.png', executionId: 'e1' }, principal, { timeoutMs: 1000 }),
      );
      expect(err, JSON.stringify(outcomes)).toBe(lost);
      expect(err.status).toBe(503);
      expect(err.headers['retry-after']).toBeTruthy();
      expect(d.seen.lookups).toBeGreaterThan(0);
      expect(d.seen.commits).toEqual([]);
    }
  });

  test('a call that reached no replica (generation down): its 503 stands at once, nothing looked up', async () => {
    const none = fromServiceError(
      {
        code: grpc.status.UNAVAILABLE,
        details: 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1',
        metadata: new grpc.Metadata(),
      } as grpc.ServiceError,
      'r',
    );
    const d = doubles({ call: () => Promise.reject(none), outcomes: [completed], listed: [7, 9] });
    await expect(d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).rejects.toBe(none);
    expect(d.seen.lookups).toBe(0);
  });

  test('not a lost answer (an answered error, a deadline, a cancel of the caller): rethrown as is, nothing looked up', async () => {
    const answered = fromServiceError(toServiceError(dependencyUnavailable(), 'r') as grpc.ServiceError, 'r');
    const deadline = fromServiceError(
      { code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded', metadata: new grpc.Metadata() } as grpc.ServiceError,
      'r',
    );
    for (const e of [answered, deadline, new AppError(400, { error: 'Invalid request payload' })]) {
      const d = doubles({ call: () => Promise.reject(e), outcomes: [completed], listed: [7, 9] });
      await expect(d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal)).rejects.toBe(e);
      expect(d.seen.lookups).toBe(0);
    }
    const abort = new AbortController();
    abort.abort();
    const lost = lostError();
    const d = doubles({ call: () => Promise.reject(lost), outcomes: [completed], listed: [7, 9] });
    await expect(d.calls.generateImages({ prompt: 'a', executionId: 'e1' }, principal, { signal: abort.signal })).rejects.toBe(lost);
    expect(d.seen.lookups).toBe(0);
  });
});
