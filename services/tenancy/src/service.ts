import { fileURLToPath } from 'node:url';
import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import {
  bind,
  databaseSteps,
  dbReadiness,
  type Logger,
  repeatingStep,
  type Sql,
  type StartService,
  startGrpcServer,
  startOutboxRelay,
  startSteps,
} from '@imagegen/platform';
import { hashPassword, parseCredentialsKey, randomAlphanumeric, randomId } from './crypto.js';
import { createHandlers, handlerContext, sweepExpiredExports, tenancyTenantData } from './grpc.js';
import { findUserByEmail, insertBootstrapAdmin } from './repositories/admin-users.js';
import { sweepAuditLog } from './repositories/audit-log.js';
import { createUsageBatcher } from './usage-batcher.js';

export const SCHEMA = 'tenancy';
const AUDIT_SWEEP_EVERY_MS = 3_600_000;

/** One retention sweep: deletes the records older than `days`, in bounded batches; logs what it removed. */
export async function sweepAuditRecords(sql: Sql, days: number, logger: Logger): Promise<number> {
  let removed = 0;
  try {
    for (let n = await sweepAuditLog(sql, days); ; n = await sweepAuditLog(sql, days)) {
      removed += n;
      if (n < 10_000 || removed >= 1_000_000) break;
    }
    if (removed) logger.info({ removed, retentionDays: days }, 'audit log: records past retention removed');
  } catch (err) {
    logger.warn({ err }, 'audit log: retention sweep failed (retried at the next sweep)');
  }
  return removed;
}
const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** Creates the first super_admin from ADMIN_EMAIL / ADMIN_PASSWORD when no user has that email. */
export async function ensureBootstrapAdmin(sql: Sql, email: string | undefined, password: string | undefined, logger: Logger) {
  if (!email || !password) return;
  const normalized = email.trim().toLowerCase();
  if (await findUserByEmail(sql, normalized)) return;
  const hash = await hashPassword(password);
  const created = await insertBootstrapAdmin(sql, { userId: randomId('usr_'), email: normalized, passwordHash: hash });
  if (created) logger.info({ email: normalized }, 'created the first super_admin (the configured admin email and password)');
}

/** Tenants, API keys, provider credentials, admin users, sessions and invitations (schema `tenancy`). */
export const start: StartService = (ctx) =>
  startSteps({ logger: ctx.logger }, async (step) => {
    const { config, logger } = ctx;
    // Refuse to start without a key for provider credentials at rest.
    const credentialsKey = parseCredentialsKey(config.credentialsKey);
    const sql = await databaseSteps(step, ctx.config, { service: 'tenancy', schema: SCHEMA, migrations: MIGRATIONS });
    await step('bootstrap admin', () => ensureBootstrapAdmin(sql, config.adminEmail, config.adminPassword, logger));
    const dummyPasswordHash = await hashPassword(randomAlphanumeric(32));
    const usage = await step(
      'usage batcher',
      () => createUsageBatcher(sql, logger),
      (u) => u.stop(),
    );
    // Readiness (the ops /readyz and the gRPC Probe/Ready the gateway's /readyz asks): the database answers.
    const ready = dbReadiness(sql);
    const deps = {
      sql,
      credentialsKey,
      eventsPrefix: config.eventsPrefix,
      usage,
      dummyPasswordHash,
      signingSecretGraceMs: config.signingSecretGraceMs,
    };
    const handlers = createHandlers(deps);
    const grpc = await step(
      'grpc server',
      () =>
        startGrpcServer({
          host: config.grpcHost,
          port: config.grpcPort,
          services: [bind(TenancyServiceService, handlers), tenancyTenantData(handlerContext(deps))],
          logger,
          ready,
        }),
      (g) => g.stop(config.shutdownGraceMs),
    );
    await step(
      'outbox relay',
      () => startOutboxRelay({ sql, schema: SCHEMA, transport: ctx.events, logger, maxAttempts: config.outboxMaxAttempts }),
      (r) => r.stop(),
    );
    // The audit log's retention (AUDIT_LOG_RETENTION_DAYS; 0 keeps every record): an hourly sweep on each replica.
    const retentionDays = config.auditLogRetentionDays;
    if (retentionDays > 0) {
      await repeatingStep(step, 'audit log retention', () => sweepAuditRecords(sql, retentionDays, logger), AUDIT_SWEEP_EVERY_MS);
    }
    // Tenant exports' ZIPs past EXPORT_RETENTION_DAYS (issue 40, item 4): removed hourly on each replica.
    await repeatingStep(step, 'export retention', () => sweepExpiredExports(sql, ctx.storage, logger), AUDIT_SWEEP_EVERY_MS);
    return { grpcAddress: grpc.address, ready };
  });
