import { randomUUID } from 'node:crypto';
import {
  WEBHOOK_DELIVERIES_LIMIT_DEFAULT,
  WEBHOOK_DELIVERIES_LIMIT_MAX,
  WEBHOOK_DESCRIPTION_MAX,
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_URL_MAX,
  WEBHOOKS_PER_TENANT_MAX,
} from '@imagegen/api-schemas/vocab';
import type { WebhookServiceService } from '@imagegen/contracts/webhooks/v1/webhooks';
import {
  badRequest,
  type CallContext,
  conflict,
  type Handlers,
  notFound,
  resolvePublicAddress,
  SafeFetchError,
  type Sql,
} from '@imagegen/platform';
import { testPayload } from './payloads.js';
import { generateSecret, type SecretBox, secretHint } from './signing.js';
import {
  countEndpoints,
  deleteEndpoint,
  getDelivery,
  getEndpoint,
  insertDelivery,
  insertEndpoint,
  listDeliveries,
  listEndpoints,
  setDescription,
  setEnabled,
  setEvents,
  toDelivery,
  toWebhook,
} from './store.js';

// The service's own checks, with the API's vocabulary (@imagegen/api-schemas/vocab).
export const WEBHOOK_EVENTS = WEBHOOK_EVENT_TYPES;
export const MAX_WEBHOOKS_PER_TENANT = WEBHOOKS_PER_TENANT_MAX;
export const MAX_URL_LENGTH = WEBHOOK_URL_MAX;
export const MAX_DESCRIPTION_LENGTH = WEBHOOK_DESCRIPTION_MAX;
export const DELIVERIES_DEFAULT_LIMIT = WEBHOOK_DELIVERIES_LIMIT_DEFAULT;
export const DELIVERIES_MAX_LIMIT = WEBHOOK_DELIVERIES_LIMIT_MAX;

function tenantOf(ctx: CallContext): string {
  const t = ctx.principal.tenantId;
  if (!t) throw badRequest('tenant_id is required');
  return t;
}

const webhookNotFound = () => notFound('Webhook not found');

/**
 * A webhook URL must be https, carry no credentials, and every address its host resolves to must be
 * public (checked again, and pinned, at every delivery).
 */
export async function validateWebhookUrl(raw: string, allowLoopback: boolean): Promise<string> {
  const value = raw.trim();
  if (!value || value.length > MAX_URL_LENGTH) throw badRequest('Webhook URL must be a valid HTTPS URL');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest('Webhook URL must be a valid HTTPS URL');
  }
  if (url.protocol !== 'https:') throw badRequest('Webhook URL must use HTTPS');
  if (url.username || url.password) throw badRequest('Webhook URL must not contain credentials');
  try {
    await resolvePublicAddress(url, { allowLoopback, signal: AbortSignal.timeout(5000) });
  } catch (err) {
    if (err instanceof SafeFetchError && err.reason === 'blocked_address') {
      throw badRequest('Webhook URL must resolve to a public IP address');
    }
    if (err instanceof SafeFetchError) throw badRequest('Webhook URL host could not be resolved');
    throw err;
  }
  return url.href;
}

/** The subscription asked for: every type when none is named; an unknown type is a 400 naming the known ones. */
function checkEvents(events: string[]): string[] {
  if (events.length === 0) return [...WEBHOOK_EVENTS];
  const bad = events.filter((e) => !(WEBHOOK_EVENTS as readonly string[]).includes(e));
  if (bad.length > 0) throw badRequest('Invalid request payload', [`events must contain only ${WEBHOOK_EVENTS.join(', ')}`]);
  return [...new Set(events)];
}

function checkDescription(d: string | undefined): string | undefined {
  if (d !== undefined && d.length > MAX_DESCRIPTION_LENGTH) {
    throw badRequest('Invalid request payload', [`description must be at most ${MAX_DESCRIPTION_LENGTH} characters`]);
  }
  return d;
}

