import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { createDb, createTestDatabase, migrate, NO_FLUSH_CTE, NO_TRANSACTION_MARKER, type Sql, splitStatements } from '../src/db.js';

let db: { url: string; drop: () => Promise<void> };
let sql: Sql;
const dir = mkdtempSync(join(tmpdir(), 'migrations-'));

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'platformdb');
  sql = createDb(db.url, { schema: 'svc' });
  writeFileSync(join(dir, '001_things.sql'), 'CREATE TABLE things (id serial PRIMARY KEY, name text NOT NULL);');
  writeFileSync(join(dir, '002_more.sql'), "INSERT INTO things (name) VALUES ('first');");
  writeFileSync(join(dir, 'README.md'), 'not a migration');
});
afterAll(async () => {
  await sql.end();
  await db.drop();
});

test('numbered migrations apply once, in order, even when replicas race', async () => {
  const other = createDb(db.url, { schema: 'svc' });
  const [a, b] = await Promise.all([migrate(sql, 'svc', dir), migrate(other, 'svc', dir)]);
  await other.end();
  expect([...a, ...b].sort()).toEqual(['001_things.sql', '002_more.sql']);
  expect(await migrate(sql, 'svc', dir)).toEqual([]);
  const rows = await sql`SELECT name FROM things`;
  expect(rows.map((r) => r.name)).toEqual(['first']);
});

