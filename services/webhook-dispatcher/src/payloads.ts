import type {
  GenerationWebhookPayload,
  ImageDeletedWebhookPayload,
  ImageStoredWebhookPayload,
  Infer,
  QuotaWebhookPayload,
  TestWebhookPayload,
} from '@imagegen/api-schemas';
import type { WebhookEventType } from '@imagegen/api-schemas/vocab';
import type { ExecutionFinished, ImageDeleted, ImageStored, QuotaCrossed } from '@imagegen/contracts/events/v1/events';

/**
 * The body of each webhook event (the schemas of @imagegen/api-schemas resources.ts, which the OpenAPI `webhooks`
 * section and docs/asyncapi.yaml show): small, ids and API URLs only, never image bytes. `id` is the event id (the
 * bus event's, also the webhook-id header), so a receiver deduplicates on it across retries, endpoints and replays.
 */
export interface WebhookMessage {
  event: WebhookEventType;
  /** The JSON body, sent byte for byte on every attempt and replay. */
  body: string;
  /** When the event occurred (its `timestamp`). */
  occurredAt: string;
}

/** Where the public API lives (PUBLIC_BASE_URL): the payloads' links. */
export interface PayloadLinks {
  publicBaseUrl: string;
}

const base = (l: PayloadLinks) => l.publicBaseUrl.replace(/\/+$/, '');
const imageUrl = (l: PayloadLinks, id: number) => `${base(l)}/api/images/${id}`;

/** What every body starts with: the event's id, its type, the tenant and when it occurred. */
function head<E extends string>(id: string, event: E, tenantId: string, occurredAt: string | undefined) {
  return { id, event, tenant_id: tenantId, timestamp: occurredAt || new Date().toISOString() };
}

/** A body as it is sent (its JSON, the same on every attempt and replay). */
const message = <B extends { event: WebhookEventType; timestamp: string }>(body: B): WebhookMessage => ({
  event: body.event,
  body: JSON.stringify(body),
  occurredAt: body.timestamp,
});

/** SPEC 6 (plus the event id): quota.warning at 80%, quota.exceeded at 100%. */
export function quotaPayload(eventId: string, e: QuotaCrossed): WebhookMessage {
  const event = e.threshold >= 100 ? 'quota.exceeded' : 'quota.warning';
  return message({
    ...head(eventId, event, e.tenantId, e.occurredAt),
    threshold: e.threshold,
    billing_period: e.billingPeriod,
    current_usage_mb: e.currentUsageMb,
    quota_mb: e.quotaMb,
  } satisfies Infer<typeof QuotaWebhookPayload>);
}

const GENERATION_EVENT = { completed: 'generation.completed', failed: 'generation.failed', cancelled: 'generation.cancelled' } as const;

/** generation.completed | failed | cancelled; undefined for any other status (nothing to announce). */
export function generationPayload(eventId: string, e: ExecutionFinished, links: PayloadLinks): WebhookMessage | undefined {
  const status = e.status as keyof typeof GENERATION_EVENT;
  if (!Object.hasOwn(GENERATION_EVENT, status)) return undefined;
  const imageIds = status === 'completed' ? e.imageIds : [];
  return message({
    ...head(eventId, GENERATION_EVENT[status], e.tenantId, e.occurredAt),
    execution_id: e.executionId,
    session_id: e.sessionId,
    tool_name: e.toolName,
    status,
    duration_ms: e.durationMs,
    image_ids: imageIds,
    execution_url: `${base(links)}/api/executions/${encodeURIComponent(e.executionId)}`,
    image_urls: imageIds.map((id) => imageUrl(links, id)),
    error: status === 'failed' ? (e.error ?? null) : null,
  } satisfies Infer<typeof GenerationWebhookPayload>);
}

export function imageStoredPayload(eventId: string, e: ImageStored, links: PayloadLinks): WebhookMessage {
  return message({
    ...head(eventId, 'image.stored', e.tenantId, e.occurredAt),
    image_id: e.imageId,
    session_id: e.sessionId,
    operation: e.operation,
    image_url: imageUrl(links, e.imageId),
  } satisfies Infer<typeof ImageStoredWebhookPayload>);
}

export function imageDeletedPayload(eventId: string, e: ImageDeleted, links: PayloadLinks): WebhookMessage {
  return message({
    ...head(eventId, 'image.deleted', e.tenantId, e.occurredAt),
    image_id: e.imageId,
    image_url: imageUrl(links, e.imageId),
  } satisfies Infer<typeof ImageDeletedWebhookPayload>);
}

/** POST /api/webhooks/:id/test: its id is the delivery's (the webhook-id header). */
export function testPayload(deliveryId: string, tenantId: string, webhookId: number): string {
  return JSON.stringify({
    ...head(deliveryId, 'webhook.test', tenantId, undefined),
    webhook_id: webhookId,
  } satisfies Infer<typeof TestWebhookPayload>);
}
