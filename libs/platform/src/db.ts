import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import type { Config } from './config.js';
import type { Step } from './lifecycle.js';
import { telemetryRunning, traceSql } from './telemetry.js';

export type Sql = postgres.Sql<Record<string, unknown>>;
export type TransactionSql = postgres.TransactionSql<Record<string, unknown>>;

export interface DbOptions {
  /** The service's own schema: every unqualified table name resolves there. */
  schema: string;
  max?: number;
  applicationName?: string;
}

/**
 * A postgres.js pool whose search_path is the service's own schema (ARCHITECTURE rule 1). When tracing runs
 * in this process (the preload, runStandalone and the stack start it before any service makes its pool), the
 * pool is wrapped by traceSql: awaited queries and transactions inside a trace get client spans. Without
 * tracing the pool is returned as is, at no cost.
 */
export function createDb(url: string, opts: DbOptions): Sql {
  const sql = postgres(url, {
    max: opts.max ?? 5,
    idle_timeout: 30,
    // Fail fast while the database is unreachable (ARCHITECTURE rule 8): a connect that takes longer than
    // this fails (CONNECT_TIMEOUT, answered 503 + Retry-After by knownAppError); postgres.js's default is 30 s.
    connect_timeout: CONNECT_TIMEOUT_S,
    // Reconnect delay after failed connects. postgres.js's default grows to 10-20 s after 7 failures in a row
    // (shared by the whole pool, reset only by a successful connect), so after an outage of a few seconds
    // queries waited that long for a connection and the first success came 10-20 s after the database did.
    backoff: reconnectBackoff,
    onnotice: () => {},
    connection: {
      search_path: opts.schema,
      application_name: opts.applicationName ?? `imagegen-${opts.schema}`,
    },
    types: {
      // bigint columns (sizes in bytes, counters) come back as JS numbers; they stay far below 2^53.
      bigint: { to: 20, from: [20], serialize: (v: number | bigint) => String(v), parse: (v: string) => Number(v) },
    },
    transform: { undefined: null },
  }) as unknown as Sql;
  return telemetryRunning() ? traceSql(sql, opts.schema) : sql;
}

const CONNECT_TIMEOUT_S = 2;

/**
 * A CTE (`no_flush`) that turns synchronous_commit off for the transaction of the one statement that names it
 * (its implicit transaction), so its COMMIT answers without waiting for the WAL flush (a one-row insert's
 * commit several times faster; docs/BENCHMARKS.md). Commits stay atomic and visible at once; only a PostgreSQL crash
 * within about wal_writer_delay (200 ms) can lose them. Only for writes whose loss in such a crash is harmless
 * on its own: a later write that depends on them (an execution's final state after its start) commits with a
 * flush, which flushes the WAL written before it too, and when none comes the request failed with the
 * database. The statement must read from the CTE (`FROM no_flush` or a scalar `(SELECT off FROM no_flush)`)
 * for it to run. Interpolate with sql.unsafe(NO_FLUSH_CTE).
 */
export const NO_FLUSH_CTE = "no_flush AS (SELECT set_config('synchronous_commit', 'off', true) AS off)";

/** Seconds before the next connect attempt after `retries` failures in a row: 50 ms doubling, at most ~0.5 s. */
export function reconnectBackoff(retries: number): number {
  return Math.min(0.05 * 2 ** Math.max(0, retries - 1), 0.5) * (0.5 + Math.random() / 2);
}

/**
 * Readiness of a service that needs its database: a `SELECT 1` on the service's pool within `timeoutMs`,
 * its answer cached for `cacheMs` (probes of every replica, every few seconds, must not load the database)
 * and shared by concurrent probes. Never throws.
 */
export function dbReadiness(sql: Sql, opts: { timeoutMs?: number; cacheMs?: number } = {}): () => Promise<boolean> {
  const timeoutMs = opts.timeoutMs ?? 1000;
  const cacheMs = opts.cacheMs ?? 1000;
  let last: { at: number; ok: boolean } | undefined;
  let inflight: Promise<boolean> | undefined;
  return () => {
    if (last && Date.now() - last.at < cacheMs) return Promise.resolve(last.ok);
    inflight ??= new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        resolve(ok);
      };
      sql`SELECT 1`.then(
        () => done(true),
        () => done(false),
      );
    }).then((ok) => {
      last = { at: Date.now(), ok };
      inflight = undefined;
      return ok;
    });
    return inflight;
  };
}

