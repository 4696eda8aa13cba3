import { fileURLToPath } from 'node:url';
import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import {
  bind,
  createDb,
  dbReadiness,
  type Logger,
  migrate,
  type Sql,
  type StartService,
  startGrpcServer,
  startOutboxRelay,
} from '@imagegen/platform';
import { hashPassword, parseCredentialsKey, randomAlphanumeric, randomId } from './crypto.js';
import { createHandlers } from './grpc.js';
import { findUserByEmail } from './store.js';
import { createUsageBatcher } from './usage-batcher.js';

export const SCHEMA = 'tenancy';
const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** Creates the first super_admin from ADMIN_EMAIL / ADMIN_PASSWORD when no user has that email. */
export async function ensureBootstrapAdmin(sql: Sql, email: string | undefined, password: string | undefined, logger: Logger) {
  if (!email || !password) return;
  const normalized = email.trim().toLowerCase();
  if (await findUserByEmail(sql, normalized)) return;
  const hash = await hashPassword(password);
  const rows = await sql`
    INSERT INTO admin_users (user_id, email, display_name, role, password_hash)
    VALUES (${randomId('usr_')}, ${normalized}, 'Administrator', 'super_admin', ${hash})
    ON CONFLICT ((lower(email))) DO NOTHING RETURNING user_id`;
  if (rows.length) logger.info({ email: normalized }, 'created the first super_admin (the configured admin email and password)');
}

/** Tenants, API keys, provider credentials, admin users, sessions and invitations (schema `tenancy`). */
export const start: StartService = async (ctx) => {
  const { config } = ctx;
  const logger = ctx.logger;
  // Refuse to start without a key for provider credentials at rest.
  const credentialsKey = parseCredentialsKey(config.credentialsKey);
  if (!config.databaseUrl) throw new Error('DATABASE_URL is required by the tenancy service');
  const sql = createDb(config.databaseUrl, { schema: SCHEMA, max: config.dbPoolMax });
  const cleanups: (() => Promise<unknown>)[] = [async () => sql.end({ timeout: 5 })];
  const stopAll = async () => {
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        logger.warn({ err }, 'tenancy: error while stopping');
      }
    }
  };
  try {
    await migrate(sql, SCHEMA, MIGRATIONS);
    await ensureBootstrapAdmin(sql, config.adminEmail, config.adminPassword, logger);
    const dummyPasswordHash = await hashPassword(randomAlphanumeric(32));
    const usage = createUsageBatcher(sql, logger);
    cleanups.push(() => usage.stop());
    // Readiness (the ops /readyz and the gRPC Probe/Ready the gateway's /readyz asks): the database answers.
    const ready = dbReadiness(sql);
    const handlers = createHandlers({ sql, credentialsKey, eventsPrefix: config.eventsPrefix, usage, dummyPasswordHash });
    const grpc = await startGrpcServer({
      host: config.grpcHost,
      port: config.grpcPort,
      services: [bind(TenancyServiceService, handlers)],
      logger,
      ready,
    });
    cleanups.push(() => grpc.stop(config.shutdownGraceMs));
    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport: ctx.events, logger, maxAttempts: ctx.config.outboxMaxAttempts });
    cleanups.push(() => relay.stop());
    return {
      grpcAddress: grpc.address,
      stop: stopAll,
      ready,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
};
