import { randomBytes } from 'node:crypto';
import {
  activeSpanContext,
  createDb,
  createInMemorySpanExporter,
  createInProcessTransport,
  createLogger,
  createNatsTransport,
  createTestDatabase,
  type EventTransport,
  type InMemorySpanExporter,
  metricsText,
  migrate,
  type ReadableSpan,
  SpanKind,
  type Sql,
  startOutboxRelay,
  startTelemetry,
  type Telemetry,
  tracer,
  traceSql,
  writeOutbox,
} from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue } from '../distributed/harness.js';
import { waitFor } from '../support/wait.js';

/**
 * Trace context and metrics around the bus, with spans captured in memory (startTelemetry's test-only
 * spanExporter option): request span -> outbox row -> relay PRODUCER span -> CONSUMER span per
 * delivery (child of the producer), over both transports; events published/consumed/redelivered and
 * outbox lag on /metrics; postgres.js query spans from traceSql.
 */

let exporter: InMemorySpanExporter;
let telemetry: Telemetry;
let db: { url: string; drop(): Promise<void> };
let sql: Sql;
const logger = createLogger('ops-events', 'silent');
const SCHEMA = 'opsevents';

beforeAll(async () => {
  exporter = await createInMemorySpanExporter();
  telemetry = await startTelemetry({}, 'imagegen-ops-test', { spanExporter: exporter, instrumentations: false });
  db = await createTestDatabase(undefined, 'opsev');
  sql = createDb(db.url, { schema: SCHEMA, max: 3 });
  await migrate(sql, SCHEMA);
});

afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await db?.drop();
  await telemetry?.stop();
});

const spanId = (s: ReadableSpan) => s.spanContext().spanId;
const parentId = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe.each([
  [
    'inprocess',
    async (_prefix: string): Promise<EventTransport> => createInProcessTransport({ logger, retry: { baseMs: 50, maxMs: 100 } }),
  ],
  [
    'nats',
    async (prefix: string): Promise<EventTransport> =>
      createNatsTransport({
        url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
        streamName: `${prefix.toUpperCase()}_EVENTS`,
        subjectPrefix: prefix,
        logger,
        retry: { baseMs: 50, maxMs: 100 },
      }),
  ],
])('%s transport', (kind, makeTransport) => {
  it('one trace from the request through the outbox relay to the consumer; metrics count it', async () => {
    exporter.reset();
    const prefix = `opsev${randomBytes(4).toString('hex')}`;
    const transport = await makeTransport(prefix);
    const subject = `${prefix}.test.thing_happened`;
    const durable = `ops-${kind}-${randomBytes(3).toString('hex')}`;
    const deliveries: { count: number; traceId: string; spanId: string }[] = [];
    const sub = await transport.subscribe({
      durable,
      subjects: [subject],
      handler: async (m) => {
        const active = activeSpanContext();
        deliveries.push({ count: m.deliveryCount ?? 1, traceId: active?.traceId ?? '', spanId: active?.spanId ?? '' });
        // Work done while handling joins the trace.
        await tracer().startActiveSpan('usage.apply', async (s) => s.end());
        if (deliveries.length === 1) throw new Error('first delivery fails on purpose');
      },
    });

    let requestTraceId = '';
    let requestSpanId = '';
    await tracer().startActiveSpan('POST /api/images', { kind: SpanKind.SERVER }, async (span) => {
      requestTraceId = span.spanContext().traceId;
      requestSpanId = span.spanContext().spanId;
      await sql.begin((tx) => writeOutbox(tx, { subject, data: new TextEncoder().encode('payload') }));
      span.end();
    });

    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport, logger, pollMs: 100 });
    try {
      await waitFor(async () => deliveries.length >= 2, {
        message: 'two deliveries (one failed, one redelivered)',
        timeout: 20_000,
        interval: 50,
      });
      await waitFor(async () => (await relay.lag()) === 0, { message: 'lag back to 0', timeout: 10_000, interval: 50 });
    } finally {
      await relay.stop();
      await sub.stop();
      await transport.close();
    }
    await telemetry.flush();

    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === requestTraceId);
    const publish = spans.find((s) => s.name === `publish ${subject}`);
    expect(publish, 'publish span').toBeDefined();
    expect(publish?.kind).toBe(SpanKind.PRODUCER);
    // The row was written in the request's transaction: createDb's pools trace their queries while tracing
    // runs, so the publish span hangs from that transaction's span, a child of the request span.
    const txOfRow = spans.find((s) => spanId(s) === parentId(publish as ReadableSpan));
    expect(txOfRow?.name).toBe('pg transaction');
    expect(parentId(txOfRow as ReadableSpan)).toBe(requestSpanId);
    expect(publish?.attributes['messaging.destination.name']).toBe(subject);

    const processes = spans.filter((s) => s.name === `process ${subject}`);
    expect(processes.length).toBe(2);
    for (const p of processes) {
      expect(p.kind).toBe(SpanKind.CONSUMER);
      expect(parentId(p)).toBe(spanId(publish as ReadableSpan));
      expect(p.attributes['messaging.consumer.group.name']).toBeTruthy();
    }
    expect(processes.map((p) => p.attributes['messaging.message.delivery_count']).sort()).toEqual([1, 2]);
    expect(processes.some((p) => p.status.code === 2 /* ERROR */)).toBe(true);
    // The handler ran inside the consumer span, and its own work is a child of it.
    for (const d of deliveries) expect(d.traceId).toBe(requestTraceId);
    const applies = spans.filter((s) => s.name === 'usage.apply');
    expect(applies.length).toBe(2);
    for (const a of applies) expect(processes.map(spanId)).toContain(parentId(a));

    const text = (await metricsText()).body;
    expect(metricValue(text, 'imagegen_events_published_total', { subject, outcome: 'ok' })).toBe(1);
    const d = durable.replace(/[^A-Za-z0-9_-]/g, '_');
    expect(metricValue(text, 'imagegen_events_consumed_total', { durable: d, subject, outcome: 'error' })).toBe(1);
    expect(metricValue(text, 'imagegen_events_consumed_total', { durable: d, subject, outcome: 'ok' })).toBe(1);
    expect(metricValue(text, 'imagegen_events_redelivered_total', { durable: d, subject })).toBe(1);
    expect(metricValue(text, 'imagegen_event_handling_seconds_count', { durable: d, subject })).toBe(2);
  });
});