/**
 * Platform-owned tables every schema gets: the transactional outbox, its dead letters and the consumer
 * dedupe table. Applied by every migrate(), so it must stay idempotent and lock-free on an existing schema:
 * columns and indexes added later go through a catalog check (a bare ADD COLUMN IF NOT EXISTS or CREATE
 * INDEX IF NOT EXISTS locks the outbox on every start even when there is nothing to do, waiting for open
 * writers and a relay's transaction, and holding every new writer behind it).
 */
const PLATFORM_TABLES = `
CREATE TABLE IF NOT EXISTS outbox (
  id uuid PRIMARY KEY,
  subject text NOT NULL,
  payload bytea NOT NULL,
  headers jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  published_at timestamptz,
  attempts int NOT NULL DEFAULT 0,
  last_error text,
  relay_after timestamptz
);
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'outbox'::regclass AND attname = 'attempts' AND NOT attisdropped) THEN
    ALTER TABLE outbox ADD COLUMN IF NOT EXISTS attempts int NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS last_error text;
  END IF;
  -- relay_after: a row its writer publishes itself (DirectPublisher) is the relay's only after this time.
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'outbox'::regclass AND attname = 'relay_after' AND NOT attisdropped) THEN
    ALTER TABLE outbox ADD COLUMN IF NOT EXISTS relay_after timestamptz;
  END IF;
  IF to_regclass('outbox_unpublished') IS NULL THEN
    CREATE INDEX IF NOT EXISTS outbox_unpublished ON outbox (created_at) WHERE published_at IS NULL;
  END IF;
END $$;
CREATE TABLE IF NOT EXISTS outbox_dead_letter (
  id uuid PRIMARY KEY,
  subject text NOT NULL,
  payload bytea NOT NULL,
  headers jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL,
  attempts int NOT NULL DEFAULT 0,
  reason text NOT NULL,
  error text,
  dead_lettered_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS processed_events (
  consumer text NOT NULL,
  event_id text NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, event_id)
);
`;

/**
 * A migration whose first line is this runs outside a transaction, one statement at a time: for
 * `CREATE INDEX CONCURRENTLY` (and `DROP INDEX CONCURRENTLY`) on tables that may already be large, which
 * PostgreSQL refuses inside a transaction and which leave the table writable while they build. Its statements
 * are plain ones, each ending with `;` at the end of a line (no DO blocks or function bodies), and each must be
 * idempotent (IF NOT EXISTS / IF EXISTS): a run that stops halfway is run again from the start.
 */
export const NO_TRANSACTION_MARKER = '-- migrate: no-transaction';

/**
 * Applies `NNN_name.sql` files from `dir` in order, each once, under an advisory lock so concurrent replicas
 * never migrate twice. Consecutive ordinary files are applied in one transaction (all or none); a file marked
 * NO_TRANSACTION_MARKER is applied on its own, outside any transaction, after those before it committed.
 *
 * The lock is a session lock taken with pg_try_advisory_lock in a loop, never waited for inside a statement or
 * a transaction: a `CREATE INDEX CONCURRENTLY` run by the replica holding it waits for every transaction older
 * than its snapshot, and a replica waiting for the lock in one would be such a transaction (a deadlock).
 */
