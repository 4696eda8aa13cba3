import type { Infer, UsageQuery } from '@imagegen/api-schemas';
import type { Tenant } from '@imagegen/contracts/tenancy/v1/tenancy';
import type { Quota } from '@imagegen/contracts/usage/v1/usage';
import { profileJson, usageJson } from '@imagegen/operations';
import { badRequest, type Principal } from '@imagegen/platform';

import type { RouteModule } from '../types.js';

/**
 * Usage and profile (SPEC 4.7), served by usage-metering over gRPC (and tenancy for the tenant's name and models).
 *   GET /api/usage?limit=1..24 (default 12) -> {data:{months (newest first), recent:{bytes, images}, quota}}
 *   GET /api/profile -> {tenant:{tenantId, tenantName, quotas, allowedModels, modelId}} (the models: extension)
 */

/**
 * A tenant's name and models change rarely (an administrator's edit): cached for a few seconds per gateway (one
 * gRPC call less per profile), so such a change shows in the profile within this bound.
 */
const TENANT_TTL_MS = 5000;
/** Bound of the tenant cache (cleared when reached). */
const MAX_CACHED_TENANTS = 10_000;

const usageRoutes: RouteModule = (app, { clients }) => {
  const usage = clients.usage;
  const tenancy = clients.tenancy;
  const tenants = new Map<string, { at: number; facts: Promise<Tenant> }>();
  const tenantFacts = (tenantId: string, principal: Principal): Promise<Tenant> => {
    const now = Date.now();
    const hit = tenants.get(tenantId);
    if (hit && now - hit.at < TENANT_TTL_MS) return hit.facts;
    const facts = tenancy.getTenant({ tenantId }, principal);
    facts.catch(() => tenants.get(tenantId)?.facts === facts && tenants.delete(tenantId));
    if (tenants.size >= MAX_CACHED_TENANTS) tenants.clear();
    tenants.set(tenantId, { at: now, facts });
    return facts;
  };
  // Concurrent profile requests of one tenant share one in-flight GetQuota (nothing is kept once it has
  // answered): a busy tenant costs usage-metering one call per round trip instead of one per request,
  // and every answer still comes from a call that was running when the request arrived.
  const inflightQuotas = new Map<string, Promise<Quota>>();
  const tenantQuota = (tenantId: string, principal: Principal): Promise<Quota> => {
    const running = inflightQuotas.get(tenantId);
    if (running) return running;
    const quota = usage.getQuota({ tenantId }, principal);
    inflightQuotas.set(tenantId, quota);
    const forget = () => {
      if (inflightQuotas.get(tenantId) === quota) inflightQuotas.delete(tenantId);
    };
    quota.then(forget, forget);
    return quota;
  };

  app.get('/api/usage', { attachValidation: true }, async (request) => {
    if (request.validationError) throw badRequest('Invalid limit');
    const { limit } = request.query as Infer<typeof UsageQuery>;
    const res = await usage.getUsage({ tenantId: request.principal.tenantId ?? '', limit }, request.principal);
    return { data: usageJson(res) };
  });

  app.get('/api/profile', async (request) => {
    const tenantId = request.principal.tenantId as string;
    const [tenant, quota] = await Promise.all([tenantFacts(tenantId, request.principal), tenantQuota(tenantId, request.principal)]);
    return profileJson(tenant, quota);
  });
};

export default usageRoutes;
