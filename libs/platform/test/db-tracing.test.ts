import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, createTestDatabase, type Sql } from '../src/db.js';
import {
  createInMemorySpanExporter,
  type InMemorySpanExporter,
  type ReadableSpan,
  startTelemetry,
  type Telemetry,
  telemetryRunning,
  tracer,
} from '../src/telemetry.js';

/** createDb's pools trace their queries (traceSql) when tracing runs in the process, and only then. */

const TRACED = Symbol.for('imagegen.sql.traced');
let db: { url: string; drop(): Promise<void> };
const pools: Sql[] = [];
let telemetry: Telemetry | undefined;

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'dbtrace');
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end({ timeout: 5 })));
  await db?.drop();
  await telemetry?.stop();
});

const pool = () => {
  const sql = createDb(db.url, { schema: 'public', max: 1 });
  pools.push(sql);
  return sql;
};

describe('createDb and tracing', () => {
  it('returns the plain pool while tracing is off', async () => {
    expect(telemetryRunning()).toBe(false);
    const sql = pool();
    expect((sql as unknown as Record<symbol, unknown>)[TRACED]).toBeUndefined();
    const [r] = await sql`SELECT 1 AS one`;
    expect(r.one).toBe(1);
  });

  it('gives every awaited query and transaction of a service pool a span once tracing runs', async () => {
    const exporter: InMemorySpanExporter = await createInMemorySpanExporter();
    telemetry = await startTelemetry({}, 'imagegen-db-test', { spanExporter: exporter, instrumentations: false });
    const sql = pool();
    await sql`SELECT 'outside any trace'`; // no active span: no span of its own
    let traceId = '';
    let rootId = '';
    await tracer().startActiveSpan('request', async (span) => {
      traceId = span.spanContext().traceId;
      rootId = span.spanContext().spanId;
      const [r] = await sql`SELECT ${20}::int + 1 AS n`;
      expect(r.n).toBe(21);
      await sql.begin(async (tx) => {
        await tx`SELECT 2`;
      });
      span.end();
    });
    await telemetry.flush();
    const pg = exporter.getFinishedSpans().filter((s) => s.name.startsWith('pg '));
    expect(pg.map((s) => s.name).sort()).toEqual(['pg SELECT', 'pg SELECT', 'pg transaction']);
    expect(pg.every((s) => s.spanContext().traceId === traceId)).toBe(true);
    const select = pg.find((s) => String(s.attributes['db.query.text']).includes('::int + 1')) as ReadableSpan;
    expect(select.parentSpanContext?.spanId).toBe(rootId);
    expect(select.attributes).toMatchObject({ 'db.system': 'postgresql', 'db.namespace': 'public' });
  });
});
