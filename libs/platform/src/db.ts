import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
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
  last_error text
);
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'outbox'::regclass AND attname = 'attempts' AND NOT attisdropped) THEN
    ALTER TABLE outbox ADD COLUMN IF NOT EXISTS attempts int NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS last_error text;
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
 * Applies `NNN_name.sql` files from `dir` in order, each once, inside one transaction per file,
 * under a transaction-scoped advisory lock so concurrent replicas never migrate twice.
 */
export async function migrate(sql: Sql, schema: string, dir?: string): Promise<string[]> {
  const files = dir ? (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort() : [];
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`imagegen-migrate:${schema}`}))`;
    await tx.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await tx.unsafe(`SET LOCAL search_path TO "${schema}"`);
    await tx.unsafe(`CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    await tx.unsafe(PLATFORM_TABLES);
    const done = new Set((await tx`SELECT name FROM schema_migrations`).map((r) => r.name as string));
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(join(dir as string, file), 'utf8'));
      await tx`INSERT INTO schema_migrations (name) VALUES (${file})`;
      applied.push(file);
    }
  });
  return applied;
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
