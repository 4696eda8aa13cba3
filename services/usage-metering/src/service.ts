import { fileURLToPath } from 'node:url';
import { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import {
  bind,
  databaseSteps,
  dbReadiness,
  type EventMessage,
  type RunningService,
  repeatingStep,
  type ServiceContext,
  type StartService,
  startGrpcServer,
  startOutboxRelay,
  startSteps,
} from '@imagegen/platform';
import { startUsageConsumer, USAGE_DURABLE } from './consumer.js';
import { usageHandlers } from './grpc.js';
import { MonthBytesCache } from './month-bytes.js';
import { pruneOld } from './store.js';
import { usageTenantData } from './tenant-data.js';
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
  return startSteps({ logger: ctx.logger }, async (step) => {
    const { config, logger } = ctx;
    const sql = await databaseSteps(step, ctx.config, {
      service: 'usage-metering',
      schema: SCHEMA,
      migrations: MIGRATIONS_DIR,
      applicationName: 'imagegen-usage',
    });
    const source =
      opts.tenantLimits ??
      (
        await step(
          'tenancy client',
          () => tenancySource(ctx),
          (t) => t.close(),
        )
      ).source;
    // Readiness is the database only: the gRPC API answers from PostgreSQL, so during a NATS outage this
    // service stays in its Service (the consumer catches up when NATS is back; the outbox keeps events).
    const ready = dbReadiness(sql);
    const tenantCacheMs = opts.tenantCacheMs ?? config.usage.tenantCacheMs;
    const tenants = new TenantLimitsCache(source, tenantCacheMs);
    const monthBytes = new MonthBytesCache(sql, tenantCacheMs);
    const grpc = await step(
      'grpc server',
      () =>
        startGrpcServer({
          host: config.grpcHost,
          port: config.grpcPort,
          services: [bind(UsageServiceService, usageHandlers({ sql, tenants, monthBytes })), usageTenantData(sql)],
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
    await step(
      'usage consumer',
      () =>
        startUsageConsumer({
          sql,
          events: ctx.events,
          eventsPrefix: config.eventsPrefix,
          tenants,
          logger,
          concurrency: opts.concurrency ?? config.usage.consumerConcurrency,
          parallelBatches: config.usage.consumerParallelBatches,
          lingerMs: opts.batchLingerMs ?? config.usage.batchLingerMs,
          onBatch: opts.onBatch,
          onApplied: opts.onApplied,
          onTotals: (totals) => monthBytes.applied(totals),
          durable: opts.durable,
        }),
      (c) => c.stop(),
    );
    const prune = () => pruneOld(sql, USAGE_DURABLE).catch((err) => logger.warn({ err }, 'usage retention failed'));
    await repeatingStep(step, 'retention', prune, 3_600_000);
    return { grpcAddress: grpc.address, ready };
  });
}

export const start: StartService = (ctx) => startUsageMetering(ctx);