export function webhookHandlers(deps: {
  sql: Sql;
  secrets: SecretBox;
  allowLoopback: boolean;
  /** Wakes the dispatcher after a commit that made deliveries due. */
  wake: () => void;
}): Handlers<typeof WebhookServiceService> {
  const { sql, secrets } = deps;
  return {
    async createWebhook(req, ctx) {
      const tenantId = tenantOf(ctx);
      const events = checkEvents(req.events);
      const description = checkDescription(req.description);
      const url = await validateWebhookUrl(req.url, deps.allowLoopback);
      const secret = generateSecret();
      const row = await sql.begin(async (tx) => {
        // Serializes creations of one tenant so the per-tenant maximum holds.
        await tx`SELECT pg_advisory_xact_lock(hashtext(${`webhooks:${tenantId}`}))`;
        if ((await countEndpoints(tx, tenantId)) >= MAX_WEBHOOKS_PER_TENANT) {
          throw badRequest(`Maximum of ${MAX_WEBHOOKS_PER_TENANT} webhooks per tenant reached`);
        }
        return insertEndpoint(tx, { tenantId, url, description, events, secret: secrets.seal(secret), secretHint: secretHint(secret) });
      });
      return { webhook: toWebhook(row), secret };
    },

    async listWebhooks(_req, ctx) {
      return { webhooks: (await listEndpoints(sql, tenantOf(ctx))).map(toWebhook) };
    },

    async getWebhook(req, ctx) {
      const row = await getEndpoint(sql, tenantOf(ctx), req.id);
      if (!row) throw webhookNotFound();
      return toWebhook(row);
    },

    async deleteWebhook(req, ctx) {
      if (!(await deleteEndpoint(sql, tenantOf(ctx), req.id))) throw webhookNotFound();
      return { deleted: true };
    },

    async updateWebhook(req, ctx) {
      const tenantId = tenantOf(ctx);
      const description = checkDescription(req.description);
      const events = req.events ? checkEvents(req.events.events) : undefined;
      const row = await sql.begin(async (tx) => {
        let r = await getEndpoint(tx, tenantId, req.id);
        if (!r) return undefined;
        if (description !== undefined) r = await setDescription(tx, tenantId, req.id, description || null);
        if (events !== undefined) r = await setEvents(tx, tenantId, req.id, events);
        if (req.enabled !== undefined) r = await setEnabled(tx, tenantId, req.id, req.enabled);
        return r;
      });
      if (!row) throw webhookNotFound();
      if (req.enabled) deps.wake();
      return toWebhook(row);
    },

    async listDeliveries(req, ctx) {
      const tenantId = tenantOf(ctx);
      const limit = req.limit ?? DELIVERIES_DEFAULT_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > DELIVERIES_MAX_LIMIT) throw badRequest('Invalid limit');
      if (!(await getEndpoint(sql, tenantId, req.webhookId))) throw webhookNotFound();
      return { deliveries: await listDeliveries(sql, tenantId, req.webhookId, limit) };
    },

    async testWebhook(req, ctx) {
      const tenantId = tenantOf(ctx);
      const ep = await getEndpoint(sql, tenantId, req.id);
      if (!ep) throw webhookNotFound();
      const id = randomUUID();
      const payload = testPayload(id, tenantId, Number(ep.id));
      const row = await insertDelivery(sql, { id, eventId: id, endpointId: Number(ep.id), tenantId, event: 'webhook.test', payload });
      deps.wake();
      return toDelivery(row as Record<string, unknown>);
    },

    async replayDelivery(req, ctx) {
      const tenantId = tenantOf(ctx);
      if (!(await getEndpoint(sql, tenantId, req.webhookId))) throw webhookNotFound();
      const row0 = await getDelivery(sql, tenantId, req.webhookId, req.deliveryId);
      if (!row0) throw notFound('Delivery not found');
      const original = toDelivery(row0);
      if (original.status === 'pending') throw conflict('Delivery is still pending');
      // A new delivery of the same event: the same webhook-id and body; attempts, signatures and timestamps its own.
      const row = await insertDelivery(sql, {
        id: randomUUID(),
        endpointId: req.webhookId,
        tenantId,
        event: original.event,
        eventId: original.eventId,
        replayOf: original.id,
        payload: original.payload,
      });
      deps.wake();
      return toDelivery(row as Record<string, unknown>);
    },
  };
}
