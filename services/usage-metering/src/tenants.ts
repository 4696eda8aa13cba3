import { TenancyServiceService } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, createClient, internalPrincipal, type ServiceContext } from '@imagegen/platform';

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
  private readonly entries = new Map<string, { at: number; value: Promise<TenantLimits | null> }>();
  constructor(
    private readonly source: TenantLimitsSource,
    private readonly ttlMs = 5000,
  ) {}

  get(tenantId: string): Promise<TenantLimits | null> {
    const now = Date.now();
    const e = this.entries.get(tenantId);
    if (e && now - e.at < this.ttlMs) return e.value;
    const value = this.source(tenantId);
    this.entries.set(tenantId, { at: now, value });
    value.catch(() => this.entries.get(tenantId)?.value === value && this.entries.delete(tenantId));
    if (this.entries.size > 10_000) {
      for (const [k, v] of this.entries) if (now - v.at >= this.ttlMs) this.entries.delete(k);
    }
    return value;
  }

  /** Like get, but a tenant unknown to tenancy is a 404. */
  async require(tenantId: string): Promise<TenantLimits> {
    const t = await this.get(tenantId);
    if (!t) throw new AppError(404, { error: 'Tenant not found' });
    return t;
  }

  invalidate(tenantId: string): void {
    this.entries.delete(tenantId);
  }
}
