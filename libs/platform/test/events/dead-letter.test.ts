import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import { createDb, createTestDatabase, migrate, type Sql } from '../../src/db.js';
import {
  createInProcessTransport,
  type EventMessage,
  type EventTransport,
  type OutgoingEvent,
  PermanentPublishError,
  startOutboxRelay,
  writeOutbox,
} from '../../src/events/index.js';
import { metricsText } from '../../src/metrics.js';
import { natsTransportForSuite } from './nats-support.js';

/*
 * An outbox row that can never be published must not block its schema's relay: it is moved to
 * outbox_dead_letter (payload kept) and the rows after it go out in order. Bus outages are retried
 * forever; unclassified failures are dead-lettered after maxAttempts.
 */

const logger = pino({ level: 'silent' });
const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

function metricValue(body: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of body.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/**
 * A real in-process transport in front of which publish fails on chosen ids (`fail`: id -> error
 * factory) or on every id (`all`); `calls` records every publish attempt in order.
 */
function faulty(inner: EventTransport) {
  const fail = new Map<string, () => Error>();
  const state: { all?: () => Error; healthy: boolean; calls: string[] } = { healthy: true, calls: [] };
  const t: EventTransport = {
    ...inner,
    kind: inner.kind,
    healthy: () => state.healthy,
    publish: async (m: OutgoingEvent) => {
      state.calls.push(m.id);
      const f = state.all ?? fail.get(m.id);
      if (f) throw f();
      await inner.publish(m);
    },
  };
  return { t, fail, state };
}

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'deadletter');
  sql = createDb(db.url, { schema: 'dl' });
});

afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

/** A fresh schema per test (one relay per schema), a subscriber recording what was delivered. */
async function setup(opts: { maxAttempts?: number; pollMs?: number; maxPayload?: number } = {}) {
  const schema = `dl_${randomUUID().replace(/-/g, '').slice(0, 8)}`;
  await migrate(sql, schema);
  const inner = createInProcessTransport({ logger, maxPayload: opts.maxPayload });
  const f = faulty(inner);
  const received: EventMessage[] = [];
  await inner.subscribe({ durable: 'all', subjects: ['imagegen.>'], handler: async (m) => void received.push(m) });
  const relay = await startOutboxRelay({
    sql,
    schema,
    transport: f.t,
    logger,
    pollMs: opts.pollMs ?? 5000,
    maxAttempts: opts.maxAttempts,
  });
  const write = (events: { id?: string; subject: string; data: Uint8Array }[]) =>
    sql.begin(async (tx) => {
      const ids: string[] = [];
      for (const e of events) ids.push(await writeOutbox(tx, { ...e, schema }));
      return ids;
    });
  return {
    schema,
    received,
    relay,
    write,
    ...f,
    stop: async () => {
      await relay.stop();
      await inner.close();
    },
  };
}

