import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { QuotaCrossed } from '@imagegen/contracts/events/v1/events';
import { WebhookServiceService } from '@imagegen/contracts/webhooks/v1/webhooks';
import {
  bind,
  consumeOnce,
  databaseSteps,
  dbReadiness,
  decodeOrSkip,
  type RunningService,
  repeatingStep,
  type ServiceContext,
  type StartService,
  startGrpcServer,
  startSteps,
  subjectFor,
} from '@imagegen/platform';
import { DEFAULT_POLICY, type RetryPolicy, startDispatcher } from './dispatcher.js';
import { webhookHandlers } from './grpc.js';
import { SecretBox } from './signing.js';
import { insertDelivery, pruneOld, subscribedEndpoints } from './store.js';

export const SCHEMA = 'webhooks';
export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));
export const QUOTA_DURABLE = 'webhook-dispatcher-quota';

export interface WebhookOptions {
  policy?: Partial<RetryPolicy>;
  /** Per-attempt timeout (default: Config.webhooks.timeoutMs, WEBHOOK_TIMEOUT_MS, 10 s). */
  timeoutMs?: number;
  /** Longest sleep of the delivery loop (default: WEBHOOK_POLL_MS, else min(1 s, base/4)). */
  pollMs?: number;
}

/** The payload of SPEC 6 for a QuotaCrossed event. */
export function quotaPayload(e: QuotaCrossed): { event: string; body: string } {
  const event = e.threshold >= 100 ? 'quota.exceeded' : 'quota.warning';
  const body = JSON.stringify({
    event,
    threshold: e.threshold,
    tenant_id: e.tenantId,
    billing_period: e.billingPeriod,
    current_usage_mb: e.currentUsageMb,
    quota_mb: e.quotaMb,
    timestamp: e.occurredAt || new Date().toISOString(),
  });
  return { event, body };
}

/**
 * webhook-dispatcher: tenant webhook endpoints (WebhookService), a durable consumer turning QuotaCrossed
 * into persisted deliveries, and the delivery loop (signing, 10 s timeout, retries with exponential
 * backoff and jitter, auto-disable after 5 consecutive failures).
 */
export async function startWebhookDispatcher(ctx: ServiceContext, opts: WebhookOptions = {}): Promise<RunningService> {
  const logger = ctx.logger;
  const w = ctx.config.webhooks;
  const policy: RetryPolicy = {
    ...DEFAULT_POLICY,
    ...(w.retryBaseMs !== undefined ? { baseMs: w.retryBaseMs } : {}),
    ...(w.retryMaxMs !== undefined ? { maxMs: w.retryMaxMs } : {}),
    ...(w.maxAttempts !== undefined ? { maxAttempts: w.maxAttempts } : {}),
    ...opts.policy,
  };
  const timeoutMs = opts.timeoutMs ?? w.timeoutMs;
  const pollMs = opts.pollMs ?? w.pollMs ?? Math.max(10, Math.min(1000, Math.floor(policy.baseMs / 4)));
  const ca = ctx.config.webhookCaFile ? readFileSync(ctx.config.webhookCaFile, 'utf8') : undefined;
  const allowLoopback = ctx.config.allowLoopbackFetch;
  const secrets = new SecretBox(ctx.config.credentialsKey);
  return startSteps({ logger }, async (step) => {
    const sql = await databaseSteps(step, ctx.config, {
      service: 'webhook-dispatcher',
      schema: SCHEMA,
      migrations: MIGRATIONS_DIR,
      applicationName: 'imagegen-webhooks',
    });
    const dbReady = dbReadiness(sql);
    const dispatcher = await step(
      'delivery loop',
      () => startDispatcher({ sql, logger, secrets, policy, timeoutMs, pollMs, allowLoopback, ca }),
      (d) => d.stop(),
    );
    const grpc = await step(
      'grpc server',
      () =>
        startGrpcServer({
          host: ctx.config.grpcHost,
          port: ctx.config.grpcPort,
          services: [bind(WebhookServiceService, webhookHandlers({ sql, secrets, allowLoopback, wake: () => dispatcher.wake() }))],
          logger,
          ready: dbReady,
        }),
      (g) => g.stop(ctx.config.shutdownGraceMs),
    );
    await step(
      'quota consumer',
      () =>
        ctx.events.subscribe({
          durable: QUOTA_DURABLE,
          subjects: [subjectFor(ctx.config.eventsPrefix, 'usage.quota_crossed')],
          ackWaitMs: 10_000,
          handler: async (m) => {
            const e = decodeOrSkip(QuotaCrossed, m, logger);
            if (!e?.tenantId) return;
            const { event, body } = quotaPayload(e);
            let created = 0;
            await consumeOnce(sql, QUOTA_DURABLE, m.id, async (tx) => {
              for (const ep of await subscribedEndpoints(tx, e.tenantId, event)) {
                const row = await insertDelivery(tx, {
                  id: randomUUID(),
                  endpointId: ep.id,
                  tenantId: e.tenantId,
                  event,
                  sourceEventId: m.id,
                  payload: body,
                });
                if (row) created++;
              }
            });
            if (created > 0) dispatcher.wake();
          },
        }),
      (sub) => sub.stop(),
    );
    const prune = () => pruneOld(sql, QUOTA_DURABLE).catch((err) => logger.warn({ err }, 'webhook retention failed'));
    await repeatingStep(step, 'retention', prune, 3_600_000);
    return { grpcAddress: grpc.address, ready: async () => (await dbReady()) && (await ctx.events.healthy()) };
  });
}

export const start: StartService = (ctx) => startWebhookDispatcher(ctx);
