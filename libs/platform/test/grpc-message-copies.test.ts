import { GetImageDataResponse, ImageRecord, LibraryServiceService, StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bind, configureGrpcClients, createClient, type Principal, type RunningGrpcServer, startGrpcServer } from '../src/grpc.js';
import { createLogger } from '../src/logger.js';

// An in-process call copies a contract's messages with their types' fromPartial instead of going through the wire
// form: what the handler and the caller see must be what a socket call gives them, field for field.

type Def = typeof LibraryServiceService;
const principal: Principal = { requestId: 'req-copies', tenantId: 'acme', keyType: 'live' };

/** What each handler last received. */
const received = new Map<string, unknown>();
/** What each handler answers: whole messages (as their types demand), with a property the contract does not know. */
const answers: Record<string, unknown> = {
  storeImage: {
    ...ImageRecord.fromPartial({ id: 42, tenantId: 'acme', prompt: 'a fox', referenceGroupIds: [3, 4], hasReferenceGroupIds: true }),
    notInTheContract: 'x',
  },
  getImageData: GetImageDataResponse.fromPartial({
    image: { id: 7, width: 1024, height: 768, negativePrompt: 'blurry', stylePresetId: 0 },
    data: Buffer.from('small bytes'),
    mimeType: 'image/png',
  }),
  commitExecutionImages: { committed: 3 },
};

let server: RunningGrpcServer;
beforeAll(async () => {
  const handlers = Object.fromEntries(
    Object.keys(LibraryServiceService).map((name) => [
      name,
      async (req: Record<string, unknown>) => {
        received.set(name, { ...req });
        req.prompt = 'changed by the handler'; // must not reach the caller's object
        return answers[name] ?? {};
      },
    ]),
  );
  server = await startGrpcServer({
    logger: createLogger('test', 'silent'),
    services: [bind(LibraryServiceService, handlers as never)],
  });
});
afterAll(async () => {
  configureGrpcClients({ deadlineMs: 30_000, inProcess: true });
  await server.stop();
});

/** One call of `method` with `req`, over the socket or in process: what the handler received and what came back. */
async function callBoth(method: keyof Def, req: Record<string, unknown>) {
  const out: { received: unknown; answer: unknown }[] = [];
  for (const inProcess of [false, true]) {
    configureGrpcClients({ deadlineMs: 30_000, inProcess });
    const client = createClient(LibraryServiceService, server.address);
    const mine = { ...req };
    const answer = await (client[method] as (r: unknown, p: Principal) => Promise<unknown>)(mine, principal);
    client.close();
    expect(mine).toEqual(req); // the caller's object is its own
    out.push({ received: received.get(method), answer });
  }
  return { socket: out[0], inProcess: out[1] };
}

describe('in-process calls copy messages as a socket call decodes them', () => {
  test('a request with optional, repeated, bytes and unknown fields; a response with an unknown field', async () => {
    const req = {
      ...StoreImageRequest.fromPartial({
        tenantId: 'acme',
        sessionId: 's-1',
        data: Buffer.from('not really a png'),
        mimeType: 'image/png',
        prompt: 'a fox',
        negativePrompt: 'blurry',
        parentImageId: 0, // an optional field set to its default keeps its presence
        referenceGroupIds: [1, 2],
        tokens: 1290,
      }),
      notInTheContract: 'dropped',
    };
    const { socket, inProcess } = await callBoth('storeImage', req);
    expect(inProcess.received).toEqual(socket.received);
    expect(inProcess.answer).toEqual(socket.answer);
    expect(socket.received).toMatchObject({ operation: '', isReference: false, parentImageId: 0, stylePresetId: undefined });
    expect(socket.received).not.toHaveProperty('notInTheContract');
    expect(socket.answer).toMatchObject({ id: 42, width: 0, negativePrompt: undefined, referenceGroupIds: [3, 4] });
    expect(inProcess.answer).not.toBe(answers.storeImage);
    expect(socket.answer).not.toHaveProperty('notInTheContract');
  });

  test('a nested message and bytes in the response', async () => {
    const { socket, inProcess } = await callBoth('getImageData', { imageId: 7 });
    expect(inProcess.received).toEqual(socket.received);
    expect(inProcess.answer).toEqual(socket.answer);
    expect(socket.answer).toMatchObject({ image: { id: 7, width: 1024, prompt: '', negativePrompt: 'blurry', stylePresetId: 0 } });
  });

  test('a message its type refuses (a field missing, only possible through a cast) fails in process as over the socket', async () => {
    for (const inProcess of [false, true]) {
      configureGrpcClients({ deadlineMs: 30_000, inProcess });
      const client = createClient(LibraryServiceService, server.address);
      await expect(client.getImageData({} as never, principal)).rejects.toMatchObject({ status: 500 });
      client.close();
    }
  });

  test('ids and lists cross both ways', async () => {
    const { socket, inProcess } = await callBoth('commitExecutionImages', { tenantId: 'acme', executionId: 'e-1', imageIds: [5] });
    expect(inProcess.received).toEqual(socket.received);
    expect(inProcess.answer).toEqual(socket.answer);
  });

  test('the copy shares no object with the handler: a change to the answer after the call does not reach the caller', async () => {
    configureGrpcClients({ deadlineMs: 30_000, inProcess: true });
    const client = createClient(LibraryServiceService, server.address);
    const answer = (await client.storeImage(StoreImageRequest.fromPartial({ tenantId: 'acme' }), principal)) as {
      referenceGroupIds: number[];
    };
    client.close();
    expect(answer.referenceGroupIds).toEqual([3, 4]);
    expect(answer.referenceGroupIds).not.toBe((answers.storeImage as { referenceGroupIds: number[] }).referenceGroupIds);
  });
});
