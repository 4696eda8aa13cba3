import { USAGE_MONTHS_DEFAULT, USAGE_MONTHS_MAX } from '@imagegen/api-schemas/vocab';
import type { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import { AppError, badRequest, type CallContext, type Handlers, type Sql } from '@imagegen/platform';
import type { MonthBytesCache } from './month-bytes.js';
import { currentMonth, listMonths, MIB, monthBytes, platformUsage, recentUsage } from './store.js';
import type { TenantLimits, TenantLimitsCache } from './tenants.js';

/** Months of history a usage read answers by default and at most (the API's vocabulary). */
export const USAGE_LIMIT_DEFAULT = USAGE_MONTHS_DEFAULT;
export const USAGE_LIMIT_MAX = USAGE_MONTHS_MAX;

/**
 * The tenant a call is about: the explicit tenant_id (internal callers, admins) or the principal's.
 * A tenant principal may not ask about another tenant.
 */
function tenantOf(requested: string, ctx: CallContext): string {
  const p = ctx.principal;
  const privileged = p.source === 'internal' || p.adminRole !== undefined || !p.tenantId;
  if (requested) {
    if (!privileged && requested !== p.tenantId) throw new AppError(404, { error: 'Tenant not found' });
    return requested;
  }
  if (!p.tenantId) throw badRequest('tenant_id is required');
  return p.tenantId;
}

export function quotaObject(limits: TenantLimits, usedBytes: number) {
  const usedMb = Math.round(usedBytes / MIB);
  return {
    monthlyQuotaMb: limits.monthlyQuotaMb,
    monthlyUsedMb: usedMb,
    monthlyRemainingMb: Math.max(0, limits.monthlyQuotaMb - usedMb),
    rateLimitPerMinute: limits.rateLimitPerMinute,
  };
}

export function usageHandlers(deps: {
  sql: Sql;
  tenants: TenantLimitsCache;
  monthBytes: MonthBytesCache;
}): Handlers<typeof UsageServiceService> {
  const { sql, tenants } = deps;
  return {
    async checkQuota(req, ctx) {
      const tenantId = tenantOf(req.tenantId, ctx);
      // The generate path's check reads the cached month total (no query per generate); GetQuota reads it fresh.
      const [limits, used] = await Promise.all([tenants.require(tenantId), deps.monthBytes.get(tenantId, currentMonth())]);
      const quotaBytes = limits.monthlyQuotaMb * MIB;
      // Refused once the month's stored bytes reached the quota; the request that crosses it is allowed
      // (otherwise usage could never reach 100% and quota.exceeded would never be sent).
      const allowed = used < quotaBytes;
      if (!allowed) ctx.logger.info({ tenantId, used, quotaBytes, incoming: req.incomingBytes }, 'quota exceeded');
      return { allowed, usedBytes: used, quotaBytes };
    },

    async getQuota(req, ctx) {
      const tenantId = tenantOf(req.tenantId, ctx);
      const [limits, used] = await Promise.all([tenants.require(tenantId), monthBytes(sql, tenantId, currentMonth())]);
      return quotaObject(limits, used);
    },

    async getUsage(req, ctx) {
      const tenantId = tenantOf(req.tenantId, ctx);
      const limit = req.limit ?? USAGE_LIMIT_DEFAULT;
      if (!Number.isInteger(limit) || limit < 1 || limit > USAGE_LIMIT_MAX) throw badRequest('Invalid limit');
      const [limits, [used, months, recent]] = await Promise.all([
        tenants.require(tenantId),
        // One snapshot: read side by side on separate connections, a usage batch committing between them made the
        // answer disagree with itself (the month listed with its bytes, the quota still at 0 MB).
        sql.begin('isolation level repeatable read read only', (tx) =>
          Promise.all([monthBytes(tx, tenantId, currentMonth()), listMonths(tx, tenantId, limit), recentUsage(tx, tenantId)]),
        ),
      ]);
      return {
        months: months.map((m) => ({
          month: m.month,
          totalOperations: m.totalOperations,
          totalImages: m.totalImages,
          totalBytes: m.totalBytes,
          totalMb: Math.round((m.totalBytes / MIB) * 100) / 100,
          avgDurationMs: m.avgDurationMs,
        })),
        recent,
        quota: quotaObject(limits, used),
      };
    },

    async getPlatformUsage() {
      return platformUsage(sql);
    },
  };
}
