import type { MethodDefinition } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bind, configureGrpcClients, createClient, type RunningGrpcServer, startGrpcServer } from '../src/grpc.js';
import { createLogger } from '../src/logger.js';
import {
  activeSpanContext,
  createInMemorySpanExporter,
  type InMemorySpanExporter,
  SpanKind,
  startTelemetry,
  type Telemetry,
  tracer,
} from '../src/telemetry.js';

const json = <T>(path: string): MethodDefinition<T, T> => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: (v: T) => Buffer.from(JSON.stringify(v)),
  requestDeserialize: (b: Buffer) => JSON.parse(b.toString()),
  responseSerialize: (v: T) => Buffer.from(JSON.stringify(v)),
  responseDeserialize: (b: Buffer) => JSON.parse(b.toString()),
});
const Traced = { where: json<{ spanId?: string; traceId?: string }>('/test.Traced/Where') };

let exporter: InMemorySpanExporter;
let telemetry: Telemetry;
let server: RunningGrpcServer;
beforeAll(async () => {
  exporter = await createInMemorySpanExporter();
  telemetry = await startTelemetry({}, 'grpc-tracing-test', { spanExporter: exporter, instrumentations: false });
  configureGrpcClients({ deadlineMs: 30_000, inProcess: true });
  server = await startGrpcServer({
    logger: createLogger('test', 'silent'),
    services: [bind(Traced, { where: async () => activeSpanContext() ?? {} })],
  });
});
afterAll(async () => {
  await server?.stop();
  await telemetry?.stop();
});

describe('in-process gRPC calls while tracing', () => {
  it('make the CLIENT and SERVER spans of the call, in the caller trace, with the handler inside the SERVER span', async () => {
    const client = createClient(Traced, server.address);
    let root = { traceId: '', spanId: '' };
    const seen = await tracer().startActiveSpan('request', async (span) => {
      root = span.spanContext();
      const r = await client.where({}, { requestId: 'r-1', tenantId: 't' });
      span.end();
      return r;
    });
    await telemetry.flush();
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === root.traceId);
    const clientSpan = spans.find((s) => s.kind === SpanKind.CLIENT && s.name === 'grpc.test.Traced/Where');
    const serverSpan = spans.find((s) => s.kind === SpanKind.SERVER && s.name === 'grpc.test.Traced/Where');
    expect(clientSpan?.parentSpanContext?.spanId).toBe(root.spanId);
    expect(serverSpan?.parentSpanContext?.spanId).toBe(clientSpan?.spanContext().spanId);
    expect(serverSpan?.attributes).toMatchObject({ 'rpc.system': 'grpc', 'rpc.service': 'test.Traced', 'rpc.method': 'Where' });
    expect(seen).toEqual({ traceId: root.traceId, spanId: serverSpan?.spanContext().spanId });
    client.close();
  });
});
