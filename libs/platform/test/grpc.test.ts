import { AsyncLocalStorage } from 'node:async_hooks';
import type { MethodDefinition } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AppError, badRequest, quotaExceeded } from '../src/errors.js';
import { bind, configureGrpcClients, createClient, type Principal, type RunningGrpcServer, startGrpcServer } from '../src/grpc.js';
import { createLogger } from '../src/logger.js';
import { metricsText } from '../src/metrics.js';

// A hand-written JSON-serialized service definition, shaped like ts-proto's grpc-js output.
function jsonMethod<Req, Res>(path: string): MethodDefinition<Req, Res> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: (v: Req) => Buffer.from(JSON.stringify(v)),
    requestDeserialize: (b: Buffer) => JSON.parse(b.toString()),
    responseSerialize: (v: Res) => Buffer.from(JSON.stringify(v)),
    responseDeserialize: (b: Buffer) => JSON.parse(b.toString()),
  };
}
/** A message with a bytes field on the wire: [name length][name][data]; `name` defaults to 'unnamed' on decoding. */
type Blob = { name?: string; data: Uint8Array };
const blobCodec = {
  serialize: (v: Blob) => {
    const name = Buffer.from(v.name ?? '');
    return Buffer.concat([Buffer.from([name.length]), name, Buffer.from(v.data)]);
  },
  deserialize: (b: Buffer): Blob => ({ name: b.subarray(1, 1 + b[0]).toString() || 'unnamed', data: new Uint8Array(b.subarray(1 + b[0])) }),
};
/** What the blob handler last received (an in-process call hands large byte fields over by reference). */
let blobReceived: Blob | undefined;
const EchoService = {
  blob: {
    path: '/test.Echo/Blob',
    requestStream: false,
    responseStream: false,
    requestSerialize: blobCodec.serialize,
    requestDeserialize: blobCodec.deserialize,
    responseSerialize: blobCodec.serialize,
    responseDeserialize: blobCodec.deserialize,
  } as MethodDefinition<Blob, Blob>,
  echo: jsonMethod<{ text: string }, { text: string; principal: Principal; callerContext?: string }>('/test.Echo/Echo'),
  fail: jsonMethod<{ kind: string }, object>('/test.Echo/Fail'),
  slow: jsonMethod<{ ms: number }, object>('/test.Echo/Slow'),
};

/** Only a handler run in the caller's own async context (an in-process call) can see the caller's store. */
const callerContext = new AsyncLocalStorage<string>();

let server: RunningGrpcServer;
const calls: { method: string; code: number }[] = [];
beforeAll(async () => {
  server = await startGrpcServer({
    logger: createLogger('test', 'silent'),
    onCall: (method, code) => calls.push({ method, code }),
    services: [
      bind(EchoService, {
        blob: async (req) => {
          blobReceived = req;
          return { data: req.data };
        },
        echo: async (req, ctx) => {
          const text = req.text;
          req.text = 'changed by the handler'; // must not reach the caller's object
          return { text, principal: ctx.principal, callerContext: callerContext.getStore() };
        },
        fail: async (req) => {
          if (req.kind === 'bad') throw badRequest('Invalid request payload', ['prompt is required']);
          if (req.kind === 'quota') throw quotaExceeded();
          if (req.kind === 'retry') throw new AppError(429, { error: 'Rate limit exceeded', retryAfter: 3 }, { 'retry-after': '3' });
          throw new Error('secret database password leaked in message');
        },
        slow: async (req) => {
          await new Promise((r) => setTimeout(r, req.ms));
          return {};
        },
      }),
    ],
  });
});
afterAll(async () => {
  configureGrpcClients({ deadlineMs: 30_000, inProcess: true });
  await server.stop();
});