describe('outbox dead letters', () => {
  it('dead-letters a row that can never be published and publishes the rows after it, in order', async () => {
    const r = await setup({ maxPayload: 1024 });
    const ids = await r.write([
      { subject: 'imagegen.library.a', data: bytes('1') },
      { subject: 'imagegen.library.too_big', data: new Uint8Array(4096).fill(7) },
      { subject: 'imagegen.library.b', data: bytes('2') },
      { subject: 'imagegen.library..bad', data: bytes('bad subject') },
      { subject: 'imagegen.library.c', data: bytes('3') },
    ]);
    await waitFor(() => r.received.length === 3);
    await waitFor(async () => (await r.relay.deadLetters()) === 2);
    expect(r.received.map((m) => m.id)).toEqual([ids[0], ids[2], ids[4]]);
    expect(r.received.map((m) => text(m.data))).toEqual(['1', '2', '3']);
    // Each was tried once: a permanent failure is not retried.
    expect(r.state.calls).toEqual(ids);

    const dead =
      await sql`SELECT id, subject, payload, reason, error, attempts, created_at FROM ${sql(r.schema)}.outbox_dead_letter ORDER BY created_at`;
    expect(dead.map((d) => [d.id, d.reason, d.attempts])).toEqual([
      [ids[1], 'payload_too_large', 1],
      [ids[3], 'invalid_subject', 1],
    ]);
    expect(Buffer.compare(dead[0].payload as Buffer, Buffer.alloc(4096, 7))).toBe(0); // kept for inspection and replay
    expect(dead[1].subject).toBe('imagegen.library..bad');
    expect(dead[1].error).toMatch(/empty token/);
    await waitFor(async () => (await r.relay.lag()) === 0);
    expect(await r.relay.deadLetters()).toBe(2);
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM ${sql(r.schema)}.outbox WHERE id = ANY(${[ids[1], ids[3]]}::uuid[])`;
    expect(n).toBe(0);

    const body = (await metricsText()).body;
    expect(metricValue(body, 'imagegen_outbox_dead_lettered_total', { schema: r.schema, reason: 'payload_too_large' })).toBe(1);
    expect(metricValue(body, 'imagegen_outbox_dead_lettered_total', { schema: r.schema, reason: 'invalid_subject' })).toBe(1);
    expect(metricValue(body, 'imagegen_outbox_dead_letters', { schema: r.schema })).toBe(2);
    expect(metricValue(body, 'imagegen_outbox_lag', { schema: r.schema })).toBe(0);
    await r.stop();
    expect(metricValue((await metricsText()).body, 'imagegen_outbox_dead_letters', { schema: r.schema })).toBeUndefined();
  });

  it('replays a dead letter with the documented SQL (docs/design/ops.md)', async () => {
    const r = await setup();
    // The subject has no stream for now (say, the stream's subjects were misconfigured). The failure is set
    // before the write: a relay round running as the write commits may publish the rows before the test goes on.
    const ids = [randomUUID(), randomUUID()];
    r.fail.set(ids[0], () => new PermanentPublishError('no_stream', 'no stream captures the subject'));
    await r.write([
      { id: ids[0], subject: 'imagegen.library.x', data: bytes('x') },
      { id: ids[1], subject: 'imagegen.library.y', data: bytes('y') },
    ]);
    await waitFor(() => r.received.length === 1);
    await waitFor(async () => (await r.relay.deadLetters()) === 1);
    expect(r.received[0].id).toBe(ids[1]);

    r.fail.clear(); // fixed
    await sql.begin(async (tx) => {
      await tx.unsafe(`SET LOCAL search_path TO "${r.schema}"`);
      await tx.unsafe(`
        WITH r AS (DELETE FROM outbox_dead_letter WHERE id = '${ids[0]}' RETURNING id, subject, payload, headers)
        INSERT INTO outbox (id, subject, payload, headers, created_at)
        SELECT id, subject, payload, headers, clock_timestamp() FROM r;
        NOTIFY "outbox_${r.schema}";`);
    });
    await waitFor(() => r.received.length === 2);
    expect(r.received[1].id).toBe(ids[0]);
    expect(text(r.received[1].data)).toBe('x');
    expect(await r.relay.deadLetters()).toBe(0);
    await waitFor(async () => (await r.relay.lag()) === 0);
    await r.stop();
  });

  it('retries a bus outage (connection errors) forever, in order, without counting attempts', async () => {
    const maxAttempts = 3;
    const r = await setup({ maxAttempts, pollMs: 20 });
    r.state.all = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4222'), { code: 'ECONNREFUSED' });
    const ids = await r.write([
      { subject: 'imagegen.library.first', data: bytes('1') },
      { subject: 'imagegen.library.second', data: bytes('2') },
    ]);
    await waitFor(() => r.state.calls.length >= maxAttempts * 3);
    // Only the head row was tried, it was never counted nor dead-lettered, nothing overtook it.
    expect(new Set(r.state.calls)).toEqual(new Set([ids[0]]));
    expect(await r.relay.deadLetters()).toBe(0);
    expect(await r.relay.lag()).toBe(2);
    const [row] = await sql`SELECT attempts FROM ${sql(r.schema)}.outbox WHERE id = ${ids[0]}`;
    expect(row.attempts).toBe(0);

    // An unhealthy transport's plain errors count as an outage too.
    r.state.all = () => new Error('bus down');
    r.state.healthy = false;
    const before = r.state.calls.length;
    await waitFor(() => r.state.calls.length >= before + maxAttempts * 2);
    expect(await r.relay.deadLetters()).toBe(0);

    r.state.all = undefined;
    r.state.healthy = true;
    await waitFor(() => r.received.length === 2);
    expect(r.received.map((m) => m.id)).toEqual(ids);
    await waitFor(async () => (await r.relay.lag()) === 0);
    await r.stop();
  });

  it('retries an unclassified failure in order and dead-letters it only after maxAttempts', async () => {
    const maxAttempts = 3;
    // Retries back off from pollMs (100, then 200 ms): room to look between the attempts.
    const r = await setup({ maxAttempts, pollMs: 100 });
    const ids = [randomUUID(), randomUUID()];
    r.fail.set(ids[0], () => new Error('boom'));
    await r.write([
      { id: ids[0], subject: 'imagegen.library.flaky', data: bytes('f') },
      { id: ids[1], subject: 'imagegen.library.after', data: bytes('a') },
    ]);
    const relay = r.relay;

    await waitFor(() => r.state.calls.filter((id) => id === ids[0]).length === maxAttempts - 1);
    // Before the last attempt: still in the outbox, counted, nothing after it published.
    const [row] = await sql`SELECT attempts, last_error FROM ${sql(r.schema)}.outbox WHERE id = ${ids[0]}`;
    expect(row.attempts).toBeGreaterThanOrEqual(maxAttempts - 2);
    expect(row.attempts).toBeLessThanOrEqual(maxAttempts - 1);
    expect(row.last_error).toMatch(/boom/);
    expect(await relay.deadLetters()).toBe(0);
    expect(r.received).toHaveLength(0);

    await waitFor(() => r.received.length === 1);
    await waitFor(async () => (await relay.deadLetters()) === 1);
    expect(r.received[0].id).toBe(ids[1]);
    // Exactly maxAttempts tries of the failing row, then the next row.
    expect(r.state.calls).toEqual([...Array(maxAttempts).fill(ids[0]), ids[1]]);
    const [dead] = await sql`SELECT id, reason, attempts, error FROM ${sql(r.schema)}.outbox_dead_letter`;
    expect(dead).toMatchObject({ id: ids[0], reason: 'max_attempts', attempts: maxAttempts });
    expect(dead.error).toMatch(/boom/);
    await r.stop();
  });
});

describe('OUTBOX_MAX_ATTEMPTS', () => {
  it('is the default maxAttempts of a relay', async () => {
    const saved = process.env.OUTBOX_MAX_ATTEMPTS;
    process.env.OUTBOX_MAX_ATTEMPTS = '2';
    try {
      const r = await setup({ pollMs: 20 }); // no maxAttempts option
      const id = randomUUID();
      r.fail.set(id, () => new Error('boom'));
      await r.write([{ id, subject: 'imagegen.library.flaky', data: bytes('f') }]);
      await waitFor(async () => (await r.relay.deadLetters()) === 1);
      expect(r.state.calls).toEqual([id, id]);
      await r.stop();
    } finally {
      if (saved === undefined) delete process.env.OUTBOX_MAX_ATTEMPTS;
      else process.env.OUTBOX_MAX_ATTEMPTS = saved;
    }
  });
});

describe('outbox dead letters with JetStream', () => {
  const { tag, transport: suiteTransport } = natsTransportForSuite();

  it('dead-letters payloads over max_payload, subjects no stream takes and invalid subjects; publishes the rest', async () => {
    const nats = suiteTransport();
    const schema = `js_${tag}`;
    await migrate(sql, schema);
    const handled: string[] = [];
    const sub = await nats.subscribe({ durable: 'all', subjects: [`${tag}.>`], handler: async (m) => void handled.push(m.id) });
    const relay = await startOutboxRelay({ sql, schema, transport: nats, logger, pollMs: 5000 });
    const ids = await sql.begin(async (tx) => [
      await writeOutbox(tx, { schema, subject: `${tag}.library.big`, data: new Uint8Array(2 * 1024 * 1024) }),
      await writeOutbox(tx, { schema, subject: `elsewhere_${tag}.library.x`, data: bytes('no stream') }),
      await writeOutbox(tx, { schema, subject: `${tag}.library..x`, data: bytes('invalid') }),
      await writeOutbox(tx, { schema, subject: `${tag}.library.ok`, data: bytes('ok') }),
    ]);
    await waitFor(() => handled.length === 1, { timeout: 15_000 });
    await waitFor(async () => (await relay.deadLetters()) === 3); // moved in the relay's transaction, committed after the publishes
    expect(handled).toEqual([ids[3]]);
    const dead = await sql`SELECT id, reason FROM ${sql(schema)}.outbox_dead_letter ORDER BY created_at`;
    expect(dead.map((d) => [d.id, d.reason])).toEqual([
      [ids[0], 'payload_too_large'],
      [ids[1], 'no_stream'],
      [ids[2], 'invalid_subject'],
    ]);
    expect(await relay.lag()).toBe(0);
    await sub.stop();
    await relay.stop();
  });
});