test('every schema gets the outbox and processed_events tables, reached through search_path', async () => {
  const tables = await sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'svc' ORDER BY table_name`;
  expect(tables.map((t) => t.table_name)).toEqual(expect.arrayContaining(['outbox', 'processed_events', 'schema_migrations', 'things']));
});

test('a failing migration leaves nothing half-applied', async () => {
  writeFileSync(join(dir, '003_broken.sql'), "INSERT INTO things (name) VALUES ('second'); SELECT no_such_function();");
  await expect(migrate(sql, 'svc', dir)).rejects.toThrow();
  const rows = await sql`SELECT name FROM things`;
  expect(rows).toHaveLength(1);
  const applied = await sql`SELECT name FROM schema_migrations`;
  expect(applied.map((r) => r.name)).not.toContain('003_broken.sql');
});

test('an existing schema from before dead letters is upgraded in place, and a re-run takes no lock on the outbox', async () => {
  // The platform tables as they were before outbox dead letters, with an unpublished row.
  await sql.unsafe(`
    CREATE SCHEMA legacy;
    CREATE TABLE legacy.outbox (
      id uuid PRIMARY KEY, subject text NOT NULL, payload bytea NOT NULL, headers jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now(), published_at timestamptz);
    CREATE INDEX outbox_unpublished ON legacy.outbox (created_at) WHERE published_at IS NULL;
    CREATE TABLE legacy.processed_events (consumer text NOT NULL, event_id text NOT NULL,
      processed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (consumer, event_id));
    INSERT INTO legacy.outbox (id, subject, payload) VALUES ('00000000-0000-4000-8000-000000000001', 'imagegen.old.event', '\\x01');`);
  await migrate(sql, 'legacy');
  const cols = await sql`SELECT column_name FROM information_schema.columns WHERE table_schema = 'legacy' AND table_name = 'outbox'`;
  expect(cols.map((c) => c.column_name)).toEqual(expect.arrayContaining(['attempts', 'last_error']));
  const [old] = await sql`SELECT attempts, last_error, published_at FROM legacy.outbox`;
  expect(old).toEqual({ attempts: 0, last_error: null, published_at: null });
  const dl =
    await sql`SELECT column_name FROM information_schema.columns WHERE table_schema = 'legacy' AND table_name = 'outbox_dead_letter'`;
  expect(dl.map((c) => c.column_name)).toEqual(
    expect.arrayContaining(['id', 'subject', 'payload', 'headers', 'created_at', 'attempts', 'reason', 'error', 'dead_lettered_at']),
  );

  // Every start re-applies the platform tables: with a writer's transaction open on the outbox (as a
  // relay's is while it publishes) that must neither wait for it nor hold new writers behind it.
  const writer = createDb(db.url, { schema: 'legacy', max: 1 });
  const other = postgres(db.url, { max: 1, onnotice: () => {}, connection: { search_path: 'legacy', lock_timeout: 2000 } });
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let inserted!: () => void;
  const insertedP = new Promise<void>((r) => {
    inserted = r;
  });
  const tx = writer.begin(async (t) => {
    await t`INSERT INTO outbox (id, subject, payload) VALUES ('00000000-0000-4000-8000-000000000002', 'imagegen.old.other', '\\x02')`;
    inserted();
    await held;
  });
  try {
    await insertedP;
    await expect(migrate(other as unknown as Sql, 'legacy')).resolves.toEqual([]);
  } finally {
    release();
    await tx;
    await writer.end();
    await other.end();
  }
  const [{ n }] = await sql`SELECT count(*)::int AS n FROM legacy.outbox`;
  expect(n).toBe(2);
});

test('a no-transaction migration builds its indexes concurrently (refused inside a transaction), after the ones before it', async () => {
  const d = mkdtempSync(join(tmpdir(), 'migrations-cic-'));
  const s = createDb(db.url, { schema: 'cic' });
  try {
    writeFileSync(
      join(d, '001_rows.sql'),
      'CREATE TABLE rows (id int PRIMARY KEY, v text); INSERT INTO rows SELECT g, md5(g::text) FROM generate_series(1, 50000) g;',
    );
    writeFileSync(
      join(d, '002_index.sql'),
      `${NO_TRANSACTION_MARKER}\n-- a comment\nCREATE INDEX CONCURRENTLY IF NOT EXISTS rows_v ON rows (v);\nCREATE INDEX CONCURRENTLY IF NOT EXISTS rows_v_id ON rows (v, id); -- trailing\n`,
    );
    writeFileSync(join(d, '003_after.sql'), "INSERT INTO rows VALUES (0, 'after');");
    expect(await migrate(s, 'cic', d)).toEqual(['001_rows.sql', '002_index.sql', '003_after.sql']);
    const valid = await s`
      SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'cic' AND c.relname LIKE 'rows_v%' ORDER BY 1`;
    expect(valid).toEqual([
      { relname: 'rows_v', indisvalid: true },
      { relname: 'rows_v_id', indisvalid: true },
    ]);
    // search_path of the pooled connection that ran it is back to the pool's own.
    for (let i = 0; i < 5; i++) expect((await s`SELECT current_schema() AS s`)[0].s).toBe('cic');
    expect(await migrate(s, 'cic', d)).toEqual([]);
  } finally {
    await s.end();
  }
});

test('a no-transaction migration that failed halfway is run again, its invalid index dropped and rebuilt', async () => {
  const d = mkdtempSync(join(tmpdir(), 'migrations-cic2-'));
  const s = createDb(db.url, { schema: 'cic2' });
  try {
    writeFileSync(join(d, '001_rows.sql'), "CREATE TABLE rows (id int, v text); INSERT INTO rows VALUES (1, 'a'), (2, 'a');");
    writeFileSync(
      join(d, '002_unique.sql'),
      `${NO_TRANSACTION_MARKER}\nCREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rows_v_unique ON rows (v);\n`,
    );
    // The duplicate makes the concurrent build fail: it leaves an INVALID index and the migration unapplied.
    await expect(migrate(s, 'cic2', d)).rejects.toThrow(/duplicate|unique/i);
    const [left] = await s`SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'rows_v_unique'`;
    expect(left.indisvalid).toBe(false);
    expect((await s`SELECT name FROM cic2.schema_migrations`).map((r) => r.name)).toEqual(['001_rows.sql']);
    // Fixed data: the re-run drops the invalid index (IF NOT EXISTS would take it as built) and builds it.
    await s`UPDATE cic2.rows SET v = 'b' WHERE id = 2`;
    expect(await migrate(s, 'cic2', d)).toEqual(['002_unique.sql']);
    const [built] = await s`SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'rows_v_unique'`;
    expect(built.indisvalid).toBe(true);
    await expect(s`INSERT INTO cic2.rows VALUES (3, 'a')`).rejects.toThrow(/duplicate/);
  } finally {
    await s.end();
  }
});

test('a replica waiting for the migration lock does not deadlock with the concurrent index build of the one holding it', async () => {
  // CI once saw this: replica A builds an index concurrently under the lock; replica B waits for the lock; the
  // build waits for every transaction older than its snapshot, so B must not wait inside one.
  const d = mkdtempSync(join(tmpdir(), 'migrations-cic3-'));
  const [a, b, writer] = [0, 1, 2].map(() => createDb(db.url, { schema: 'cic3' }));
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  try {
    writeFileSync(join(d, '001_rows.sql'), 'CREATE TABLE rows (id int PRIMARY KEY, v text);');
    await migrate(a, 'cic3', d);
    writeFileSync(join(d, '002_index.sql'), `${NO_TRANSACTION_MARKER}\nCREATE INDEX CONCURRENTLY IF NOT EXISTS rows_v ON rows (v);\n`);
    // A writer's open transaction holds the build in its first phase, so B arrives while A holds the lock.
    let inserted!: () => void;
    const insertedP = new Promise<void>((r) => {
      inserted = r;
    });
    const tx = writer.begin(async (t) => {
      await t`INSERT INTO rows VALUES (1, 'x')`;
      inserted();
      await held;
    });
    await insertedP;
    const first = migrate(a, 'cic3', d);
    await waitFor(
      async () =>
        (
          await a`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%CREATE INDEX CONCURRENTLY%' AND wait_event_type = 'Lock'`
        )[0].n === 1,
      { message: "A's index build waiting for the writer's transaction" },
    );
    const second = migrate(b, 'cic3', d);
    // B has asked for the lock A holds (and was refused): it waits while A's build waits for the writer.
    await waitFor(
      async () =>
        (
          await a`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%'`
        )[0].n >= 1,
      { message: 'B polling for the migration lock' },
    );
    release();
    await tx;
    expect([...(await first), ...(await second)]).toEqual(['002_index.sql']);
    const [built] = await a`SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'rows_v'`;
    expect(built.indisvalid).toBe(true);
  } finally {
    release();
    await Promise.all([a.end(), b.end(), writer.end()]);
  }
});

