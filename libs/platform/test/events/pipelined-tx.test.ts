import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, createTestDatabase, migrate, type Sql } from '../../src/db.js';
import { createInProcessTransport, pipelinedTransaction, startOutboxRelay, writeOutbox } from '../../src/events/index.js';

const SCHEMA = 'ptx';
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'ptx');
  // max 2: a connection left inside a transaction would be seen by the next test's statements.
  sql = createDb(db.url, { schema: SCHEMA, max: 2 });
  await migrate(sql, SCHEMA);
  await sql`CREATE TABLE t (v int PRIMARY KEY)`;
});

afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

const values = async () => (await sql`SELECT v FROM t ORDER BY v`).map((r) => r.v as number);

describe('pipelinedTransaction', () => {
  it('commits after fn returns, and with the last statements through commit()', async () => {
    await sql`TRUNCATE t`;
    expect(await pipelinedTransaction(sql, async (tx) => (await tx`INSERT INTO t VALUES (1) RETURNING v`)[0].v)).toBe(1);
    const [a, b] = await pipelinedTransaction(sql, async (tx, commit) => {
      await tx`INSERT INTO t VALUES (2)`;
      return commit(tx`INSERT INTO t VALUES (3) RETURNING v`, tx`SELECT count(*)::int AS n FROM t`);
    });
    expect((a as { v: number }[])[0].v).toBe(3);
    expect((b as { n: number }[])[0].n).toBe(3); // the transaction's own rows, before COMMIT
    expect(await values()).toEqual([1, 2, 3]);
  });

  it('rolls back when fn throws or a last statement fails, and leaves no connection inside a transaction', async () => {
    await sql`TRUNCATE t`;
    await expect(
      pipelinedTransaction(sql, async (tx) => {
        await tx`INSERT INTO t VALUES (1)`;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    await expect(
      pipelinedTransaction(sql, async (tx, commit) => {
        await tx`INSERT INTO t VALUES (2)`;
        await commit(tx`INSERT INTO t VALUES (3)`, tx`INSERT INTO t VALUES (3)`); // duplicate key: COMMIT becomes a rollback
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await values()).toEqual([]);
    // No pooled connection is left inside a transaction.
    const [r] = await sql`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`;
    expect(r.n).toBe(0);
  });
});

describe('writeOutbox without NOTIFY', () => {
  it('is published by the relay at its next poll', async () => {
    const logger = pino({ level: 'silent' });
    const transport = createInProcessTransport({ logger });
    const seen: string[] = [];
    const sub = await transport.subscribe({ durable: 'ptx', subjects: ['ptx.quiet'], handler: async (m) => void seen.push(m.id) });
    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport, logger, pollMs: 20 });
    try {
      const id = await sql.begin((tx) => writeOutbox(tx, { subject: 'ptx.quiet', data: new Uint8Array([1]), notify: false }));
      for (let i = 0; i < 500 && !seen.includes(id); i++) await new Promise((r) => setTimeout(r, 10));
      expect(seen).toEqual([id]);
      expect(await relay.lag()).toBe(0);
    } finally {
      await relay.stop();
      await sub.stop();
      await transport.close();
    }
  });
});
