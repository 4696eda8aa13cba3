import { type Infer, WEBHOOK_DELIVERIES_LIMIT_DEFAULT, type WebhookBody, type WebhookUpdateBody } from '@imagegen/api-schemas';
import { deliveryForm, webhookCreatedJson, webhookJson } from '@imagegen/operations';
import { badRequest, notFound, type Principal } from '@imagegen/platform';
import type { RouteModule } from '../types.js';

/**
 * Webhooks (SPEC 4.11, shapes designed here; see docs/design/usage.md):
 *   GET    /api/webhooks                       -> {data: Webhook[]}
 *   POST   /api/webhooks {url, events?, description?} -> 201 {data: Webhook & {secret}} (secret shown once; events: all by default)
 *   GET    /api/webhooks/:id                   -> {data: Webhook}
 *   PATCH  /api/webhooks/:id {enabled?, description?, events?} -> {data: Webhook} (enabled:true re-enables)
 *   DELETE /api/webhooks/:id                   -> {data:{deleted:true, id}}
 *   DELETE /api/webhooks?id=<id> (or {id})     -> {data:{deleted:true, id}}; ?url=<url> (or {url}) -> {data:{deleted:true, ids}}
 *   GET    /api/webhooks/:id/deliveries?limit  -> {data: Delivery[]} newest first, with attempts
 *   POST   /api/webhooks/:id/test              -> 202 {data: Delivery} (queues a webhook.test delivery)
 *   POST   /api/webhooks/:id/deliveries/:deliveryId/replay -> 202 {data: Delivery} (extension, issue 37: the same
 *          event id and body again, as a new delivery)
 */

/** Ids are integers; anything else cannot name a webhook of this tenant. */
function webhookId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw)) throw notFound('Webhook not found');
  return Number(raw);
}

const webhookRoutes: RouteModule = (app, { clients }) => {
  const webhooks = clients.webhooks;
  /** DELETE /api/webhooks/:id and DELETE /api/webhooks?id=: {data:{deleted:true, id}}. */
  const deleteById = async (raw: string, principal: Principal) => {
    const id = webhookId(raw);
    await webhooks.deleteWebhook({ id }, principal);
    return { data: { deleted: true, id } };
  };

  app.get('/api/webhooks', async (request) => {
    const res = await webhooks.listWebhooks({}, request.principal);
    return { data: res.webhooks.map(webhookJson) };
  });

  app.post<{ Body: Infer<typeof WebhookBody> }>('/api/webhooks', async (request, reply) => {
    const b = request.body;
    const res = await webhooks.createWebhook({ url: b.url, events: b.events ?? [], description: b.description }, request.principal);
    return reply.status(201).send({ data: webhookCreatedJson(res) });
  });

  app.get('/api/webhooks/:id', async (request) => {
    const id = webhookId((request.params as { id: string }).id);
    return { data: webhookJson(await webhooks.getWebhook({ id }, request.principal)) };
  });

  app.patch<{ Body: Infer<typeof WebhookUpdateBody> }>('/api/webhooks/:id', async (request) => {
    const id = webhookId((request.params as { id: string }).id);
    const b = request.body;
    if (b.enabled === undefined && b.description === undefined && b.events === undefined)
      throw badRequest('Invalid request payload', ['enabled, description or events is required']);
    const w = await webhooks.updateWebhook(
      {
        id,
        enabled: b.enabled,
        description: b.description === null ? '' : b.description,
        events: b.events === undefined ? undefined : { events: b.events },
      },
      request.principal,
    );
    return { data: webhookJson(w) };
  });

  app.delete('/api/webhooks/:id', async (request) => deleteById((request.params as { id: string }).id, request.principal));

  // SPEC 4.11 names DELETE on /api/webhooks itself: the endpoint is chosen by `id` or by `url` (query
  // or JSON body); by url every endpoint of the tenant with that URL is deleted.
  app.delete<{ Querystring: { id?: string; url?: string }; Body: { id?: number | string; url?: string } | undefined }>(
    '/api/webhooks',
    async (request) => {
      const body = request.body && typeof request.body === 'object' ? request.body : {};
      const rawId = request.query.id ?? (body.id === undefined ? undefined : String(body.id));
      const rawUrl = request.query.url ?? (typeof body.url === 'string' ? body.url : undefined);
      if (rawId !== undefined) return deleteById(rawId, request.principal);
      if (rawUrl === undefined || rawUrl === '') throw badRequest('Invalid request payload', ['id or url is required']);
      let href: string;
      try {
        href = new URL(rawUrl.trim()).href;
      } catch {
        throw notFound('Webhook not found');
      }
      const list = await webhooks.listWebhooks({}, request.principal);
      const ids = list.webhooks.filter((w) => w.url === href).map((w) => w.id);
      if (ids.length === 0) throw notFound('Webhook not found');
      for (const id of ids) await webhooks.deleteWebhook({ id }, request.principal);
      return { data: { deleted: true, ids } };
    },
  );

  app.get('/api/webhooks/:id/deliveries', { attachValidation: true }, async (request) => {
    if (request.validationError) throw badRequest('Invalid limit');
    const id = webhookId((request.params as { id: string }).id);
    const { limit } = request.query as { limit?: number };
    const res = await webhooks.listDeliveries({ webhookId: id, limit: limit ?? WEBHOOK_DELIVERIES_LIMIT_DEFAULT }, request.principal);
    return { data: res.deliveries.map(deliveryForm) };
  });

  app.post('/api/webhooks/:id/test', async (request, reply) => {
    const id = webhookId((request.params as { id: string }).id);
    const d = await webhooks.testWebhook({ id }, request.principal);
    return reply.status(202).send({ data: deliveryForm(d) });
  });

  app.post('/api/webhooks/:id/deliveries/:deliveryId/replay', async (request, reply) => {
    const params = request.params as { id: string; deliveryId: string };
    const d = await webhooks.replayDelivery({ webhookId: webhookId(params.id), deliveryId: params.deliveryId }, request.principal);
    return reply.status(202).send({ data: deliveryForm(d) });
  });
};

export default webhookRoutes;
