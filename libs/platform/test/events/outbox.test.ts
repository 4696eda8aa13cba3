import { randomUUID } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/support/wait.js';
import { createDb, createTestDatabase, migrate, type Sql, type TransactionSql } from '../../src/db.js';
import {
  consumeOnce,
  createInProcessTransport,
  type EventMessage,
  type EventTransport,
  extractContext,
  outboxInsert,
  startOutboxRelay,
  writeOutbox,
} from '../../src/events/index.js';
import { natsTransportForSuite } from './nats-support.js';

const logger = pino({ level: 'silent' });
const SCHEMA = 'svc';
const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** A real in-process transport whose publish can be switched off, standing in for NATS being down. */
function switchable(inner: EventTransport) {
  const state = { down: false, attempts: 0 };
  const t: EventTransport = {
    ...inner,
    kind: inner.kind,
    publish: async (m) => {
      state.attempts++;
      if (state.down) throw new Error('transport down');
      await inner.publish(m);
    },
  };
  return { t, state };
}

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;
const provider = new NodeTracerProvider();

beforeAll(async () => {
  provider.register(); // W3C propagator + async context, so trace context really rides along
  db = await createTestDatabase(undefined, 'events');
  sql = createDb(db.url, { schema: SCHEMA });
  await migrate(sql, SCHEMA);
  await sql`CREATE TABLE counter (event_id text, n int)`;
});

afterAll(async () => {
  await sql?.end();
  await db?.drop();
  await provider.shutdown();
});

