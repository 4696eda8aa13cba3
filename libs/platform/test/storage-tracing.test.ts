import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage } from '../src/storage/index.js';
import { createInMemorySpanExporter, type InMemorySpanExporter, startTelemetry, type Telemetry, tracer } from '../src/telemetry.js';

/** createStorage's calls get CLIENT spans inside traced operations, and only there. */
let dir: string;
let telemetry: Telemetry;
let exporter: InMemorySpanExporter;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'storage-trace-'));
  exporter = await createInMemorySpanExporter();
  telemetry = await startTelemetry({}, 'imagegen-storage-test', { spanExporter: exporter, instrumentations: false });
});
afterAll(async () => {
  await telemetry?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('storage tracing', () => {
  it('spans put, get, stat and delete under the active span, with backend, key and size; none outside a trace', async () => {
    const storage = createStorage({ dataDir: dir, publicBaseUrl: 'http://x' });
    await storage.put('tenants/t1/images/outside.png', Buffer.from('no trace'), 'image/png'); // no active span
    let traceId = '';
    await tracer().startActiveSpan('request', async (span) => {
      traceId = span.spanContext().traceId;
      await storage.put('tenants/t1/images/a.png', Buffer.from('abc'), 'image/png');
      expect((await storage.get('tenants/t1/images/a.png')).toString()).toBe('abc');
      expect(await storage.stat('tenants/t1/images/a.png')).toMatchObject({ size: 3 });
      await storage.delete('tenants/t1/images/a.png');
      await expect(storage.get('tenants/t1/images/a.png')).rejects.toMatchObject({ status: 404 });
      span.end();
    });
    const spans = exporter.getFinishedSpans().filter((s) => s.name.startsWith('storage '));
    expect(spans.map((s) => s.name)).toEqual(['storage put', 'storage get', 'storage stat', 'storage delete', 'storage get']);
    expect(spans.every((s) => s.spanContext().traceId === traceId)).toBe(true);
    expect(spans[0].attributes).toEqual({
      'imagegen.storage.backend': 'fs',
      'imagegen.storage.key': 'tenants/t1/images/a.png',
      'imagegen.storage.bytes': 3,
    });
    expect(spans[4].status.code).toBe(2); // the 404 is recorded as an error
  });
});
