import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Journey, startJourney } from '../distributed/harness.js';
import { waitFor } from '../support/wait.js';

/**
 * One POST /api/images makes one trace across processes: gateway (HTTP server, fastify, gRPC client)
 * -> generation (gRPC server) -> provider HTTP call (undici) -> sandbox upstream (HTTP server)
 * -> library (gRPC server, outbox row) -> outbox relay (PRODUCER span) -> JetStream -> usage-metering
 * consumer (CONSUMER span). Every service runs as its own process started with the telemetry preload
 * (`node --import tsx --import libs/platform/src/telemetry-preload.ts ...`) and exports OTLP/HTTP JSON to a
 * receiver in this test; the spans' parent links are checked hop by hop.
 */

interface Span {
  service: string;
  scope: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}
const KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 };

let receiver: Server;
const spans: Span[] = [];
let j: Journey;

function attrValue(v: any): unknown {
  if (!v) return undefined;
  return v.stringValue ?? v.intValue ?? v.doubleValue ?? v.boolValue ?? v.arrayValue;
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const rs of body.resourceSpans ?? []) {
          const resource: Record<string, unknown> = {};
          for (const a of rs.resource?.attributes ?? []) resource[a.key] = attrValue(a.value);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              const attributes: Record<string, unknown> = {};
              for (const a of s.attributes ?? []) attributes[a.key] = attrValue(a.value);
              spans.push({
                service: String(resource['service.name']),
                scope: ss.scope?.name ?? '',
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                name: s.name,
                kind: s.kind,
                attributes,
              });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      } catch {
        // Only JSON is expected (exporter-trace-otlp-http); anything else is a test failure below.
        res.writeHead(400);
        res.end();
      }
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;
  j = await startJourney({
    services: ['sandbox-provider', 'tenancy', 'library', 'usage-metering', 'generation', 'gateway'],
    otlpEndpoint: `http://127.0.0.1:${port}`,
    env: { LOG_REQUESTS: '1' },
  });
}, 240_000);

afterAll(async () => {
  await j?.stop();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
}, 60_000);