describe('outbox', () => {
  const setup = async (pollMs = 5000) => {
    const inner = createInProcessTransport({ logger });
    const { t, state } = switchable(inner);
    const received: EventMessage[] = [];
    await inner.subscribe({ durable: `d${randomUUID()}`, subjects: ['imagegen.>'], handler: async (m) => void received.push(m) });
    // A long poll: prompt delivery in these tests proves the NOTIFY wake-up works.
    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport: t, logger, pollMs });
    return {
      received,
      state,
      relay,
      stop: async () => {
        await relay.stop();
        await inner.close();
      },
    };
  };

  it('publishes nothing for a rolled-back transaction', async () => {
    const r = await setup();
    const subject = 'imagegen.library.rolled_back';
    await expect(
      sql.begin(async (tx) => {
        await writeOutbox(tx, { subject, data: bytes('never') });
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    const id = await sql.begin((tx) => writeOutbox(tx, { subject: 'imagegen.library.committed', data: bytes('yes') }));
    await waitFor(() => r.received.some((m) => m.id === id));
    expect(r.received.map((m) => m.subject)).toEqual(['imagegen.library.committed']);
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM outbox WHERE subject = ${subject}`;
    expect(n).toBe(0);
    await r.stop();
  });

  it('publishes committed rows in order with trace context and marks them', async () => {
    const r = await setup();
    const tracer = trace.getTracer('test');
    let traceId = '';
    const ids = await tracer.startActiveSpan('request', async (span) => {
      traceId = span.spanContext().traceId;
      try {
        return await sql.begin(async (tx) => [
          await writeOutbox(tx, { subject: 'imagegen.library.image_stored', data: bytes('1'), headers: { tenant: 't1' } }),
          await writeOutbox(tx, { subject: 'imagegen.library.image_stored', data: bytes('2') }),
          await writeOutbox(tx, { subject: 'imagegen.library.image_deleted', data: bytes('3'), schema: SCHEMA }),
        ]);
      } finally {
        span.end();
      }
    });
    await waitFor(() => r.received.length === 3);
    expect(r.received.map((m) => m.id)).toEqual(ids);
    expect(r.received.map((m) => text(m.data))).toEqual(['1', '2', '3']);
    expect(r.received[0].headers.tenant).toBe('t1');
    expect(trace.getSpanContext(extractContext(r.received[0].headers))?.traceId).toBe(traceId);
    await waitFor(async () => (await r.relay.lag()) === 0);
    const rows = await sql`SELECT published_at FROM outbox WHERE id = ANY(${ids}::uuid[])`;
    expect(rows.every((row) => row.published_at instanceof Date)).toBe(true);
    await r.stop();
  });

  it('orders the rows of one transaction by when they were written (no created_at ties)', async () => {
    const ids = await sql.begin(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < 5; i++) out.push(await writeOutbox(tx, { subject: 'imagegen.usage.quota_crossed', data: bytes(String(i)) }));
      return out;
    });
    const rows = await sql`SELECT id, created_at FROM outbox WHERE id = ANY(${ids}::uuid[]) ORDER BY created_at`;
    const [{ distinct }] = await sql`SELECT count(DISTINCT created_at)::int AS distinct FROM outbox WHERE id = ANY(${ids}::uuid[])`;
    // No relay runs here: keep these rows away from the next tests' relays.
    await sql`UPDATE outbox SET published_at = now() WHERE id = ANY(${ids}::uuid[])`;
    expect(distinct).toBe(5);
    expect(rows.map((r) => r.id)).toEqual(ids);
  });

  it('keeps rows while the transport fails and publishes them once it works', async () => {
    const r = await setup(100);
    r.state.down = true;
    const id = await sql.begin((tx) => writeOutbox(tx, { subject: 'imagegen.library.delayed', data: bytes('d') }));
    await waitFor(() => r.state.attempts >= 2); // woken by NOTIFY, then retried by the poll
    expect(await r.relay.lag()).toBe(1);
    expect(r.received).toHaveLength(0);
    r.state.down = false;
    await waitFor(() => r.received.some((m) => m.id === id));
    await waitFor(async () => (await r.relay.lag()) === 0);
    expect(r.received.filter((m) => m.id === id)).toHaveLength(1);
    await r.stop();
  });

  /** A row its writer publishes itself, written as a service's statement writes it (no transaction, no NOTIFY). */
  const writeDirect = async (subject: string, data: string) => {
    const { insert, notify, event } = outboxInsert(sql, { subject, data: bytes(data) }, undefined, { direct: true });
    await sql`WITH o AS (${insert}) SELECT ${notify}`;
    return event;
  };

  it('direct: the writer publishes its committed rows itself, in order, and they are marked without a relay round', async () => {
    const r = await setup(100);
    expect(r.relay.direct.ready()).toBe(true);
    const events = [await writeDirect('imagegen.library.direct', 'a'), await writeDirect('imagegen.library.direct', 'b')];
    // Their grace keeps them from the relay: a row written after them (NOTIFY wakes the relay) goes out
    // while they stay behind. Only the direct publish sends them.
    const marker = await sql.begin((tx) => writeOutbox(tx, { subject: 'imagegen.library.direct_marker', data: bytes('m') }));
    await waitFor(() => r.received.some((m) => m.id === marker), { message: 'the relay to publish the row written after them' });
    expect(r.received.filter((m) => m.subject === 'imagegen.library.direct')).toHaveLength(0);
    const relayed = r.state.attempts; // the marker's publish
    r.relay.direct.publish(events);
    await waitFor(() => r.received.filter((m) => m.subject === 'imagegen.library.direct').length === 2);
    expect(r.received.filter((m) => m.subject === 'imagegen.library.direct').map((m) => [m.id, text(m.data)])).toEqual([
      [events[0].id, 'a'],
      [events[1].id, 'b'],
    ]);
    await waitFor(async () => (await r.relay.lag()) === 0);
    const rows = await sql`SELECT published_at FROM outbox WHERE id = ANY(${events.map((e) => e.id)}::uuid[])`;
    expect(rows.every((row) => row.published_at instanceof Date)).toBe(true);
    expect(r.state.attempts - relayed).toBe(2); // one publish each, none by the relay
    await r.stop();
  });

  it('direct: a row whose writer died before publishing it goes out through the relay once its grace has passed', async () => {
    const r = await setup(100);
    const orphan = await writeDirect('imagegen.library.orphan', 'o');
    // Within its grace the relay leaves it alone: a row written after it goes out first.
    const marker = await sql.begin((tx) => writeOutbox(tx, { subject: 'imagegen.library.orphan_marker', data: bytes('m') }));
    await waitFor(() => r.received.some((m) => m.id === marker), { message: 'the relay to publish the row written after the orphan' });
    expect(r.received.some((m) => m.id === orphan.id)).toBe(false);
    await sql`UPDATE outbox SET relay_after = now() - interval '1 second' WHERE id = ${orphan.id}`; // the grace has passed
    await waitFor(() => r.received.some((m) => m.id === orphan.id));
    await waitFor(async () => (await r.relay.lag()) === 0);
    await r.stop();
  });

  it('direct: a failed publish hands its rows to the relay, later events follow them in order, and direct publishing resumes', async () => {
    const r = await setup(100);
    r.state.down = true;
    const first = await writeDirect('imagegen.library.handed', '1');
    r.relay.direct.publish([first]);
    await waitFor(() => !r.relay.direct.ready());
    // Written while direct publishing is off: as any other row, behind the first.
    const second = await sql.begin((tx) => writeOutbox(tx, { subject: 'imagegen.library.handed', data: bytes('2') }));
    await waitFor(async () => (await sql`SELECT relay_after FROM outbox WHERE id = ${first.id}`)[0].relay_after === null);
    r.state.down = false;
    await waitFor(() => r.received.filter((m) => m.subject === 'imagegen.library.handed').length === 2);
    expect(r.received.filter((m) => m.subject === 'imagegen.library.handed').map((m) => m.id)).toEqual([first.id, second]);
    await waitFor(() => r.relay.direct.ready());
    await waitFor(async () => (await r.relay.lag()) === 0);
    await r.stop();
  });

  it('two relays on one schema publish each row once (SKIP LOCKED)', async () => {
    const inner = createInProcessTransport({ logger, duplicateWindowMs: 0 }); // count raw publishes
    const received: EventMessage[] = [];
    await inner.subscribe({ durable: 'all', subjects: ['imagegen.>'], handler: async (m) => void received.push(m) });
    const relays = await Promise.all(
      [1, 2].map(() => startOutboxRelay({ sql, schema: SCHEMA, transport: inner, logger, pollMs: 50, batch: 5 })),
    );
    await sql.begin(async (tx) => {
      for (let i = 0; i < 40; i++) await writeOutbox(tx, { subject: 'imagegen.library.bulk', data: bytes(`${i}`) });
    });
    await waitFor(() => received.length >= 40);
    await waitFor(async () => (await relays[0].lag()) === 0);
    // Stopped, the relays have finished their rounds: a duplicate publish would have happened by now, and the
    // transport delivers in order, so it arrives before a marker published after the stop.
    await Promise.all(relays.map((x) => x.stop()));
    await inner.publish({ id: randomUUID(), subject: 'imagegen.library.bulk_end', data: bytes('end'), headers: {} });
    await waitFor(() => received.some((m) => m.subject === 'imagegen.library.bulk_end'));
    const bulk = received.filter((m) => m.subject === 'imagegen.library.bulk');
    expect(bulk).toHaveLength(40);
    expect(new Set(bulk.map((m) => m.id)).size).toBe(40);
    await inner.close();
  });
});

describe('outbox relays on two replicas', () => {
  it('publish the rows of one schema in order, one relay at a time (issue 17)', async () => {
    const inner = createInProcessTransport({ logger, duplicateWindowMs: 0 });
    const received: string[] = [];
    await inner.subscribe({
      durable: 'ordered',
      subjects: ['imagegen.>'],
      handler: async (m) => {
        if (m.subject === 'imagegen.library.ordered') received.push(text(m.data));
      },
    });
    // A slow bus: each publish takes 3 ms, so two relays working at once would interleave their batches.
    const slow: EventTransport = {
      ...inner,
      publish: async (m) => {
        await new Promise((r) => setTimeout(r, 3));
        return inner.publish(m);
      },
    };
    const relays = await Promise.all(
      [1, 2].map(() => startOutboxRelay({ sql, schema: SCHEMA, transport: slow, logger, pollMs: 20, batch: 5 })),
    );
    for (let i = 0; i < 60; i++) {
      await sql.begin((tx) => writeOutbox(tx, { subject: 'imagegen.library.ordered', data: bytes(`${i}`) }));
    }
    await waitFor(() => received.length >= 60, { timeout: 10_000 });
    expect(received).toEqual(Array.from({ length: 60 }, (_, i) => `${i}`));
    await Promise.all(relays.map((x) => x.stop()));
    await inner.close();
  });
});

const bump = (eventId: string) => async (tx: TransactionSql) => {
  await tx`INSERT INTO counter (event_id, n) VALUES (${eventId}, 1)`;
};
const count = async (eventId: string) => (await sql`SELECT count(*)::int AS n FROM counter WHERE event_id = ${eventId}`)[0].n as number;

describe('consumeOnce', () => {
  it('counts a duplicate event once', async () => {
    const id = randomUUID();
    expect(await consumeOnce(sql, 'usage', id, bump(id))).toBe(true);
    expect(await consumeOnce(sql, 'usage', id, bump(id))).toBe(false);
    expect(await consumeOnce(sql, 'webhooks', id, async () => {})).toBe(true); // per consumer
    expect(await count(id)).toBe(1);
  });

  it('counts concurrent duplicates once', async () => {
    const id = randomUUID();
    const results = await Promise.all([1, 2, 3].map(() => consumeOnce(sql, 'usage', id, bump(id))));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await count(id)).toBe(1);
  });

  it('forgets the event when the work fails, so a redelivery can succeed', async () => {
    const id = randomUUID();
    await expect(
      consumeOnce(sql, 'usage', id, async (tx) => {
        await bump(id)(tx);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await count(id)).toBe(0);
    expect(await consumeOnce(sql, 'usage', id, bump(id))).toBe(true);
    expect(await count(id)).toBe(1);
  });
});

describe('outbox to JetStream', () => {
  const { tag, transport: suiteTransport } = natsTransportForSuite();

  it('relays, dedupes a re-publish and consumes once with the commit before the ack', async () => {
    const nats = suiteTransport();
    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport: nats, logger, pollMs: 5000 });
    const handled: string[] = [];
    const sub = await nats.subscribe({
      durable: 'usage',
      subjects: [`${tag}.library.>`],
      handler: async (m) => {
        if (await consumeOnce(sql, 'usage-js', m.id, bump(m.id))) handled.push(m.id);
      },
    });
    const id = await sql.begin((tx) => writeOutbox(tx, { subject: `${tag}.library.image_stored`, data: bytes('x') }));
    await waitFor(() => handled.length === 1);
    // A relay crash between publish and mark re-publishes the row: JetStream drops it by id.
    await sql`UPDATE outbox SET published_at = NULL WHERE id = ${id}`;
    await sql`SELECT pg_notify('outbox_svc', '')`;
    await waitFor(async () => (await relay.lag()) === 0);
    // Published after the re-publish: the consumer (one message at a time, in stream order) handles it after
    // the duplicate would have been.
    const marker = await sql.begin((tx) => writeOutbox(tx, { subject: `${tag}.library.image_stored`, data: bytes('marker') }));
    await waitFor(() => handled.includes(marker), { message: 'the event written after the re-publish' });
    expect(handled).toEqual([id, marker]);
    expect(await count(id)).toBe(1);
    await sub.stop();
    await relay.stop();
  });
});
