import { type Quota, UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import { badRequest, createClient, type Principal } from '@imagegen/platform';
import type { RouteModule } from '../app.js';
import { tenancyClient, tenantSecurity } from '../auth.js';

/**
 * Usage and profile (SPEC 4.7), served by usage-metering over gRPC (and tenancy for the tenant name).
 *   GET /api/usage?limit=1..24 (default 12) -> {data:{months (newest first), recent:{bytes, images}, quota}}
 *   GET /api/profile -> {tenant:{tenantId, tenantName, quotas}}
 */
const TAGS = ['Usage'];

/** Tenant names change rarely: cached for a few seconds per gateway (one gRPC call less per profile). */
const NAME_TTL_MS = 5000;
/**
 * The profile's quota object is kept for a moment per tenant and gateway, and concurrent profile
 * requests of a tenant share one usage call: a busy tenant costs usage-metering at most one GetQuota
 * per QUOTA_TTL_MS instead of one per request. Used MB is fed by events anyway (never instant); a quota
 * or rate-limit change by an admin shows within usage's own tenant cache time plus this.
 */
const QUOTA_TTL_MS = 1000;
const MAX_CACHED_TENANTS = 10_000;

const usageRoutes: RouteModule = (app, { ctx }) => {
  const usage = createClient(UsageServiceService, () => ctx.resolve('usage'));
  const tenancy = tenancyClient(ctx);
  app.addHook('onClose', async () => usage.close());
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
  // Entries are stamped when the call answers (a slow call does not shorten the next one's life); a
  // failed call is forgotten at once, so errors are never served from the cache.
  const quotas = new Map<string, { at: number; quota: Promise<Quota> }>();
  const tenantQuota = (tenantId: string, principal: Principal): Promise<Quota> => {
    const hit = quotas.get(tenantId);
    if (hit && Date.now() - hit.at < QUOTA_TTL_MS) return hit.quota;
    const entry = { at: Number.POSITIVE_INFINITY, quota: usage.getQuota({ tenantId }, principal) };
    entry.quota.then(
      () => {
        entry.at = Date.now();
      },
      () => quotas.get(tenantId) === entry && quotas.delete(tenantId),
    );
    if (quotas.size >= MAX_CACHED_TENANTS) quotas.clear();
    quotas.set(tenantId, entry);
    return entry.quota;
  };

  app.get(
    '/api/usage',
    {
      attachValidation: true,
      schema: {
        tags: TAGS,
        summary: 'Monthly usage (newest first), the rolling 30 days and the quota',
        description:
          'Months are UTC calendar months with any activity; total_bytes counts original images stored that month ' +
          '(deletes do not reduce it). recent covers the last 30 days. An invalid limit answers 400 Invalid limit.',
        security: tenantSecurity,
        querystring: {
          type: 'object',
          properties: { limit: { type: 'integer', minimum: 1, maximum: 24, default: 12 } },
        },
      },
    },
    async (request) => {
      if (request.validationError) throw badRequest('Invalid limit');
      const { limit } = request.query as { limit?: number };
      const res = await usage.getUsage({ tenantId: request.principal.tenantId ?? '', limit: limit ?? 12 }, request.principal);
      return {
        data: {
          months: res.months.map((m) => ({
            month: m.month,
            total_operations: m.totalOperations,
            total_images: m.totalImages,
            total_bytes: m.totalBytes,
            total_mb: m.totalMb,
            avg_duration_ms: m.avgDurationMs,
          })),
          recent: { bytes: res.recent?.bytes ?? 0, images: res.recent?.images ?? 0 },
          quota: res.quota,
        },
      };
    },
  );

  app.get(
    '/api/profile',
    {
      schema: {
        tags: TAGS,
        summary: 'The tenant and its quota object',
        security: tenantSecurity,
        description:
          'Response: {tenant:{tenantId, tenantName, quotas:{monthlyQuotaMb, monthlyUsedMb, monthlyRemainingMb, rateLimitPerMinute}}} ' +
          '(integers; used MB of the current UTC month, rounded).',
      },
    },
    async (request) => {
      const tenantId = request.principal.tenantId as string;
      const [name, quota] = await Promise.all([tenantName(tenantId, request.principal), tenantQuota(tenantId, request.principal)]);
      return { tenant: { tenantId, tenantName: name, quotas: quota } };
    },
  );
};

export default usageRoutes;
