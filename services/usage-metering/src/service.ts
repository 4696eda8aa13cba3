import { fileURLToPath } from 'node:url';
import { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import {
  bind,
  createDb,
  dbReadiness,
  type EventMessage,
  migrate,
  type RunningService,
  type ServiceContext,
  type StartService,
  startGrpcServer,
  startOutboxRelay,
} from '@imagegen/platform';
import { startUsageConsumer, USAGE_DURABLE } from './consumer.js';
import { usageHandlers } from './grpc.js';
import { MonthBytesCache } from './month-bytes.js';
import { pruneOld } from './store.js';
import { TenantLimitsCache, type TenantLimitsSource, tenancySource } from './tenants.js';

export const SCHEMA = 'usage';
export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));

export interface UsageOptions {
  /** Replaces tenancy's GetTenant as the source of quotas (service tests). */
  tenantLimits?: TenantLimitsSource;
  /** Cache lifetime of a tenant's quota and rate limit (default: Config.usage.tenantCacheMs, USAGE_TENANT_CACHE_MS). */
  tenantCacheMs?: number;
  /** Events in flight on the durable consumer, applied together (default: Config.usage.consumerConcurrency, USAGE_CONSUMER_CONCURRENCY). */
  concurrency?: number;
  /** JetStream durable name (default 'usage-metering'); the dedupe key stays the same, so a new
   * durable replays the stream without counting anything twice (tests). */
  durable?: string;
  /** Called after each event's transaction committed (benchmarks). */
  onApplied?: (m: EventMessage, applied: boolean) => void;
  /** How long an event at rest waits for the ones behind it (default: Config.usage.batchLingerMs, USAGE_BATCH_LINGER_MS). */
  batchLingerMs?: number;
  /** Called with the size of each batch applied (tests). */
  onBatch?: (messages: number) => void;
}

/**
 * usage-metering: monthly usage and quota state from ImageStored, ImageDeleted and ExecutionFinished
 * (durable, idempotent consumer), QuotaCrossed at 80% and 100% once per tenant and month (outbox),
 * and the UsageService RPCs (CheckQuota, GetQuota, GetUsage, GetPlatformUsage).
 */
export async function startUsageMetering(ctx: ServiceContext, opts: UsageOptions = {}): Promise<RunningService> {
  const logger = ctx.logger;
  if (!ctx.config.databaseUrl) throw new Error('usage-metering needs DATABASE_URL');
  const sql = createDb(ctx.config.databaseUrl, { schema: SCHEMA, max: ctx.config.dbPoolMax, applicationName: 'imagegen-usage' });
  const cleanups: (() => Promise<void>)[] = [async () => void (await sql.end({ timeout: 5 }))];
  const stopAll = async () => {
    for (const c of cleanups.reverse()) await c().catch((err) => logger.warn({ err }, 'usage-metering stop step failed'));
    cleanups.length = 0;
  };
  try {
    await migrate(sql, SCHEMA, MIGRATIONS_DIR);
    let source = opts.tenantLimits;
    if (!source) {
      const t = tenancySource(ctx);
      source = t.source;
      cleanups.push(async () => t.close());
    }
    // Readiness is the database only: the gRPC API answers from PostgreSQL, so during a NATS outage this
    // service stays in its Service (the consumer catches up when NATS is back; the outbox keeps events).
    const ready = dbReadiness(sql);
    const tenantCacheMs = opts.tenantCacheMs ?? ctx.config.usage.tenantCacheMs;
    const tenants = new TenantLimitsCache(source, tenantCacheMs);
    const monthBytes = new MonthBytesCache(sql, tenantCacheMs);
    const grpc = await startGrpcServer({
      host: ctx.config.grpcHost,
      port: ctx.config.grpcPort,
      services: [bind(UsageServiceService, usageHandlers({ sql, tenants, monthBytes }))],
      logger,
      ready,
    });
    cleanups.push(() => grpc.stop(ctx.config.shutdownGraceMs));
    const relay = await startOutboxRelay({ sql, schema: SCHEMA, transport: ctx.events, logger, maxAttempts: ctx.config.outboxMaxAttempts });
    cleanups.push(() => relay.stop());
    const consumer = await startUsageConsumer({
      sql,
      events: ctx.events,
      eventsPrefix: ctx.config.eventsPrefix,
      tenants,
      logger,
      concurrency: opts.concurrency ?? ctx.config.usage.consumerConcurrency,
      parallelBatches: ctx.config.usage.consumerParallelBatches,
      lingerMs: opts.batchLingerMs ?? ctx.config.usage.batchLingerMs,
      onBatch: opts.onBatch,
      onApplied: opts.onApplied,
      onTotals: (totals) => monthBytes.applied(totals),
      durable: opts.durable,
    });
    cleanups.push(() => consumer.stop());
    const prune = () => pruneOld(sql, USAGE_DURABLE).catch((err) => logger.warn({ err }, 'usage retention failed'));
    const pruneTimer = setInterval(prune, 3_600_000);
    pruneTimer.unref();
    cleanups.push(async () => clearInterval(pruneTimer));
    void prune();
    return {
      grpcAddress: grpc.address,
      stop: stopAll,
      ready,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

export const start: StartService = (ctx) => startUsageMetering(ctx);