test('statements of a no-transaction migration split at line-ending semicolons', () => {
  expect(splitStatements('-- head\nCREATE INDEX a ON t (x);\n\n-- only a comment\nDROP INDEX IF EXISTS b; -- why\nSELECT 1;')).toEqual([
    '-- head\nCREATE INDEX a ON t (x)',
    '-- only a comment\nDROP INDEX IF EXISTS b',
    'SELECT 1',
  ]);
});

test('NO_FLUSH_CTE turns synchronous_commit off for its own statement only, never for the pooled connection', async () => {
  const one = createDb(db.url, { schema: 'svc', max: 1 });
  try {
    const [inside] = await one`WITH ${one.unsafe(NO_FLUSH_CTE)} SELECT current_setting('synchronous_commit') AS v FROM no_flush`;
    expect(inside.v).toBe('off');
    // The same (only) connection, next statement: back to the server's setting.
    const [after] = await one`SELECT current_setting('synchronous_commit') AS v`;
    expect(after.v).toBe('on');
    // A write through it commits like any other: visible at once to another connection.
    await one`WITH ${one.unsafe(NO_FLUSH_CTE)} INSERT INTO things (name) SELECT 'unflushed' FROM no_flush`;
    expect(await sql`SELECT 1 FROM things WHERE name = 'unflushed'`).toHaveLength(1);
  } finally {
    await one.end();
  }
});

test('a rollback: the previous version starts on a schema migrated by the next one (more files applied than it knows) without refusing or re-running', async () => {
  const next = mkdtempSync(join(tmpdir(), 'migrations-next-'));
  const previous = mkdtempSync(join(tmpdir(), 'migrations-prev-'));
  writeFileSync(join(next, '001_base.sql'), 'CREATE TABLE base (id int PRIMARY KEY);');
  writeFileSync(join(next, '002_expand.sql'), 'ALTER TABLE base ADD COLUMN note text;');
  writeFileSync(join(previous, '001_base.sql'), 'CREATE TABLE base (id int PRIMARY KEY);');
  const s = createDb(db.url, { schema: 'rollback' });
  try {
    expect(await migrate(s, 'rollback', next)).toEqual(['001_base.sql', '002_expand.sql']);
    // The previous version's files are a prefix of the applied ones: nothing to apply, 002 (unknown to it) kept.
    expect(await migrate(s, 'rollback', previous)).toEqual([]);
    const applied = await s`SELECT name FROM schema_migrations ORDER BY name`;
    expect(applied.map((r) => r.name)).toEqual(['001_base.sql', '002_expand.sql']);
    const cols =
      await s`SELECT column_name FROM information_schema.columns WHERE table_schema = 'rollback' AND table_name = 'base' ORDER BY column_name`;
    expect(cols.map((c) => c.column_name)).toEqual(['id', 'note']);
    // Upgrading again finds everything applied.
    expect(await migrate(s, 'rollback', next)).toEqual([]);
  } finally {
    await s.end();
  }
});