describe('outbox lag gauge', () => {
  it('reports unpublished rows per schema while a relay runs, and 0 once published', async () => {
    const failing: EventTransport = {
      kind: 'inprocess',
      publish: async () => {
        throw new Error('bus down');
      },
      subscribe: async () => ({ stop: async () => {} }),
      healthy: () => false,
      close: async () => {},
    };
    await sql.begin((tx) => writeOutbox(tx, { subject: 'opsev.lag.x', data: new Uint8Array([1]) }));
    await sql.begin((tx) => writeOutbox(tx, { subject: 'opsev.lag.x', data: new Uint8Array([2]) }));
    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport: failing, logger, pollMs: 100 });
    try {
      const text = (await metricsText()).body;
      expect(metricValue(text, 'imagegen_outbox_lag', { schema: SCHEMA })).toBeGreaterThanOrEqual(2);
      await waitFor(
        async () =>
          (metricValue((await metricsText()).body, 'imagegen_events_published_total', { subject: 'opsev.lag.x', outcome: 'error' }) ?? 0) >
          0,
        { message: 'a failed publish counted', timeout: 30_000, interval: 200 },
      );
    } finally {
      await relay.stop();
    }
    const ok = createInProcessTransport({ logger });
    const relay2 = await startOutboxRelay({ sql, schema: SCHEMA, transport: ok, logger, pollMs: 100 });
    try {
      await waitFor(async () => metricValue((await metricsText()).body, 'imagegen_outbox_lag', { schema: SCHEMA }) === 0, {
        message: 'lag 0',
        timeout: 10_000,
        interval: 100,
      });
    } finally {
      await relay2.stop();
      await ok.close();
    }
    // A stopped relay no longer reports.
    expect(metricValue((await metricsText()).body, 'imagegen_outbox_lag', { schema: SCHEMA })).toBeUndefined();
  });
});

describe('postgres.js spans (traceSql)', () => {
  it('adds a client span per awaited query and per transaction, inside the active trace only', async () => {
    exporter.reset();
    const traced = traceSql(sql, SCHEMA);
    await traced`SELECT 1 AS untraced`; // no active span: no span
    let traceId = '';
    await tracer().startActiveSpan('handler', async (span) => {
      traceId = span.spanContext().traceId;
      const [r] = await traced`SELECT ${41}::int + 1 AS n`;
      expect(r.n).toBe(42);
      await traced.begin(async (tx) => {
        await tx`SELECT 2`;
        await tx.unsafe('SELECT 3');
      });
      span.end();
    });
    await telemetry.flush();
    const spans = exporter.getFinishedSpans();
    const pg = spans.filter((s) => s.name.startsWith('pg '));
    expect(pg.every((s) => s.spanContext().traceId === traceId)).toBe(true);
    expect(pg.map((s) => s.name).sort()).toEqual(['pg SELECT', 'pg SELECT', 'pg SELECT', 'pg transaction']);
    const select = pg.find((s) => String(s.attributes['db.query.text']).includes('::int + 1'));
    expect(select?.attributes['db.system']).toBe('postgresql');
    expect(select?.attributes['db.namespace']).toBe(SCHEMA);
    expect(String(select?.attributes['db.query.text'])).not.toContain('41');
    const txSpan = pg.find((s) => s.name === 'pg transaction') as ReadableSpan;
    const inTx = pg.filter((s) => parentId(s) === spanId(txSpan));
    expect(inTx.length).toBe(2);
  });
});
