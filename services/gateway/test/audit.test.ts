import { OPERATIONS } from '@imagegen/api-schemas';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { auditEntry, isAudited, isSecretName, REDACTED, redact, registerAudit } from '../src/audit.js';
import type { GatewayDeps } from '../src/types.js';

const op = (key: string) => {
  const spec = OPERATIONS[key];
  if (!spec) throw new Error(key);
  return spec;
};

describe('audit hook: what is recorded', () => {
  it('every admin write and the webhook writes; no read, no other tenant write', () => {
    const audited = Object.entries(OPERATIONS)
      .filter(([key, spec]) => isAudited(key.split(' ')[0], spec))
      .map(([, spec]) => spec.operationId);
    expect(audited).toEqual(
      expect.arrayContaining([
        'createTenant',
        'updateTenant',
        'createApiKey',
        'revokeApiKey',
        'setApiKeySigning',
        'rotateApiKeySigningSecret',
        'updateAdminUser',
        'unlockAdminUser',
        'createInvitation',
        'revokeInvitation',
        'acceptInvitation',
        'createWebhook',
        'updateWebhook',
        'deleteWebhook',
        'deleteWebhooksByIdOrUrl',
        'replayWebhookDelivery',
      ]),
    );
    for (const id of ['listAuditLog', 'listTenants', 'getTenant', 'adminLogin', 'createCharacter', 'generateImages', 'testWebhook'])
      expect(audited).not.toContain(id);
  });

  it('secret-named fields are redacted, names about keys are not', () => {
    for (const n of ['password', 'signing_secret', 'provA_api_key', 'api_key', 'keys', 'provider_credentials', 'token', 'apiKey'])
      expect(isSecretName(n), n).toBe(true);
    for (const n of ['key_name', 'api_keys', 'tenant_id', 'signature_required', 'is_active', 'display_name'])
      expect(isSecretName(n), n).toBe(false);
    expect(
      redact({
        provider_credentials: { provA: 'sk-1', provB: ['sk-2', 'sk-3'], gone: null },
        api_keys: [{ key_name: 'k', type: 'live' }],
        nested: { password: 'p', note: 'n' },
        url: 'https://user:pw@example.com/hook?sig=abc',
        callback_url: 'not a url',
      }),
    ).toEqual({
      provider_credentials: { provA: REDACTED, provB: [REDACTED, REDACTED], gone: null },
      api_keys: [{ key_name: 'k', type: 'live' }],
      nested: { password: REDACTED, note: 'n' },
      url: 'https://example.com/hook [query redacted]',
      callback_url: REDACTED,
    });
  });

  it('target: the path parameters, the created resource, the query of a delete by URL', () => {
    const tenant = { requestId: 'r', tenantId: 'acme', source: 'tenant_api' };
    expect(
      auditEntry(
        op('POST /api/webhooks/:id/deliveries/:deliveryId/replay'),
        { params: { id: '3', deliveryId: '9' }, principal: tenant },
        { data: { id: 12 } },
      ),
    ).toEqual({ action: 'replayWebhookDelivery', tenantId: 'acme', resourceId: '3/9/12', changes: {}, anonymousActor: undefined });
    expect(
      auditEntry(op('DELETE /api/webhooks'), { query: { url: 'https://h.example/x?t=1' }, principal: tenant }, undefined),
    ).toMatchObject({ action: 'deleteWebhooksByIdOrUrl', tenantId: 'acme', changes: { url: 'https://h.example/x [query redacted]' } });
    const admin = { requestId: 'r', adminRole: 'super_admin' as const, source: 'admin' };
    expect(
      auditEntry(
        op('POST /admin/invitations'),
        { body: { email: 'a@b.c', tenant_id: ' Acme ' }, principal: admin },
        { data: { token: 'inv_abcdefghijklmnopqrstuvwxyz' } },
      ),
    ).toMatchObject({ tenantId: 'acme', resourceId: 'inv_abcd...wxyz', changes: { email: 'a@b.c' } });
  });
});

describe('audit hook: a record that cannot be written', () => {
  it('does not fail the answered write, and is logged at warn', async () => {
    const warnings: unknown[] = [];
    const app = Fastify({ logger: { level: 'warn', stream: { write: (l: string) => warnings.push(JSON.parse(l)) } } });
    app.decorateRequest('principal', null as never);
    app.addHook('onRequest', async (req) => {
      req.principal = { requestId: req.id, adminRole: 'super_admin', source: 'admin' };
    });
    const tenancy = {
      recordAudit: async () => {
        throw Object.assign(new Error('tenancy down'), { status: 503 });
      },
    };
    registerAudit(app as never, { clients: { tenancy } } as unknown as GatewayDeps);
    app.patch('/admin/tenants/:tenantId', async () => ({ data: { ok: true } }));
    const r = await app.inject({ method: 'PATCH', url: '/admin/tenants/acme', payload: { is_active: false, provA_api_key: 'sk-secret' } });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ data: { ok: true } });
    const line = warnings.find((w: any) => /AUDIT RECORD NOT WRITTEN/.test(w.msg)) as any;
    expect(line).toBeDefined();
    expect(line.audit).toMatchObject({ action: 'updateTenant', tenantId: 'acme', actor: 'admin-token' });
    expect(JSON.stringify(line)).not.toContain('sk-secret');
    await app.close();
  });

  it('records once per successful write, nothing for an error or a read', async () => {
    const calls: unknown[] = [];
    const app = Fastify();
    app.decorateRequest('principal', null as never);
    app.addHook('onRequest', async (req) => {
      req.principal = { requestId: req.id, adminUserId: 'usr_1', adminRole: 'super_admin', source: 'admin' };
    });
    registerAudit(
      app as never,
      { clients: { tenancy: { recordAudit: async (...a: unknown[]) => calls.push(a) } } } as unknown as GatewayDeps,
    );
    app.patch('/admin/users/:userId', async (req, reply) =>
      (req.body as any)?.fail ? reply.status(409).send({ error: 'x' }) : { data: {} },
    );
    app.get('/admin/users/:userId', async () => ({ data: {} }));
    await app.inject({
      method: 'PATCH',
      url: '/admin/users/u1',
      payload: { display_name: 'A' },
      headers: { 'x-request-id': 'rid-12345678' },
    });
    await app.inject({ method: 'PATCH', url: '/admin/users/u1', payload: { fail: true } });
    await app.inject({ method: 'GET', url: '/admin/users/u1' });
    expect(calls).toHaveLength(1);
    expect((calls[0] as any)[0]).toMatchObject({ action: 'updateAdminUser', resourceId: 'u1', changesJson: '{"display_name":"A"}' });
    await app.close();
  });
});
