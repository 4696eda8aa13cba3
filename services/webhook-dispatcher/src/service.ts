import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ExecutionFinished, ImageDeleted, ImageStored, QuotaCrossed } from '@imagegen/contracts/events/v1/events';
import { WebhookServiceService } from '@imagegen/contracts/webhooks/v1/webhooks';
import {
  bind,
  consumeOnce,
  databaseSteps,
  dbReadiness,
  decodeOrSkip,
  type EventMessage,
  type Logger,
  type RunningService,
  repeatingStep,
  type ServiceContext,
  type Sql,
  type StartService,
  startGrpcServer,
  startSteps,
  subjectFor,
} from '@imagegen/platform';
import { DEFAULT_POLICY, type RetryPolicy, startDispatcher } from './dispatcher.js';
import { webhookHandlers } from './grpc.js';
import {
  generationPayload,
  imageDeletedPayload,
  imageStoredPayload,
  type PayloadLinks,
  quotaPayload,
  type WebhookMessage,
} from './payloads.js';
import { SecretBox } from './signing.js';
import { insertDelivery, pruneOld, subscribedEndpoints } from './store.js';
import { webhooksTenantData } from './tenant-data.js';

export const SCHEMA = 'webhooks';
export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));
export const QUOTA_DURABLE = 'webhook-dispatcher-quota';
/**
 * The generation and image events (issue 37). A durable of its own, so the quota consumer keeps its position; a
 * new durable starts at the stream's oldest message, and subscribedEndpoints skips endpoints younger than an event.
 */
export const EVENTS_DURABLE = 'webhook-dispatcher-events';

export interface WebhookOptions {
  policy?: Partial<RetryPolicy>;
  /** Per-attempt timeout (default: Config.webhooks.timeoutMs, WEBHOOK_TIMEOUT_MS, 10 s). */
  timeoutMs?: number;
  /** Longest sleep of the delivery loop (default: WEBHOOK_POLL_MS, else min(1 s, base/4)). */
  pollMs?: number;
}

/** The webhook message a generation or image event makes (undefined: none, e.g. an undecodable payload). */
function domainMessage(m: EventMessage, prefix: string, links: PayloadLinks, logger: Logger): { tenantId: string; msg?: WebhookMessage } {
  switch (m.subject) {
    case subjectFor(prefix, 'generation.execution_finished'): {
      const e = decodeOrSkip(ExecutionFinished, m, logger);
      return { tenantId: e?.tenantId ?? '', msg: e?.executionId ? generationPayload(m.id, e, links) : undefined };
    }
    case subjectFor(prefix, 'library.image_stored'): {
      const e = decodeOrSkip(ImageStored, m, logger);
      return { tenantId: e?.tenantId ?? '', msg: e ? imageStoredPayload(m.id, e, links) : undefined };
    }
    case subjectFor(prefix, 'library.image_deleted'): {
      const e = decodeOrSkip(ImageDeleted, m, logger);
      return { tenantId: e?.tenantId ?? '', msg: e ? imageDeletedPayload(m.id, e, links) : undefined };
    }
    default:
      return { tenantId: '' };
  }
}

/**
 * Fans one bus event out to the tenant's endpoints subscribed to its type, once (consumeOnce, and one delivery per
 * endpoint and event): each delivery carries the event's id as its webhook-id. Answers how many it queued. A tenant
 * with no such endpoint costs one read and no transaction.
 */
async function fanOut(sql: Sql, durable: string, eventId: string, tenantId: string, msg: WebhookMessage): Promise<number> {
  if ((await subscribedEndpoints(sql, tenantId, msg.event, msg.occurredAt)).length === 0) return 0;
  let created = 0;
  await consumeOnce(sql, durable, eventId, async (tx) => {
    for (const ep of await subscribedEndpoints(tx, tenantId, msg.event, msg.occurredAt)) {
      const row = await insertDelivery(tx, {
        id: randomUUID(),
        endpointId: ep.id,
        tenantId,
        event: msg.event,
        eventId,
        sourceEventId: eventId,
        payload: msg.body,
      });
      if (row) created++;
    }
  });
  return created;
}

/**
 * webhook-dispatcher: tenant webhook endpoints (WebhookService), durable consumers turning QuotaCrossed,
 * ExecutionFinished, ImageStored and ImageDeleted into persisted deliveries, and the delivery loop (signing, 10 s
 * timeout, retries with exponential backoff and jitter, auto-disable after 5 consecutive failures).
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
          services: [
            bind(WebhookServiceService, webhookHandlers({ sql, secrets, allowLoopback, wake: () => dispatcher.wake() })),
            webhooksTenantData(sql),
          ],
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
            if ((await fanOut(sql, QUOTA_DURABLE, m.id, e.tenantId, quotaPayload(m.id, e))) > 0) dispatcher.wake();
          },
        }),
      (sub) => sub.stop(),
    );
    const links: PayloadLinks = { publicBaseUrl: ctx.config.publicBaseUrl };
    const prefix = ctx.config.eventsPrefix;
    await step(
      'events consumer',
      () =>
        ctx.events.subscribe({
          durable: EVENTS_DURABLE,
          subjects: ['generation.execution_finished', 'library.image_stored', 'library.image_deleted'].map((n) => subjectFor(prefix, n)),
          ackWaitMs: 10_000,
          handler: async (m) => {
            const { tenantId, msg } = domainMessage(m, prefix, links, logger);
            if (!tenantId || !msg) return;
            if ((await fanOut(sql, EVENTS_DURABLE, m.id, tenantId, msg)) > 0) dispatcher.wake();
          },
        }),
      (sub) => sub.stop(),
    );
    const prune = () => pruneOld(sql, [QUOTA_DURABLE, EVENTS_DURABLE]).catch((err) => logger.warn({ err }, 'webhook retention failed'));
    await repeatingStep(step, 'retention', prune, 3_600_000);
    return { grpcAddress: grpc.address, ready: async () => (await dbReady()) && (await ctx.events.healthy()) };
  });
}

export const start: StartService = (ctx) => startWebhookDispatcher(ctx);
