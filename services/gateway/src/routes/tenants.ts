import {
  type ApiKeyBody,
  type ApiKeySigningBody,
  type ApiKeySigningRotateBody,
  type Infer,
  PROVIDERS,
  type TenantBody,
  type TenantUpdateBody,
} from '@imagegen/api-schemas';
import type { ProviderPoolUpdate } from '@imagegen/contracts/tenancy/v1/tenancy';
import { keyJson, keySigningJson, tenantDetailJson, tenantJson } from '@imagegen/operations';
import { badRequest } from '@imagegen/platform';
import type { RouteModule } from '../types.js';

type PoolInput = string | string[] | null | undefined;

/** provider_credentials + legacy provA_api_key -> per-provider pool updates (only the providers mentioned). */
function poolUpdates(body: Infer<typeof TenantUpdateBody>): ProviderPoolUpdate[] {
  const pc = body.provider_credentials ?? {};
  if (body.provA_api_key !== undefined && pc.provA !== undefined && pc.provA !== null) {
    throw badRequest('Invalid request payload', ['use either provA_api_key (legacy) or provider_credentials.provA, not both']);
  }
  const out: ProviderPoolUpdate[] = [];
  for (const p of PROVIDERS) {
    let v: PoolInput = pc[p];
    if (p === 'provA' && body.provA_api_key !== undefined && (v === undefined || v === null)) v = body.provA_api_key;
    if (v === undefined) continue;
    const keys = v === null ? [] : typeof v === 'string' ? [v] : v;
    out.push({ provider: p, keys, remove: keys.length === 0 });
  }
  return out;
}

/**
 * Tenants and their API keys (SPEC 4.9). Reads need any admin; writes need super_admin.
 * Key revocation: DELETE /admin/tenants/:tenantId/api-keys/:keyRef (key id or key name). Signed requests (SPEC 5.8,
 * extension): POST .../api-keys/:keyRef/signing turns them on (the secret is answered once) or off, POST
 * .../signing/rotate makes a new secret (the gateway verifies them: request-signature.ts).
 */
const tenants: RouteModule = (app, { clients }) => {
  const tenancy = clients.tenancy;

  app.get('/admin/tenants', async (req) => {
    const r = await tenancy.listTenants({}, req.principal);
    return { data: r.tenants.map(tenantJson) };
  });

  app.get<{ Params: { tenantId: string } }>('/admin/tenants/:tenantId', async (req) => ({
    data: tenantDetailJson(await tenancy.getTenantDetail({ tenantId: req.params.tenantId }, req.principal)),
  }));

  app.post<{ Body: Infer<typeof TenantBody> }>('/admin/tenants', async (req) => {
    const b = req.body;
    const r = await tenancy.createTenant(
      {
        tenantId: b.tenant_id,
        tenantName: b.tenant_name,
        contactEmail: b.contact_email,
        providerPools: poolUpdates(b),
        monthlyQuotaMb: b.monthly_quota_mb,
        rateLimitPerMinute: b.rate_limit_per_minute,
        modelId: b.model_id,
        allowedModels: b.allowed_models ?? [],
        hasAllowedModels: b.allowed_models !== undefined,
        apiKeys: (b.api_keys ?? []).map((k) => ({ keyName: k.key_name, type: k.type ?? 'live' })),
        hasApiKeys: b.api_keys !== undefined,
        notes: b.notes ?? undefined,
        credentialsIncludePrompt: b.credentials_include_prompt,
      },
      req.principal,
    );
    return {
      data: {
        tenant: tenantJson(r.tenant),
        apiKeys: r.apiKeys.map((k) => ({ apiKey: k.apiKey, keyName: k.keyName, type: k.type, keyId: k.keyId, createdAt: k.createdAt })),
      },
    };
  });

  app.patch<{ Params: { tenantId: string }; Body: Infer<typeof TenantUpdateBody> }>('/admin/tenants/:tenantId', async (req) => {
    const b = req.body ?? {};
    const r = await tenancy.updateTenant(
      {
        tenantId: req.params.tenantId,
        tenantName: b.tenant_name,
        contactEmail: b.contact_email,
        isActive: b.is_active,
        monthlyQuotaMb: b.monthly_quota_mb,
        rateLimitPerMinute: b.rate_limit_per_minute,
        notes: b.notes ?? undefined,
        clearNotes: b.notes === null,
        modelId: b.model_id,
        allowedModels: b.allowed_models ?? [],
        hasAllowedModels: b.allowed_models !== undefined,
        providerPools: poolUpdates(b),
        credentialsIncludePrompt: b.credentials_include_prompt,
      },
      req.principal,
    );
    return { data: tenantDetailJson(r) };
  });

  app.post<{ Params: { tenantId: string }; Body: Infer<typeof ApiKeyBody> }>('/admin/tenants/:tenantId/api-keys', async (req) => {
    const k = await tenancy.createApiKey(
      { tenantId: req.params.tenantId, keyName: req.body.key_name, type: req.body.type ?? 'live' },
      req.principal,
    );
    return { data: { apiKey: k.apiKey, keyName: k.keyName, type: k.type, keyId: k.keyId, createdAt: k.createdAt } };
  });

  app.delete<{ Params: { tenantId: string; keyRef: string } }>('/admin/tenants/:tenantId/api-keys/:keyRef', async (req) => {
    const k = await tenancy.revokeApiKey({ tenantId: req.params.tenantId, keyRef: req.params.keyRef }, req.principal);
    return { data: { success: true, key: keyJson(k) } };
  });

  type KeyParams = { tenantId: string; keyRef: string };
  app.post<{ Params: KeyParams; Body: Infer<typeof ApiKeySigningBody> }>(
    '/admin/tenants/:tenantId/api-keys/:keyRef/signing',
    async (req) => {
      const { tenantId, keyRef } = req.params;
      const r = await tenancy.setApiKeySigning({ tenantId, keyRef, signatureRequired: req.body.signature_required }, req.principal);
      return { data: keySigningJson(r) };
    },
  );

  app.post<{ Params: KeyParams; Body: Infer<typeof ApiKeySigningRotateBody> }>(
    '/admin/tenants/:tenantId/api-keys/:keyRef/signing/rotate',
    async (req) => {
      const { tenantId, keyRef } = req.params;
      const r = await tenancy.rotateApiKeySigningSecret(
        { tenantId, keyRef, gracePeriodSeconds: req.body.grace_period_seconds },
        req.principal,
      );
      return { data: keySigningJson(r) };
    },
  );
};

export default tenants;