export async function migrate(sql: Sql, schema: string, dir?: string): Promise<string[]> {
  const names = dir ? (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort() : [];
  const files = await Promise.all(names.map(async (name) => ({ name, text: await readFile(join(dir as string, name), 'utf8') })));
  const conn = await sql.reserve();
  const lock = `imagegen-migrate:${schema}`;
  try {
    while (!(await conn`SELECT pg_try_advisory_lock(hashtext(${lock})) AS locked`)[0].locked) {
      await sleep(MIGRATION_LOCK_POLL_MS + Math.random() * MIGRATION_LOCK_POLL_MS);
    }
    try {
      return await applyMigrations(conn, schema, files);
    } finally {
      await conn.unsafe('RESET search_path').catch(() => {});
      await conn`SELECT pg_advisory_unlock(hashtext(${lock}))`.catch(() => {});
    }
  } finally {
    conn.release();
  }
}

const MIGRATION_LOCK_POLL_MS = 100;

/** The body of migrate(), on its reserved connection that holds the migration lock. */
async function applyMigrations(conn: postgres.ReservedSql, schema: string, files: { name: string; text: string }[]) {
  const applied: string[] = [];
  let inTransaction = false;
  try {
    // The platform tables and the record of applied files, with the first batch of ordinary files.
    await conn.unsafe('BEGIN');
    inTransaction = true;
    await conn.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await conn.unsafe(`SET search_path TO "${schema}"`);
    await conn.unsafe(
      `CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    await conn.unsafe(PLATFORM_TABLES);
    const done = new Set((await conn`SELECT name FROM schema_migrations`).map((r) => r.name as string));
    for (const file of files) {
      if (done.has(file.name)) continue;
      if (file.text.startsWith(NO_TRANSACTION_MARKER)) {
        if (inTransaction) await conn.unsafe('COMMIT');
        inTransaction = false;
        await applyWithoutTransaction(conn, schema, file.text);
      } else {
        if (!inTransaction) await conn.unsafe('BEGIN');
        inTransaction = true;
        await conn.unsafe(file.text);
      }
      await conn`INSERT INTO schema_migrations (name) VALUES (${file.name})`;
      applied.push(file.name);
    }
    if (inTransaction) await conn.unsafe('COMMIT');
    return applied;
  } catch (err) {
    if (inTransaction) await conn.unsafe('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** One NO_TRANSACTION_MARKER file, statement by statement (the caller holds the migration lock). */
async function applyWithoutTransaction(conn: postgres.ReservedSql, schema: string, text: string): Promise<void> {
  // A concurrent build that failed or was interrupted leaves an INVALID index, which IF NOT EXISTS would take
  // as built: drop those of this schema first (no other migration runs now: we hold the lock).
  const invalid = await conn`
    SELECT format('%I.%I', n.nspname, c.relname) AS name FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT i.indisvalid AND n.nspname = ${schema}`;
  for (const r of invalid) await conn.unsafe(`DROP INDEX CONCURRENTLY IF EXISTS ${r.name}`);
  for (const statement of splitStatements(text)) await conn.unsafe(statement);
}

/** The statements of a NO_TRANSACTION_MARKER file: split after each `;` that ends a line; comment-only parts dropped. */
export function splitStatements(text: string): string[] {
  return text
    .split(/;[ \t]*(?:--[^\n]*)?\r?\n|;[ \t]*$/)
    .map((s) => s.trim())
    .filter((s) => s.replace(/--[^\n]*/g, '').trim() !== '');
}

/** Creates a fresh database on the server of `baseUrl` (tests: one database per test file). */
export async function createTestDatabase(
  baseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  prefix = 'it',
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`.toLowerCase();
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE "${name}"`);
  await admin.end();
  const u = new URL(baseUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: async () => {
      const a = postgres(baseUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await a.end();
    },
  };
}

/**
 * The first steps of every service that owns a schema: its connection pool (closed last) and its migrations.
 * `service` names it in the error when DATABASE_URL is missing.
 */
export async function databaseSteps(
  step: Step,
  config: Pick<Config, 'databaseUrl' | 'dbPoolMax'>,
  opts: { service: string; schema: string; migrations: string; applicationName?: string },
): Promise<Sql> {
  const url = config.databaseUrl;
  if (!url) throw new Error(`DATABASE_URL is required by the ${opts.service} service`);
  const sql = await step(
    'database pool',
    () => createDb(url, { schema: opts.schema, max: config.dbPoolMax, applicationName: opts.applicationName }),
    (pool) => pool.end({ timeout: 5 }),
  );
  await step('migrations', () => migrate(sql, opts.schema, opts.migrations));
  return sql;
}
