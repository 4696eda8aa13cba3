import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { metricsText, recordGrpcClientCall } from '../src/metrics.js';

// fastify is a dependency of the services, not of the platform library: take the gateway's.
interface Reply {
  status(code: number): Reply;
  send(body: unknown): Reply;
}
interface App {
  get(path: string, handler: (req: { params: unknown }, reply: Reply) => Promise<unknown>): void;
  ready(): Promise<void>;
  inject(o: { method: string; url: string }): Promise<unknown>;
  close(): Promise<void>;
}
const Fastify = createRequire(new URL('../../../services/gateway/package.json', import.meta.url))('fastify') as () => App;

const series = async (name: string) =>
  (await metricsText()).body.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));

describe('HTTP RED metrics', () => {
  it('label routes by template (never the raw URL or ids), unmatched paths as one series', async () => {
    const app = Fastify();
    app.get('/api/images/:id', async (req, reply) =>
      (req.params as { id: string }).id === 'missing' ? reply.status(404).send({ error: 'nope' }) : { ok: true },
    );
    await app.ready();
    try {
      for (const url of [
        '/api/images/img_123?tenant=t_9',
        '/api/images/img_456',
        '/api/images/missing',
        '/random/tenant_abc',
        '/x/y/z?q=1',
      ]) {
        await app.inject({ method: 'GET', url });
      }
      const lines = await series('imagegen_http_requests_total');
      const text = lines.join('\n');
      for (const raw of ['img_123', 'img_456', 'missing', 'tenant_abc', 't_9', '/random', '/x/y']) expect(text).not.toContain(raw);
      expect(text).toContain('imagegen_http_requests_total{method="GET",route="/api/images/:id",status_code="200"} 2');
      expect(text).toContain('imagegen_http_requests_total{method="GET",route="/api/images/:id",status_code="404"} 1');
      expect(text).toContain('imagegen_http_requests_total{method="GET",route="unmatched",status_code="404"} 2');
      expect(await series('imagegen_http_requests_in_flight')).toEqual(['imagegen_http_requests_in_flight 0']);
      const buckets = await series('imagegen_http_request_duration_seconds_bucket');
      expect(buckets.some((l) => l.includes('le="0.005"'))).toBe(true);
      expect(buckets.some((l) => l.includes('le="300"'))).toBe(true);
    } finally {
      await app.close();
    }
  });

  it('exposes the default process and Node.js runtime metrics', async () => {
    const body = (await metricsText()).body;
    for (const m of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ]) {
      expect(body).toContain(`# TYPE ${m}`);
    }
  });
});

describe('gRPC client metrics', () => {
  it('count calls and latency by method and status name', async () => {
    recordGrpcClientCall('/imagegen.tenancy.v1.TenancyService/Authenticate', 0, 12);
    recordGrpcClientCall('/imagegen.tenancy.v1.TenancyService/Authenticate', 4, 5000);
    const text = (await series('imagegen_grpc_client_handled_total')).join('\n');
    expect(text).toContain('imagegen_grpc_client_handled_total{method="/imagegen.tenancy.v1.TenancyService/Authenticate",code="OK"} 1');
    expect(text).toContain(
      'imagegen_grpc_client_handled_total{method="/imagegen.tenancy.v1.TenancyService/Authenticate",code="DEADLINE_EXCEEDED"} 1',
    );
    const sum = await series('imagegen_grpc_client_handling_seconds_sum');
    expect(sum.find((l) => l.includes('DEADLINE_EXCEEDED'))).toMatch(/ 5$/);
  });
});
