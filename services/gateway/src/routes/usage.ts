import type { Infer, UsageQuery } from '@imagegen/api-schemas';
import type { Quota } from '@imagegen/contracts/usage/v1/usage';
import { profileJson, usageJson } from '@imagegen/operations';
import { badRequest, type Principal } from '@imagegen/platform';

import type { RouteModule } from '../types.js';

/**
 * Usage and profile (SPEC 4.7), served by usage-metering over gRPC (and tenancy for the tenant name).
 *   GET /api/usage?limit=1..24 (default 12) -> {data:{months (newest first), recent:{bytes, images}, quota}}
 *   GET /api/profile -> {tenant:{tenantId, tenantName, quotas}}
 */

/** Tenant names change rarely: cached for a few seconds per gateway (one gRPC call less per profile). */
const NAME_TTL_MS = 5000;
/** Bound of the name cache (cleared when reached). */
const MAX_CACHED_TENANTS = 10_000;

const usageRoutes: RouteModule = (app, { clients }) => {
  const usage = clients.usage;
  const tenancy = clients.tenancy;
  const names = new Map<string, { at: number; name: Promise<string> }>();
  const tenantName = (tenantId: string, principal: Principal): Promise<string> => {
    const now = Date.now();
    const hit = names.get(tenantId);
    if (hit && now - hit.at < NAME_TTL_MS) return hit.name;
    const name = tenancy.getTenant({ tenantId }, principal).then((t) => t.tenantName);
    name.catch(() => names.get(tenantId)?.name === name && names.delete(tenantId));
    if (names.size >= MAX_CACHED_TENANTS) names.clear();
    names.set(tenantId, { at: now, name });
    return name;
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
    const [name, quota] = await Promise.all([tenantName(tenantId, request.principal), tenantQuota(tenantId, request.principal)]);
    return profileJson(tenantId, name, quota);
  });
};

export default usageRoutes;