describe('one trace per request across processes, gRPC and NATS', () => {
  it('POST /api/images: gateway -> generation -> provider -> library -> outbox relay -> JetStream -> usage consumer', async () => {
    const t = await j.createTenant();
    const res = await j.api('/api/images', { key: t.liveKey, body: { prompt: 'a traced lighthouse' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);

    // The trace of this request: the gateway's HTTP server span for POST /api/images.
    const root = await waitFor(
      async () =>
        spans.find(
          (s) =>
            s.service === 'imagegen-gateway' &&
            s.kind === KIND.SERVER &&
            s.scope.includes('instrumentation-http') &&
            s.name.startsWith('POST') &&
            !s.parentSpanId &&
            String(s.attributes['http.target'] ?? s.attributes['url.path'] ?? '').startsWith('/api/images'),
        ),
      { message: 'the gateway server span', timeout: 30_000, interval: 200 },
    );
    const subject = `${j.env.EVENTS_PREFIX}.library.image_stored`;
    const consumer = await waitFor(
      async () =>
        spans.find(
          (s) =>
            s.traceId === root.traceId &&
            s.kind === KIND.CONSUMER &&
            s.name === `process ${subject}` &&
            s.service === 'imagegen-usage-metering',
        ),
      { message: 'the usage consumer span in the same trace', timeout: 30_000, interval: 200 },
    );
    // Spans are exported in batches as they end, so a child (say a usage-metering SQL span of the
    // ExecutionFinished event) can arrive before its parent: wait until the trace has no orphans.
    const traceOf = () => spans.filter((s) => s.traceId === root.traceId);
    const orphans = (t: Span[]) => {
      const ids = new Set(t.map((s) => s.spanId));
      return t.filter((s) => s !== root && !(s.parentSpanId && ids.has(s.parentSpanId)));
    };
    await waitFor(async () => orphans(traceOf()).length === 0, {
      message: 'every exported span of the trace to have its parent',
      timeout: 15_000,
      interval: 200,
    }).catch(
      () => undefined, // the assertions below then name the orphan
    );
    const trace = traceOf();
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    if (process.env.PRINT_TRACE) {
      const print = (s: Span, depth: number): void => {
        process.stdout.write(`${'  '.repeat(depth)}${s.service} [${Object.keys(KIND)[s.kind - 1]}] ${s.name}\n`);
        for (const c of trace.filter((x) => x.parentSpanId === s.spanId)) print(c, depth + 1);
      };
      print(root, 0);
    }
    const parentOf = (s: Span) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);
    const ancestors = (s: Span) => {
      const out: Span[] = [];
      for (let p = parentOf(s); p; p = parentOf(p)) out.push(p);
      return out;
    };

    // Every span of the trace hangs from the gateway's root span: one trace, no orphans.
    for (const s of trace) if (s !== root) expect(ancestors(s).at(-1), `${s.service} ${s.name} reaches the root`).toBe(root);
    expect(new Set(trace.map((s) => s.service))).toEqual(
      new Set([
        'imagegen-gateway',
        'imagegen-generation',
        'imagegen-sandbox-provider',
        'imagegen-library',
        'imagegen-usage-metering',
        'imagegen-tenancy',
      ]),
    );

    // gateway: fastify request span under the HTTP server span; the gRPC client call to generation below it.
    const gwGrpc = trace.find(
      (s) => s.service === 'imagegen-gateway' && s.kind === KIND.CLIENT && s.name.includes('GenerationService/GenerateImages'),
    );
    expect(gwGrpc, 'gateway gRPC client span').toBeDefined();
    expect(ancestors(gwGrpc!)).toContain(root);
    expect(trace.some((s) => s.service === 'imagegen-gateway' && s.scope === '@fastify/otel')).toBe(true);

    // generation: the gRPC server span is the child of the gateway's client span.
    const genServer = trace.find((s) => s.service === 'imagegen-generation' && s.kind === KIND.SERVER && s.name.includes('GenerateImages'));
    expect(genServer?.parentSpanId).toBe(gwGrpc!.spanId);

    // The provider call: undici client span in generation, answered by the sandbox's server span.
    const providerCall = trace.find((s) => s.service === 'imagegen-generation' && s.kind === KIND.CLIENT && s.scope.includes('undici'));
    expect(providerCall, 'provider HTTP client span').toBeDefined();
    expect(ancestors(providerCall!)).toContain(genServer);
    // ...inside the attempt's own span (one per key tried), which names the provider, model and key.
    const attempt = trace.find(
      (s) => s.service === 'imagegen-generation' && s.name.endsWith(' generate') && s.attributes['imagegen.provider'],
    );
    expect(attempt, 'provider attempt span').toBeDefined();
    expect(providerCall!.parentSpanId).toBe(attempt!.spanId);
    expect(attempt!.attributes).toMatchObject({ 'imagegen.provider.key': 1 });
    expect(ancestors(attempt!)).toContain(genServer);
    const upstream = trace.find((s) => s.service === 'imagegen-sandbox-provider' && s.kind === KIND.SERVER);
    expect(upstream?.parentSpanId).toBe(providerCall!.spanId);

    // library: StoreImage server span, child of generation's client span.
    const storeClient = trace.find(
      (s) => s.service === 'imagegen-generation' && s.kind === KIND.CLIENT && s.name.includes('LibraryService/StoreImage'),
    );
    const storeServer = trace.find(
      (s) => s.service === 'imagegen-library' && s.kind === KIND.SERVER && s.name.includes('LibraryService/StoreImage'),
    );
    expect(storeClient && storeServer, 'StoreImage client and server spans').toBeTruthy();
    expect(storeServer!.parentSpanId).toBe(storeClient!.spanId);
    expect(ancestors(storeClient!)).toContain(genServer);

    // ...where the thumbnail is rendered and both files are written to object storage, in spans of their own.
    const thumb = trace.find((s) => s.service === 'imagegen-library' && s.name === 'image thumbnail');
    expect(thumb, 'thumbnail span').toBeDefined();
    expect(ancestors(thumb!)).toContain(storeServer);
    expect(thumb!.attributes).toMatchObject({ 'imagegen.image.format': 'png' });
    const puts = trace.filter((s) => s.service === 'imagegen-library' && s.name === 'storage put');
    expect(puts.map((s) => String(s.attributes['imagegen.storage.key']).split('/')[2]).sort()).toEqual(['images', 'thumbnails']);
    for (const put of puts) expect(ancestors(put)).toContain(storeServer);

    // Queries: every service pool traces its queries (createDb while tracing runs); StoreImage's INSERT is one.
    const insert = trace.find(
      (s) =>
        s.service === 'imagegen-library' &&
        s.kind === KIND.CLIENT &&
        s.name.startsWith('pg ') &&
        // Generated images are stored pending until their execution completes (then committed in one move).
        // (the table is a parameter of the text: images or pending_images; the insert is one statement with the
        // session's image count, so it may be a CTE).
        /INSERT INTO \S+ \(tenant_id, session_id, object_key/.test(String(s.attributes['db.query.text'])),
    );
    expect(insert, 'library INSERT span').toBeDefined();
    expect(insert!.attributes['db.system']).toBe('postgresql');
    expect(ancestors(insert!)).toContain(storeServer);

    // The outbox relay publishes in a PRODUCER span whose parent is the request that wrote the row.
    const publish = trace.find((s) => s.kind === KIND.PRODUCER && s.name === `publish ${subject}`);
    expect(publish?.service).toBe('imagegen-library');
    // ImageStored is written when the execution's pending images are committed (after it completed).
    const commitServer = trace.find(
      (s) => s.service === 'imagegen-library' && s.kind === KIND.SERVER && s.name.includes('LibraryService/CommitExecutionImages'),
    );
    expect(commitServer, 'CommitExecutionImages server span').toBeDefined();
    expect(ancestors(commitServer!)).toContain(genServer);
    // Written by generation's commit call, or by the library's ExecutionFinished consumer when the event came first
    // (both commit exactly the reported images; whichever runs first writes the event).
    expect(
      ancestors(publish!).some(
        (a) =>
          a.service === 'imagegen-library' &&
          ((a.kind === KIND.SERVER && a.name.includes('LibraryService/CommitExecutionImages')) ||
            (a.kind === KIND.CONSUMER && a.name.endsWith('generation.execution_finished'))),
      ),
    ).toBe(true);
    expect(publish!.attributes['messaging.system']).toBe('nats');

    // usage-metering consumes it as a child of the publish span (context carried in NATS headers).
    expect(consumer.parentSpanId).toBe(publish!.spanId);
    expect(consumer.attributes['messaging.destination.name']).toBe(subject);

    // Log lines carry the trace id (the gateway's request log, LOG_REQUESTS=1).
    await waitFor(async () => j.logs('gateway').includes(`"trace_id":"${root.traceId}"`), {
      message: 'a gateway log line with the trace id',
      timeout: 10_000,
      interval: 200,
    });

    // Probes and scrapes are not traced.
    expect(
      spans.some((s) => String(s.attributes['http.target'] ?? s.attributes['url.path'] ?? '').match(/^\/(readyz|livez|metrics)/)),
    ).toBe(false);
  });
});