// Every behaviour holds the same over the loopback socket and for a server in this same process.
describe.each([
  ['over the loopback socket', false],
  ['in process', true],
])('gRPC helpers, %s', (_how, inProcess) => {
  beforeAll(() => configureGrpcClients({ deadlineMs: 30_000, inProcess }));

  const principal: Principal = {
    requestId: 'req-12345678',
    tenantId: 'acme',
    keyType: 'live',
    scopes: ['images:read', 'images:generate'],
    sessionId: 'session with ünïcode',
    source: 'mcp',
  };

  test('round trip carries the principal in metadata', async () => {
    const client = createClient(EchoService, server.address);
    const res = await client.echo({ text: 'hi' }, principal);
    expect(res.text).toBe('hi');
    expect(res.principal).toEqual(principal);
    client.close();
  });

  test(inProcess ? 'takes the in-process path, copying the request' : 'takes the socket', async () => {
    const client = createClient(EchoService, server.address);
    const req = { text: 'mine' };
    const res = await callerContext.run('caller', () => client.echo(req, principal));
    expect(res.callerContext).toBe(inProcess ? 'caller' : undefined);
    expect(req.text).toBe('mine');
    expect(res.text).toBe('mine');
    client.close();
  });

  test(
    inProcess ? 'large byte fields are handed over as they are, the rest goes through the wire form' : 'byte fields cross the wire',
    async () => {
      const client = createClient(EchoService, server.address);
      const large = new Uint8Array(64 * 1024).fill(7);
      const small = new Uint8Array(100).fill(3);
      const res = await client.blob({ data: large }, principal);
      expect(blobReceived?.name).toBe('unnamed'); // decoded from the wire form either way
      expect(blobReceived?.data === large).toBe(inProcess);
      expect(res.data === large).toBe(inProcess);
      expect(Buffer.from(res.data).equals(Buffer.from(large))).toBe(true);
      await client.blob({ name: 'small', data: small }, principal);
      expect(blobReceived?.name).toBe('small');
      expect(blobReceived?.data === small).toBe(false); // small ones are copied, as on the wire
      expect(Buffer.from(blobReceived?.data ?? []).equals(Buffer.from(small))).toBe(true);
      client.close();
    },
  );

  test('AppError crosses the wire with status, body and headers intact', async () => {
    const client = createClient(EchoService, server.address);
    await expect(client.fail({ kind: 'bad' }, principal)).rejects.toMatchObject({
      status: 400,
      body: { error: 'Invalid request payload', details: ['prompt is required'] },
    });
    await expect(client.fail({ kind: 'quota' }, principal)).rejects.toMatchObject({
      status: 402,
      body: { error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' },
    });
    await expect(client.fail({ kind: 'retry' }, principal)).rejects.toMatchObject({
      status: 429,
      headers: { 'retry-after': '3' },
    });
    client.close();
  });

  test('unknown errors become 500 with the request id and no internals', async () => {
    const client = createClient(EchoService, server.address);
    const err = (await client.fail({ kind: 'boom' }, principal).catch((e) => e)) as AppError;
    expect(err.status).toBe(500);
    expect(err.body).toEqual({ error: 'Internal server error', requestId: 'req-12345678' });
    expect(JSON.stringify(err.body)).not.toContain('password');
    client.close();
  });

  test('a request that cannot be serialized fails with 500, before any handler runs', async () => {
    const client = createClient(EchoService, server.address);
    const before = calls.length;
    const err = (await client.echo({ text: 10n as unknown as string }, principal).catch((e) => e)) as AppError;
    expect(err).toBeInstanceOf(AppError);
    expect(err.status).toBe(500);
    expect(calls.length).toBe(before);
    client.close();
  });

  test('deadlines are enforced and map to 504', async () => {
    const client = createClient(EchoService, server.address);
    const err = (await client.slow({ ms: 500 }, principal, { timeoutMs: 50 }).catch((e) => e)) as AppError;
    expect(err.status).toBe(504);
    client.close();
  });

  test('an unreachable service maps to 503', async () => {
    const client = createClient(EchoService, '127.0.0.1:1');
    const err = (await client.echo({ text: 'x' }, principal, { timeoutMs: 2000 }).catch((e) => e)) as AppError;
    expect([503, 504]).toContain(err.status);
    client.close();
  });

  test('client calls are counted by method and status name (imagegen_grpc_client_*)', async () => {
    const count = async (method: string, code: string) => {
      const line = (await metricsText()).body
        .split('\n')
        .find(
          (l) => l.startsWith('imagegen_grpc_client_handled_total{') && l.includes(`method="${method}"`) && l.includes(`code="${code}"`),
        );
      return line ? Number(line.split(' ').at(-1)) : 0;
    };
    const [ok0, bad0] = [await count('/test.Echo/Echo', 'OK'), await count('/test.Echo/Fail', 'INVALID_ARGUMENT')];
    const client = createClient(EchoService, server.address);
    await client.echo({ text: 'counted' }, principal);
    await client.fail({ kind: 'bad' }, principal).catch(() => undefined);
    expect(await count('/test.Echo/Echo', 'OK')).toBe(ok0 + 1);
    expect(await count('/test.Echo/Fail', 'INVALID_ARGUMENT')).toBe(bad0 + 1);
    client.close();
  });

  test('onCall reports every call with its status code', () => {
    expect(calls.some((c) => c.method === '/test.Echo/Echo' && c.code === 0)).toBe(true);
    expect(calls.some((c) => c.method === '/test.Echo/Fail' && c.code === 3)).toBe(true);
  });
});
