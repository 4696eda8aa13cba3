import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, createTestDatabase, migrate, type Sql } from '../../src/db.js';
import { pipelinedTransaction } from '../../src/events/index.js';

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
