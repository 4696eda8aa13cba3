import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, createClient, internalPrincipal, type ServiceContext, TtlCache } from '@imagegen/platform';

export interface TenantLimits {
  tenantName: string;
  monthlyQuotaMb: number;
  rateLimitPerMinute: number;
}

/** Where quotas come from; tenancy over gRPC in production, anything in unit tests. */
export type TenantLimitsSource = (tenantId: string) => Promise<TenantLimits | null>;

export function tenancySource(ctx: ServiceContext): { source: TenantLimitsSource; close(): void } {
  const client = createClient(TenancyServiceService, () => ctx.resolve('tenancy'));
  return {
    async source(tenantId) {
      try {
        const t = await client.getTenant({ tenantId }, internalPrincipal(tenantId), { timeoutMs: 5000 });
        return { tenantName: t.tenantName, monthlyQuotaMb: t.monthlyQuotaMb, rateLimitPerMinute: t.rateLimitPerMinute };
      } catch (err) {
        if (err instanceof AppError && err.status === 404) return null;
        throw err;
      }
    },
    close: () => client.close(),
  };
}

/**
 * A short-lived cache in front of the source (default 5 s): quota and rate limit changes made by an
 * admin apply within seconds; TenantChanged events drop an entry at once. Concurrent lookups of the
 * same tenant share one call.
 */
export class TenantLimitsCache {
  private readonly cache: TtlCache<string, TenantLimits | null>;
  constructor(
    private readonly source: TenantLimitsSource,
    ttlMs = 5000,
  ) {
    this.cache = new TtlCache(ttlMs);
  }

  get(tenantId: string): Promise<TenantLimits | null> {
    return this.cache.get(tenantId, this.source);
  }

  /** Like get, but a tenant unknown to tenancy is a 404. */
  async require(tenantId: string): Promise<TenantLimits> {
    const t = await this.get(tenantId);
    if (!t) throw new AppError(404, { error: 'Tenant not found' });
    return t;
  }

  invalidate(tenantId: string): void {
    this.cache.invalidate(tenantId);
  }
}
