import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createDb, createTestDatabase, migrate, type Sql } from '../src/db.js';

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
